"""The one-sentence reasons an analyst reads with every decision (plain words, no person, no value).

Each kind's text states its definition (docs/auditing.md, "Responses and their reasons"): a
negative denial is decided without the real data (answering could, for some data consistent with
what was seen, narrow someone); a positive denial because of it (the real answer would narrow
someone, and the denial reveals only that the real answer is one of the unsafe ones); a budget
denial is the auditor's own limit. tests/audit/test_reasons.py checks each text against its kind.
"""

from __future__ import annotations

from privpub.tasks.audit.program import cpu_seconds

# the opening every positive denial's reason shares (tests check it against the definition)
POSITIVE = (
    "the real data would narrow someone to fewer than {l} values if this were answered (who and which value are "
    "not told)"
)


def negative(l: int) -> str:
    return (
        "answering could, for some data consistent with what you have already seen, narrow someone "
        f"to fewer than {l} values; this decision does not depend on the real data"
    )


def structural(l: int) -> str:
    """Route 1 (Delta = G): a positive denial by Algorithm 2 (the query is l-safe and the real
    answer unsafe), whose outcome is known without reading the table because every answer is
    unsafe; so the denial reveals nothing beyond what the analyst knew."""
    return (
        POSITIVE.format(l=l) + f", and so would every possible answer (a group of fewer than {l} people is "
        "fixed by it), so the denial reveals nothing beyond what you already knew"
    )


def positive(l: int) -> str:
    return POSITIVE.format(l=l) + "; the denial reveals only that the real answer is one of the unsafe ones"


def answered(l: int) -> str:
    return f"answered: with this answer everyone still has at least {l} possible values"


def delayed(l: int) -> str:
    return negative(l) + "; the query waits until later answers make it safe"


def batch_negative(l: int) -> str:
    return negative(l) + ", also after the other queries of the batch were decided"


def joint_answered(l: int, names: tuple[str, ...]) -> str:
    return f"answered together with {', '.join(names)}: with these answers everyone still has at least {l} values"


def joint_denied(l: int, names: tuple[str, ...]) -> str:
    return (
        f"denied together with {', '.join(names)}: the real answers of the group would narrow someone to "
        f"fewer than {l} values (who and which value are not told)"
    )


def budget(units: int | None, what: str) -> str:
    """One check's budget (`[audit] budget`) ran out: what happened, and about how long that is."""
    return (
        f"the work budget of {units} units (solves and solver nodes) was used up before the decision "
        f"({what}): refused, deciding this predicate would take more than {units} work units ({cpu_seconds(units)} "
        "of CPU); denied without reading the real data; `privpub audit set TABLE --budget N` raises it"
    )


def ceiling(units: int | None, what: str) -> str:
    """The request's ceiling (`[audit] request_budget`), not one check's budget, ran out."""
    return (
        f"refused: deciding this predicate would take more than the request budget of {units} work units "
        f"({cpu_seconds(units)} of CPU; {what}); denied without reading the real data; `privpub audit set TABLE "
        "--request-budget N` raises it"
    )


def snapped(reason: str, predicate: str, extra: int) -> str:
    """A decision on a query widened to the public grid: the predicate actually decided first."""
    people = "person" if extra == 1 else "people"
    return f"decided for the grid-aligned query {predicate} ({extra} more {people} than yours): {reason}"


def unlisted(units: int | None, what: str) -> str:
    """after_denial = "list": the query is l-safe, but its unsafe answers did not fit the listing
    allowance, and a refusal without that list would stall every later decision."""
    return (
        f"the answers that would have to be refused could not all be listed within the allowance of {units} "
        f"units of work ({what}), and a refusal without that list would hold up later queries; denied "
        "without reading the real data; `privpub audit set TABLE --budget N` raises it"
    )
