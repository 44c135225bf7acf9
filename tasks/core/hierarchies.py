"""Generalization hierarchies built from the data: `hierarchy = "mask"` for code-like values
(postcodes, ICD codes).

Level i of a value masks its last i characters: "10115" -> "1011*" -> "101**" -> ... -> "*****".
Values of one length meet at the all-masked node of that length; when the values have several
lengths those nodes (and the values of length 1) hang under one root "*". The leaves are the
data's distinct values, which must not hold the mask character (schemas/input.py refuses them).
`[dataset] missing = "category"`'s value "(missing)" is no code: it hangs under the root.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privpub.schemas.spec import MASK_CHAR, MISSING_CATEGORY


def mask_hierarchy(values: np.ndarray | list[str]) -> dict[str, list[str]]:
    """{parent: [children]} over the distinct `values` (children sorted), one root. A loop over
    the levels (the longest value's length), vectorised over the values."""
    distinct = pd.Series(sorted({str(v) for v in values}), dtype=object)
    has_missing = bool((distinct == MISSING_CATEGORY).any())
    codes = distinct[distinct != MISSING_CATEGORY].reset_index(drop=True)
    if codes.str.contains(MASK_CHAR, regex=False).any():  # refused by validation; a loop in the tree else
        raise ValueError(f'hierarchy = "mask": a value holds the mask character {MASK_CHAR!r}')
    lengths = codes.str.len()
    edges: list[pd.DataFrame] = []
    child = codes
    for level in range(1, int(lengths.max()) + 1 if len(codes) else 1):
        keep = lengths >= level  # a shorter value is all masked already
        parent = codes[keep].str.slice(stop=-level) + MASK_CHAR * level
        edges.append(pd.DataFrame({"parent": parent.to_numpy(), "child": child[keep].to_numpy()}))
        child = child.where(~keep, parent)
    # the all-masked node of each length; several (or "(missing)") meet under the root "*"
    tops = sorted({MASK_CHAR * int(n) for n in lengths.unique()})
    if len(tops) != 1 or has_missing:
        below_root = [t for t in tops if t != MASK_CHAR] + ([MISSING_CATEGORY] if has_missing else [])
        edges.append(pd.DataFrame({"parent": MASK_CHAR, "child": below_root}))
    pairs = pd.concat(edges, ignore_index=True).drop_duplicates().sort_values(["parent", "child"])
    return {str(parent): list(kids) for parent, kids in pairs.groupby("parent", sort=True)["child"]}
