"""The way out to the model: every call a request sends goes through :class:`.calls.Calls`,
which waits for a slot of the shared :class:`.limiter.CallLimiter`, passes the
:class:`.breaker.Breaker`, spends from the request's :class:`.spending.Meter` (budgets, the
money caps of :mod:`.caps`, admission of a request under a ranker's cap: :mod:`.admission`),
retries as :class:`.retry.RetryPolicy` says (its one loop, :class:`.retry.Attempts`), and
answers from a response :mod:`.cache` when it can. Whatever waits for another thread or event
loop (a limiter slot, the breaker's probe, room under a cap) waits on a :class:`.turn.Turn`.
:mod:`.bridge` is the one way from sync code into the async implementation.

Nothing here knows about options, strategies or rankings: it sends prompts and counts them.
"""
