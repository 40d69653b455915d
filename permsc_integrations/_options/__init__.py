"""The ranker's options, declared once: :class:`.options.RankingOptions` (checked, frozen),
their keyword types (:mod:`.keywords`) and the values some of them take (:mod:`.values`).
Pure: options are built and checked without I/O.
"""
