"""[technique] keys of generalization: k, and l for distinct l-diversity."""

from __future__ import annotations

from privpub.tasks.core.params import TechniqueParams, integer


class GeneralizationParams(TechniqueParams):
    k: int = integer(1)
    l: int | None = integer(1, None)

    def k_and_l(self) -> tuple[int | None, int | None]:
        return self.k, self.l
