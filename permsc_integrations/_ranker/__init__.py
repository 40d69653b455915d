"""The ranker: :class:`.ranker.PSCRanker` turns a query and its items into a request, chooses
its plan, runs it (:mod:`permsc_integrations._run`) and returns a
:class:`~permsc_integrations.results.RankingResult`.
"""
