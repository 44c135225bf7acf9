"""[technique] keys of muco: delta, optional l and chunk_rows."""

from __future__ import annotations

from pydantic import Field

from privpub.tasks.core.params import Probability, TechniqueParams, integer

# Rows per chunk of whole groups. The chunk layout (and so each chunk's random stream) follows
# from the data and this number only, never from the task runner or its workers.
CHUNK_ROWS = 50_000


class MuCoParams(TechniqueParams):
    delta: Probability = Field(description='a probability in (0, 1], e.g. delta = 0.1667 or delta = "1/6"')
    l: int | None = integer(1, None)
    # part of the result (each chunk draws from its own stream), hence a technique parameter
    chunk_rows: int = integer(1, CHUNK_ROWS)

    def k_and_l(self) -> tuple[int | None, int | None]:
        return None, self.l
