"""Brute force over explicit instances: the reference the auditor is checked against.

Knowledge is a frozenset of instances (tuples: person index -> value). Everything follows the
thesis's definitions word for word, with no cleverness, so it is easy to trust.
"""

from __future__ import annotations

import itertools
from collections import Counter

Instance = tuple


def all_instances(n: int, values: list, closed: bool) -> frozenset[Instance]:
    if closed:
        return frozenset(itertools.permutations(values))
    return frozenset(itertools.product(sorted(set(values)), repeat=n))


def answer(instance: Instance, sets: list[frozenset[int]]) -> tuple:
    return tuple(tuple(sorted(instance[p] for p in s)) for s in sets)


def possible_values(g, n: int) -> list[set]:
    out = [set() for _ in range(n)]
    for inst in g:
        for p, v in enumerate(inst):
            out[p].add(v)
    return out


def is_l_uncertain(g, n: int, l: int) -> bool:
    return bool(g) and all(len(s) >= l for s in possible_values(g, n))


def by_answer(g, sets) -> dict[tuple, frozenset]:
    groups: dict[tuple, set] = {}
    for inst in g:
        groups.setdefault(answer(inst, sets), set()).add(inst)
    return {a: frozenset(s) for a, s in groups.items()}


def unsafe_answers(g, sets, n: int, l: int) -> dict[tuple, frozenset]:
    """Definition 2: an answer is unsafe if a fact has < l distinct values or G|answer is not
    l-uncertain."""
    return {
        a: s for a, s in by_answer(g, sets).items() if any(len(set(m)) < l for m in a) or not is_l_uncertain(s, n, l)
    }


def delta(g, sets, n: int, l: int) -> frozenset:
    return frozenset().union(*unsafe_answers(g, sets, n, l).values())


def floor(d, n: int) -> int | None:
    return None if not d else min(len(s) for s in possible_values(d, n))


def step(g, sets, n: int, l: int, secret: Instance) -> tuple[str, frozenset]:
    """Algorithm 2: (response, new G)."""
    d = delta(g, sets, n, l)
    if d and floor(d, n) < l:
        return "negative-denial", g
    if secret in d:
        return "positive-denial", d
    a = answer(secret, sets)
    return "answer", frozenset(i for i in g if answer(i, sets) == a)


def transcripts(g, queries, n: int, l: int) -> dict[tuple, frozenset]:
    """Run Algorithm 2 for every instance of g as the secret; group instances by what the
    adversary sees (responses and answers). The group of the real table is exactly the
    adversary's knowledge."""
    groups: dict[tuple, set] = {}
    for secret in g:
        cur, seen = g, []
        for q in queries:
            response, cur = step(cur, [q], n, l, secret)
            seen.append((response, answer(secret, [q]) if response == "answer" else None))
        groups.setdefault(tuple(seen), set()).add(secret)
    return {t: frozenset(s) for t, s in groups.items()}


def satisfies(inst: Instance, facts: list[tuple[frozenset[int], Counter]]) -> bool:
    return all(Counter(inst[p] for p in members) == counts for members, counts in facts)


def instances_of(knowledge, universe_instances) -> frozenset:
    """The instances described by an auditor's knowledge dictionary (its branches). An implicit
    knowledge (a positive denial whose unsafe answers were not listed) is Delta of its base,
    computed here by brute force."""
    u = knowledge.universe
    if knowledge.denial is not None:
        d = knowledge.denial
        base = instances_of(d.base, universe_instances)
        return delta(base, list(d.sets), u.n, d.l)
    branches = [[(c.members, Counter(u.multiset(c.counts))) for c in b] for b in knowledge.branches]
    return frozenset(i for i in universe_instances if any(satisfies(i, b) for b in branches))
