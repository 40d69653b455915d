"""The cost-quality frontier (issue 31): one model of the list from every sample, the next
round's calls where the top k is still uncertain, within a call budget or until certified.

Pure (no I/O, explicit seeds); a strategy drives :class:`Frontier` round by round.

Example:
    >>> from permsc_integrations.strategies._frontier import Frontier, Settings
    >>> Frontier(100, Settings(budget=6)).head
    80
"""

from permsc_integrations.strategies._frontier.model import Answer, ListFit, fit_list, is_copy
from permsc_integrations.strategies._frontier.policy import Frontier, FrontierResult, Settings
from permsc_integrations.strategies._frontier.stopping import ties, unsettled

__all__ = [
    "Answer",
    "ListFit",
    "fit_list",
    "is_copy",
    "Frontier",
    "FrontierResult",
    "Settings",
    "ties",
    "unsettled",
]
