"""[technique] keys of anatomy: l, the distinct sensitive values of every group."""

from __future__ import annotations

from privpub.tasks.core.params import TechniqueParams, integer


class AnatomyParams(TechniqueParams):
    l: int = integer(2)

    def k_and_l(self) -> tuple[int | None, int | None]:
        return None, self.l
