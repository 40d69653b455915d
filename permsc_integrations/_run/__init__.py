"""One request while it runs: the rounds a strategy asks for (:mod:`.request`), the request's
identity and limits handed down the path (:mod:`.state`), the ranker's parts built from its
options (:mod:`.engine`), a round's samples in flight and how each is asked (:mod:`.sampling`,
:mod:`.first_token`), the way out to the backend, where usage is counted (:mod:`.calls`), the
cap on calls in flight (:mod:`.limiter`), the breaker that stops calls after a failure every
call would meet (:mod:`.breaker`), the response caches (:mod:`.cache`), the position prior
(:mod:`.calibration`) and the one sync bridge (:mod:`.bridge`).

The only package that runs calls: everything below it (options, strategies, prompts,
aggregators, the window plan) is pure, and the backends are reached through
:mod:`permsc_integrations.backends.base`.
"""
