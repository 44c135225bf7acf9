"""Serial publishing with the global guarantee for transient sensitive values (issue 5).

statistics.py  the Section 7 statistics file and its per-(person, value) aggregate
grouping.py    bottom-up groups that meet every member's required ratio
publish.py     the published tables (generalized QI ranges, sensitive multisets, group sizes)
The technique itself is technique.py; the formulas are guarantee.py, the per-group checks groups.py.
"""
