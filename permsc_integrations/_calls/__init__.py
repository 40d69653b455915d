"""The way out to the model: every call a request sends goes through :class:`.calls.Calls`,
which waits for a slot of the shared :class:`.limiter.CallLimiter`, passes the
:class:`.breaker.Breaker`, spends from the request's :class:`.spending.Meter` (budgets, money
caps, admission of a request's cap), retries as :class:`.retry.RetryPolicy` says, and answers
from a response :mod:`.cache` when it can. :mod:`.bridge` is the one way from sync code into
the async implementation.

Nothing here knows about options, strategies or rankings: it sends prompts and counts them.
"""
