"""The one-sentence reasons an analyst reads with every decision (plain words, no person, no value).

A negative denial is decided without the real data, a positive denial because of it; a budget
denial is the auditor's own limit. The texts say which, because the three mean different things
to the analyst: only a positive denial depends on the table (and then reveals only that the real
answer is among the unsafe ones).
"""

from __future__ import annotations


def negative(l: int) -> str:
    return (
        "answering could, for some data consistent with what you have already seen, narrow someone "
        f"to fewer than {l} values; this decision does not depend on the real data"
    )


def structural(l: int) -> str:
    """Route 1: every answer narrows a small group, whatever the data (reported as positive-denial,
    but decided without reading the table)."""
    return (
        f"every possible answer is unsafe: any answer would narrow a group of fewer than {l} people to "
        f"fewer than {l} values, whatever the data; this decision does not depend on the real data"
    )


def positive(l: int) -> str:
    return (
        f"the real data would narrow someone to fewer than {l} values if this were answered (who and "
        "which value are not told); the denial reveals only that the real answer is one of the unsafe ones"
    )


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
        f"denied together with {', '.join(names)}: the real answers of the group could narrow someone to "
        f"fewer than {l} values (who and which value are not told)"
    )


def budget(units: int | None, what: str) -> str:
    return (
        f"the work budget of {units} units (solves and solver nodes) was used up before the decision "
        f"({what}); denied without reading the real data; `privpub audit set TABLE --budget N` raises it"
    )


def ceiling(units: int | None, what: str) -> str:
    """The request's ceiling (`[audit] request_budget`), not one check's budget, ran out."""
    return (
        f"this request's ceiling of {units} units of work (solves and solver nodes) was used up before the "
        f"decision ({what}); denied without reading the real data; `privpub audit set TABLE "
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
