"""[technique] keys of ambiguity and priview: the thresholds alpha (presence) and beta
(association), the greedy grouping's window; priview also probe_queries and st_qi."""

from __future__ import annotations

from pydantic import Field

from privpub.tasks.core.params import Probability, TechniqueParams, integer

DEFAULT_WINDOW = 32
PROBABILITY = "a probability in (0, 1]"


class AmbiguityParams(TechniqueParams):
    alpha: Probability = Field(description=PROBABILITY)
    beta: Probability = Field(description=PROBABILITY)
    window: int = integer(1, DEFAULT_WINDOW)


class PriViewParams(AmbiguityParams):
    probe_queries: int = integer(1, 50)
    # optional: fix the split instead of choosing it (a QI name, checked against the dataset)
    st_qi: str | None = Field(None, description="the name of a quasi-identifier")
