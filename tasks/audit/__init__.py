"""The l-uncertainty auditor (Li Deng, "Simulatable Auditing in Micro-Databases", Chapters 3-5).

Pure algorithmic core: no Prefect, no database. The state database stores `Auditor.to_state()`
and the decision log (`Decision.to_dict()`); `Auditor.from_state()` restores the auditor.
"""

from privpub.tasks.audit.auditor import DEFAULT_BUDGET, STRATEGIES, Auditor, Decision, secret_from_mapping
from privpub.tasks.audit.concurrent import ask_batch
from privpub.tasks.audit.knowledge import Knowledge, Universe
from privpub.tasks.audit.query import select_ids

__all__ = [
    "DEFAULT_BUDGET",
    "Auditor",
    "Decision",
    "Knowledge",
    "STRATEGIES",
    "Universe",
    "ask_batch",
    "secret_from_mapping",
    "select_ids",
]
