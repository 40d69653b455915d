"""One request while it runs: the rounds a strategy asks for (:mod:`.request`), the request's
identity and limits handed down the path (:mod:`.state`), the ranker's parts built from its
options (:mod:`.engine`), a round's samples in flight and how each is asked (:mod:`.sampling`,
:mod:`.first_token`) and the position prior (:mod:`.calibration`). Every call goes out
through :mod:`permsc_integrations._calls`.

The only package that runs calls: everything below it (options, strategies, prompts,
aggregators) is pure, and the backends are reached through
:mod:`permsc_integrations.backends.base`.
"""
