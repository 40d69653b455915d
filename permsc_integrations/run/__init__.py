"""One request while it runs: the request (:mod:`.request`), PSC over a window (:mod:`.engine`),
a window's calls in flight (:mod:`.sampling`), the cap on calls in flight (:mod:`.limiter`),
the breaker that stops calls after a failure every call would meet (:mod:`.breaker`), the
response caches (:mod:`.cache`) and the one sync bridge (:mod:`.bridge`).

The only package that runs calls: everything below it (options, strategies, prompts,
aggregators, the window plan) is pure, and the backends are reached through
:mod:`permsc_integrations.backends.base`.
"""
