"""Anatomy (Xiao and Tao, VLDB 2006): l-diverse buckets, QI values published exactly.

Group creation (their Fig. 5): hash the tuples by sensitive value; while at least l hash buckets
are non-empty, take one tuple from each of the l largest buckets to form a QI-group. The at most
l - 1 remaining tuples (each with a different value) join a group that lacks their value. This
succeeds when no sensitive value occurs in more than n / l tuples (l-eligibility), and every
group then has l distinct values, each once (a residual tuple adds a new value), so an adversary
links a person to a sensitive value with probability at most 1/l.

Published tables:  QIT (QI columns, gid)  and  ST (gid, sensitive value, count).

Several rows per person (`[dataset] rows_per_person = "many"`, docs/models.md): groups of
PEOPLE (`anatomy_people_groups`): every person's rows in one group, and in every group each value
is held by at most 1/l of its people. ST then counts the group's PEOPLE holding each value, and
`release.private["people"]` keeps each QIT row's person number for the verifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import partial
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd
import pandera.pandas as pdr
import pyarrow as pa

from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.compact_table import CompactTable
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.technique import Capabilities, Description, Technique, find_result
from privpub.tasks.core.types import ChunkPlan, Partition, PrivacyResult, Release, VerifyContext
from privpub.tasks.evaluate.counting import QueryAnswers, arrow_codes, arrow_plain_column
from privpub.tasks.evaluate.quality import QualityView
from privpub.tasks.evaluate.workload import ColumnIndex, RangeCond, SetCond
from privpub.tasks.report.figures import fmt
from privpub.tasks.risk import st_attribute_risk
from privpub.tasks.techniques.anatomy.params import AnatomyParams
from privpub.tasks.techniques.registry import register
from privpub.tasks.verify import published
from privpub.tasks.verify.published import PEOPLE, people_table


class AnatomyError(ValueError):
    """The table is not l-eligible."""


def anatomy_groups(sensitive_codes: np.ndarray, l: int, rng: np.random.Generator) -> np.ndarray:
    """A group id per row, following Xiao and Tao's group-creation step."""
    n = len(sensitive_codes)
    counts = np.bincount(sensitive_codes)
    if n == 0 or counts.max() * l > n:
        most = int(counts.max()) if n else 0
        raise AnatomyError(
            f"Anatomy with l = {l} needs every sensitive value in at most n/l = {n / l:.1f} "
            f"rows; the most frequent value has {most}"
        )
    # rows of each value, in random order: value v's rows are stack[start[v]:start[v] + counts[v]]
    order = np.lexsort((rng.random(n), sensitive_codes))
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    left = counts.copy()
    group = np.full(n, -1, dtype=np.int64)
    gid = 0
    while (left > 0).sum() >= l:
        top = np.argpartition(-left, l - 1)[:l]  # the l largest buckets
        # taking alpha rounds at once keeps the same buckets on top while they stay >= the rest
        rest = np.delete(left, top)
        alpha = max(1, int(left[top].min() - (rest.max() if len(rest) else 0)))
        for v in top:
            rows = order[start[v] + counts[v] - left[v] : start[v] + counts[v] - left[v] + alpha]
            group[rows] = gid + np.arange(alpha)
        left[top] -= alpha
        gid += alpha
    residue = np.flatnonzero(group < 0)
    for r in residue:
        v = sensitive_codes[r]
        has_v = np.zeros(gid, dtype=bool)
        has_v[group[(sensitive_codes == v) & (group >= 0)]] = True
        group[r] = rng.choice(np.flatnonzero(~has_v))
    return group


def value_people(person: np.ndarray, sensitive_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (person, value) pairs: (person, value code) arrays, sorted by person then value."""
    width = int(sensitive_codes.max()) + 1 if len(sensitive_codes) else 1
    key = np.unique(person.astype(np.int64) * width + sensitive_codes)
    return key // width, key % width


def not_eligible(l: int, most: int, people: int) -> AnatomyError:
    return AnatomyError(
        f"the table is not {l}-eligible: a sensitive value is held by {most} of {people} people "
        "(more than people/l; a person's rows count once)"
    )


def anatomy_people_groups(
    person: np.ndarray, sensitive_codes: np.ndarray, l: int, rng: np.random.Generator
) -> np.ndarray:
    """A group id per row when a person may have several rows: every person's rows in one group,
    and in every group each value held by at most 1/l of its people (Anatomy's l-eligibility
    counted in people: needed, since the groups' counts add up to the table's, and enough, since
    the whole table is then one such group).

    People are dealt round-robin into G groups, ordered by the most frequent value they hold
    (among the people being dealt), then their second, then at random: a value's holders run
    consecutively, so a run no longer than G puts at most one of them in a group (for one value
    per person, exactly Xiao and Tao's groups of l). Two groupings are built, and the one whose
    people sit in smaller groups (the least sum of squared group sizes) is published:
    - greedy (`_greedy_groups`): G = P/l; the groups that keep the bound are kept as long as the
      people left stay eligible (else half of them, ...); the rest are dealt again, into fewer
      groups when none can be kept (G shrinking by a tenth; G = 1 is all of them, eligible).
      Mostly groups of l people, but people no small group fits end in one large group;
    - even (`_even_groups`): everybody into the largest G (P/l, then a tenth fewer, ...) for
      which every group keeps the bound: groups of one size.
    """
    p_of, v_of = value_people(person, sensitive_codes)
    people = int(person.max()) + 1 if len(person) else 0
    values = int(sensitive_codes.max()) + 1 if len(sensitive_codes) else 1
    held = np.bincount(v_of, minlength=values)  # people holding each value
    if people == 0 or held.max() * l > people:
        raise not_eligible(l, int(held.max()) if people else 0, people)
    noise = rng.random(people)  # ties at random (drawn once: the order depends only on the people left)
    unit_ptr = np.searchsorted(p_of, np.arange(people + 1))  # person p's values: v_of[unit_ptr[p]:unit_ptr[p+1]]
    left = _dealing_order(np.arange(people), unit_ptr, v_of, values, noise)  # the people still to place
    greedy = _greedy_groups(left, unit_ptr, v_of, values, noise, l)
    even = _even_groups(left, unit_ptr, v_of, values, l)
    # the grouping whose people are in smaller groups: the mean, over people, of their group's people
    chosen = min((greedy, even), key=lambda g: int((np.bincount(g).astype(np.int64) ** 2).sum()))
    group: np.ndarray = chosen[person]
    return group


def _group_most(
    g: np.ndarray, unit_ptr: np.ndarray, left: np.ndarray, v_of: np.ndarray, values: int, deal: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, npt.NDArray[np.int64]]:
    """People `left` dealt into groups g (one per person): (each unit's group, each unit's value,
    the (group, value) keys and their people, the most people holding one value per group)."""
    unit_g = g[np.repeat(np.arange(len(left)), unit_ptr[left + 1] - unit_ptr[left])]
    unit_v = v_of[_ranges(unit_ptr, left)]
    key, count = np.unique(unit_g * values + unit_v, return_counts=True)  # people per (group, value)
    kg = key // values
    starts = np.flatnonzero(np.r_[True, kg[1:] != kg[:-1]])
    most = np.zeros(deal, np.int64)
    most[kg[starts]] = np.maximum.reduceat(count, starts)
    return unit_g, unit_v, key, count, most


def _even_groups(order: np.ndarray, unit_ptr: np.ndarray, v_of: np.ndarray, values: int, l: int) -> np.ndarray:
    """Everybody dealt into G groups of about equal size, G the first of P/l, 0.9 of it, ... for
    which every group keeps the bound (G = 1 does); a group per person."""
    deal = max(len(order) // l, 1)
    while True:
        g = np.arange(len(order)) % deal
        *_, most = _group_most(g, unit_ptr, order, v_of, values, deal)
        if deal == 1 or (most * l <= np.bincount(g, minlength=deal)).all():
            group = np.empty(len(order), np.int64)
            group[order] = g
            return group
        deal = max(1, min(deal - 1, int(deal * 0.9)))


def _greedy_groups(
    left: np.ndarray, unit_ptr: np.ndarray, v_of: np.ndarray, values: int, noise: np.ndarray, l: int
) -> np.ndarray:
    """The groups that keep the bound kept, round after round, while the people left stay
    eligible (`_kept_groups`); a group per person."""
    group = np.full(len(left), -1, np.int64)
    placed = 0
    deal = max(len(left) // l, 1)
    while len(left):
        g = np.arange(len(left)) % deal
        unit_g, unit_v, key, count, most = _group_most(g, unit_ptr, left, v_of, values, deal)
        ok = most * l <= np.bincount(g, minlength=deal)
        keep = _kept_groups(ok, unit_g, unit_v, g, key // values, key % values, count, values, l)
        if keep is None:  # no group can go: fewer, larger groups
            deal = max(1, min(deal - 1, int(deal * 0.9)))
            continue
        placed_here = keep[g]
        group[left[placed_here]] = placed + (np.cumsum(keep) - 1)[g[placed_here]]
        placed += int(keep.sum())
        left = _dealing_order(left[~placed_here], unit_ptr, v_of, values, noise)
        deal = max(1, min(deal, len(left) // l))
    return group


def _dealing_order(
    left: np.ndarray, unit_ptr: np.ndarray, v_of: np.ndarray, values: int, noise: np.ndarray
) -> np.ndarray:
    """`left` (people) ordered by the most frequent value they hold among these people, then their
    second most frequent, then `noise`: each value's holders as few runs as can be."""
    if not len(left):
        return left
    owner = np.repeat(np.arange(len(left)), unit_ptr[left + 1] - unit_ptr[left])
    unit_v = v_of[_ranges(unit_ptr, left)]
    held = np.bincount(unit_v, minlength=values)
    rank = np.empty(values, np.int64)
    rank[np.lexsort((np.arange(values), -held))] = np.arange(values)  # 0: the most frequent value
    r = rank[unit_v]
    by = np.lexsort((r, owner))
    first = np.ones(len(by), bool)
    first[1:] = owner[by][1:] != owner[by][:-1]
    second = np.zeros(len(by), bool)
    second[1:] = first[:-1] & ~first[1:]
    top, next_ = np.full(len(left), values), np.full(len(left), values)
    top[owner[by][first]] = r[by][first]
    next_[owner[by][second]] = r[by][second]
    return left[np.lexsort((noise[left], next_, top))]


def _kept_groups(
    ok: npt.NDArray[np.bool_],
    unit_g: np.ndarray,
    unit_v: np.ndarray,
    g: np.ndarray,
    kg: np.ndarray,
    kv: np.ndarray,
    count: np.ndarray,
    values: int,
    l: int,
) -> npt.NDArray[np.bool_] | None:
    """Which of the dealt groups to keep (a bool per group), or None: the groups that keep the
    bound, as long as the people left stay eligible; else the half of them that spends least of
    the most frequent value's room (those holding it first), a quarter, ..."""
    if not ok.any():
        return None
    tight = int(np.argmax(np.bincount(unit_v, minlength=values)))  # the value with the least room left
    holds_tight = np.zeros(len(ok), np.int64)
    holds_tight[kg[kv == tight]] = count[kv == tight]
    candidates = np.flatnonzero(ok)
    candidates = candidates[np.argsort(-holds_tight[candidates], kind="stable")]
    take = len(candidates)
    while take:
        keep = np.zeros(len(ok), bool)
        keep[candidates[:take]] = True
        rest_people = int((~keep[g]).sum())
        rest = np.bincount(unit_v[~keep[unit_g]], minlength=values)
        if rest.max(initial=0) * l <= rest_people:
            return keep
        take //= 2
    return None


def st_group_sums(st_gid: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Per ST row, the sum of its group's counts."""
    ids, inv = np.unique(st_gid, return_inverse=True)
    sums: np.ndarray = np.bincount(inv, weights=count, minlength=len(ids))[inv]
    return sums


def _ranges(ptr: np.ndarray, which: np.ndarray) -> np.ndarray:
    """The positions ptr[w]:ptr[w+1] of every w in `which`, concatenated in that order."""
    lengths = ptr[which + 1] - ptr[which]
    starts = np.repeat(ptr[which] - (np.cumsum(lengths) - lengths), lengths)
    positions: npt.NDArray[np.int64] = np.arange(int(lengths.sum()), dtype=np.int64) + starts
    return positions


class Conditioned(Protocol):
    """A query read through its conditions only (SELECT SUM(S) WHERE the conditions)."""

    @property
    def conditions(self) -> tuple[tuple[str, RangeCond | SetCond], ...]: ...


@register
class Anatomy(Technique):
    name = "anatomy"
    Params = AnatomyParams
    params: AnatomyParams
    table_names = ("QIT", "ST")
    capabilities = Capabilities(
        many_rows_per_person=True,  # groups of people, counted in people (anatomy_people_groups)
        randomized=True,  # its groups are drawn at random
        risk_note=(
            "Anatomy publishes every quasi-identifier value unchanged (QIT): identity disclosure, "
            "finding a person's QIT row, is not reduced, so its identity figures equal the input's. "
            "It reduces attribute disclosure: ST shows each group's sensitive values only as counts, "
            "so a person linked to their group has their value guessed with probability at most "
            "attribute-risk-max."
        ),
    )

    def check_data(self, data: Microdata) -> None:
        if data.person is not None:
            _, v_of = value_people(data.person, data.sensitive_codes)
            held = np.bincount(v_of)
            if held.max() * self.params.l > data.people:
                raise not_eligible(self.params.l, int(held.max()), data.people)
            return
        counts = np.bincount(data.sensitive_codes)
        if counts.max() * self.params.l > data.n:
            raise AnatomyError(
                f"the table is not {self.params.l}-eligible: a sensitive value occurs in "
                f"{counts.max()} of {data.n} rows (more than n/l)"
            )

    def partition(self, data: Microdata, rng: np.random.Generator) -> Partition:
        self.check_data(data)
        if data.person is not None:
            group = anatomy_people_groups(data.person, data.sensitive_codes, self.params.l, rng)
        else:
            group = anatomy_groups(data.sensitive_codes, self.params.l, rng)
        return Partition(group=group, n_groups=int(group.max()) + 1, info={"partitioner": "anatomy"})

    def anonymize(self, data: Microdata, part: Partition, rng: np.random.Generator) -> Release:
        perm = rng.permutation(data.n)
        qit = {name: pa.array(data.frame[name].to_numpy()[perm]) for name in data.qi_names}
        qit["gid"] = pa.array(part.group[perm])
        sens = data.spec.dataset.sensitive
        rows = pd.DataFrame({"gid": part.group, sens: data.frame[sens].to_numpy()})
        private: dict[str, Any] = {}
        if data.person is not None:
            # ST counts the PEOPLE holding each value (a person's rows count once): counts of rows would
            # tell how many records a person has, and so which value is the person's (docs/models.md)
            rows = rows[
                ~pd.Series(data.person * len(data.sensitive_values) + data.sensitive_codes).duplicated().to_numpy()
            ]
            # each QIT row's person, renumbered in QIT's order: never an id, nor the input's order
            private[PEOPLE] = people_table(data.person[perm])
        st = rows.groupby(["gid", sens], sort=True).size().rename("count").reset_index()
        st["count"] = st["count"].astype(np.int64)
        info = {"groups": int(part.n_groups), "min_group": int(part.sizes.min()), "max_group": int(part.sizes.max())}
        return Release({"QIT": pa.table(qit), "ST": pa.Table.from_pandas(st, preserve_index=False)}, private, info)

    def one_piece(self, release: Release) -> bool:
        """One verify step for a QIT of at most chunk_rows rows."""
        rows: int = release.tables["QIT"].num_rows  # pyarrow is untyped
        return rows <= self.spec.run.chunk_rows

    def split_verify(
        self, release: Release, context: VerifyContext
    ) -> ChunkPlan[AnatomyChunk, dict[str, Any], list[PrivacyResult]]:
        chunks = anatomy_chunks(release, self.spec.dataset.sensitive, self.spec.run.chunk_rows)
        return ChunkPlan(chunks, anatomy_chunk_figures, partial(anatomy_results, l=self.params.l))

    def _bucket_stats(self, release: Release) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
        qit = release.tables["QIT"].to_pandas()
        st = release.tables["ST"].to_pandas()
        size = qit.groupby("gid").size()
        return qit, st, size

    def estimate_counts(self, release: Release, workload: Any) -> np.ndarray:
        """Each matching QIT row holds value v with probability count(gid, v) / |gid|: one
        weighted copy of a QIT row per value its group holds, grouped by value once."""
        qit, st = release.tables["QIT"], release.tables["ST"]
        gid = qit.column("gid").to_numpy()
        order = np.argsort(gid, kind="stable")
        st_gid = st.column("gid").to_numpy()
        first = np.searchsorted(gid[order], st_gid, side="left")
        size = np.searchsorted(gid[order], st_gid, side="right") - first  # |gid| of each ST row
        entry = np.repeat(np.arange(st.num_rows), size)  # one copy per (ST row, member of its group)
        offset = np.arange(len(entry)) - np.repeat(np.cumsum(size) - size, size)
        rows = order[first[entry] + offset]
        if self.spec.dataset.rows_per_person == "many":
            # ST counts people: a row holds v with the share of v among its group's (person, value) pairs
            size = st_group_sums(st_gid, st.column("count").to_numpy())
        weights = (st.column("count").to_numpy() / np.where(size > 0, size, 1))[entry]
        s_codes, s_values = arrow_codes(st.column(self.spec.dataset.sensitive))
        used = {name for q in workload for name, _ in q.conditions}
        columns = {name: arrow_plain_column(qit.column(name)) for name in used}
        return QueryAnswers(columns, s_codes[entry], s_values.tolist(), rows, weights).answers(workload)

    def estimate_sums(self, release: Release, queries: Sequence[Conditioned]) -> np.ndarray:
        """Each matching QIT row contributes its bucket's average sensitive value."""
        qit, st, size = self._bucket_stats(release)
        sens = self.spec.dataset.sensitive
        if self.spec.dataset.rows_per_person == "many":  # ST counts people: its counts weigh the values
            size = st.groupby("gid")["count"].sum()
        mean = (st[sens].astype(float) * st["count"]).groupby(st["gid"]).sum() / size
        out, index, gid = [], ColumnIndex(qit), qit["gid"].to_numpy()
        for q in queries:
            matched = pd.Series(gid[index.mask(q.conditions)]).value_counts()
            out.append(float((matched * mean.reindex(matched.index)).sum()))
        return np.array(out)

    def describe(self, privacy: Sequence[PrivacyResult], sensitive: str) -> Description:
        lv, ad = find_result(privacy, "l-diversity (distinct)"), find_result(privacy, "attribute disclosure")
        if find_result(privacy, "people per group") is not None:  # rows_per_person = "many"
            return Description(
                sentences=(
                    "The quasi-identifiers are published exactly as they are (table QIT), so an adversary who knows "
                    f"them can find a person's rows and their group (all of a person's rows are in one); the {sensitive} "
                    "values are published only per group, as counts of the people holding each (table ST), never of "
                    "records"
                    + (f": each group holds {fmt(lv.value)} or more values" if lv else "")
                    + (f", and at most {fmt(ad.value)} of its people hold any one of them" if ad else ""),
                )
            )
        return Description(
            sentences=(
                "The quasi-identifiers are published exactly as they are (table QIT), so an adversary who knows them "
                f"can find a person's row and group; the {sensitive} values are published only per group, as counts "
                "(table ST)"
                + (f": they learn only that the person's value is one of {fmt(lv.value)} or more values" if lv else "")
                + (f", guessed right with probability at most {fmt(ad.value)}" if ad else ""),
            )
        )

    def quality_view(self, release: Release) -> QualityView:
        """QIT's rows are the records (exact QIs: no generalization loss); for the joint with the
        sensitive column each QIT row stands for its group's ST values in their shares (the
        analyst's reading: the value is one of the group's). A class is a QI-group, bound to hold
        l rows (l distinct values)."""
        qit, st = release.tables["QIT"], release.tables["ST"]
        sensitive = self.spec.dataset.sensitive
        st_frame = st.select(["gid", sensitive, "count"]).to_pandas()
        sizes = st_frame.groupby("gid")["count"].transform("sum")
        st_frame = st_frame.assign(share=st_frame["count"] / sizes)
        qit_frame = qit.to_pandas().assign(_row=np.arange(qit.num_rows))
        joint = qit_frame.merge(st_frame[["gid", sensitive, "share"]], on="gid").sort_values(["_row", sensitive])
        weights = joint.pop("share").to_numpy(dtype=float)
        _, classes = np.unique(np.asarray(qit.column("gid")), return_counts=True)
        joint_table = pa.Table.from_pandas(joint.drop(columns="_row"), preserve_index=False)
        return QualityView(qit, sensitive, joint_table, weights, classes=classes, k=self.params.l)

    def risk_table(self, release: Release) -> tuple[Any, list[str]] | None:
        """QIT publishes the QI values as they are: its identity risk is the input's."""
        return release.tables["QIT"], self.spec.dataset.qi_names

    def attribute_risk(self, release: Release) -> float | None:
        """Per group, ST's largest count over the group's size (the sum of its counts); under
        rows_per_person = "many", over the group's people (release.private["people"]): the share
        of its people holding one value."""
        if qit_people(release) is None:
            return st_attribute_risk(release.tables["ST"], self.spec.dataset.sensitive)
        results = verify_anatomy(release, self.spec.dataset.sensitive, self.params.l)
        return float(Fraction(results[2].value))

    def attribute_table(self, release: Release) -> tuple[Any, list[str], str | None] | None:
        """A person linked to their QIT row learns their group's ST counts."""
        return release.tables["ST"], ["gid"], "count"

    def table_schemas(self, data_spec: ReleaseSpec) -> dict[str, Any]:
        ds = data_spec.dataset
        qit = {name: pdr.Column(nullable=False) for name in ds.qi_names}
        qit["gid"] = pdr.Column(int, pdr.Check.ge(0))
        st = {
            "gid": pdr.Column(int, pdr.Check.ge(0)),
            ds.sensitive: pdr.Column(nullable=False),
            "count": pdr.Column(int, pdr.Check.ge(1)),
        }
        return {"QIT": pdr.DataFrameSchema(qit, strict=True), "ST": pdr.DataFrameSchema(st, strict=True)}


# verify: per group, QIT's size against ST's counts, in runs of group ids (verify chunks on the task
# runner). A run holds QIT's group ids of its range (the QI cells are not needed) and ST's rows of
# those groups, about `[run] chunk_rows` QIT rows; the combine keeps one figure per run. Under
# rows_per_person = "many" a run also holds its QIT rows' person numbers (release.private["people"]):
# a group's size is then its distinct people, and ST's counts are people holding each value.
@dataclass
class AnatomyChunk:
    gid: np.ndarray  # QIT's group id of every row of the run's groups
    st: CompactTable  # ST's rows (gid, sensitive value, count) of the run's groups
    sensitive: str
    person: np.ndarray | None = None  # each of those QIT rows' person number (None: a row is a person)


def qit_people(release: Release) -> np.ndarray | None:
    """Each QIT row's person number (rows_per_person = "many", release.private["people"]), or None:
    a row is a person."""
    person = published.release_people(release)
    if person is None:
        return None
    if len(person) != release.tables["QIT"].num_rows:
        raise ValueError(
            f"the release's private people table has {len(person):,} rows, QIT {release.tables['QIT'].num_rows:,}"
        )
    return person


def anatomy_chunks(release: Release, sensitive: str, chunk_rows: int) -> list[AnatomyChunk]:
    """Runs of whole groups: a run starts at the group of every chunk_rows-th QIT row (in group
    order), and takes the ST rows of its group ids."""
    person = qit_people(release)
    if person is None:
        qit_gid = np.sort(release.tables["QIT"].column("gid").to_numpy())
    else:
        gid = release.tables["QIT"].column("gid").to_numpy()
        by_gid = np.argsort(gid, kind="stable")
        qit_gid, person = gid[by_gid], person[by_gid]
    st = release.tables["ST"].select(["gid", sensitive, "count"])
    st_gid = st.column("gid").to_numpy()
    order = np.argsort(st_gid, kind="stable")
    st, st_gid = st.take(pa.array(order)), st_gid[order]
    cuts = np.unique(qit_gid[chunk_rows::chunk_rows])
    qit_at = np.concatenate([[0], np.searchsorted(qit_gid, cuts), [len(qit_gid)]])
    st_at = np.concatenate([[0], np.searchsorted(st_gid, cuts), [len(st_gid)]])
    return [
        AnatomyChunk(qit_gid[a:b], CompactTable(st.slice(c, d - c)), sensitive, None if person is None else person[a:b])
        for a, b, c, d in zip(qit_at[:-1], qit_at[1:], st_at[:-1], st_at[1:])
    ]


def anatomy_chunk_figures(chunk: AnatomyChunk) -> dict[str, Any]:
    """The run's groups: do QIT and ST agree on their sizes, the fewest distinct values (and the
    first group with them), the largest share of one value (and the first group with it).
    With person numbers: sizes are distinct people, a group's ST counts (people holding each
    value) agree with it when none exceeds it and they add up to at least it (every person holds
    a value), and the fewest people of a group (and the first group with them)."""
    st = chunk.st.table.to_pandas()
    if chunk.person is None:
        gids, counts = np.unique(chunk.gid, return_counts=True)
    else:  # distinct (group, person) pairs per group
        width = int(chunk.person.max()) + 1 if len(chunk.person) else 1
        gids, counts = np.unique(np.unique(chunk.gid * width + chunk.person) // width, return_counts=True)
    size = pd.Series(counts.astype(np.int64), index=gids)
    st_size = st.groupby("gid")["count"].sum()
    top = st.groupby("gid")["count"].max()
    if chunk.person is None:
        consistent = size.sort_index().equals(st_size.sort_index().astype(size.dtype))
    else:
        same_groups = size.index.sort_values().equals(st_size.index.sort_values())
        consistent = same_groups and bool(
            ((top <= size.reindex(top.index)) & (st_size >= size.reindex(st_size.index))).all()
        )
    distinct = st.groupby("gid")[chunk.sensitive].nunique()
    frac = (top / size.reindex(top.index)).dropna()
    fewest = (int(distinct.min()), int(distinct.idxmin())) if len(distinct) else None
    if len(frac):
        g = int(frac.idxmax())
        worst = (float(frac[g]), int(top[g]), int(size[g]), g)
    else:
        worst = None
    out = {"consistent": bool(consistent), "fewest": fewest, "worst": worst}
    if chunk.person is not None:
        out["people"] = (int(size.min()), int(gids[np.argmin(counts)])) if len(size) else None  # the first such group
    return out


def anatomy_results(figures: list[dict[str, Any]], l: int) -> list[PrivacyResult]:
    """l-diversity and the 1/l attribute-disclosure bound from the runs' figures (in group
    order: among equal figures the first group wins, as in one pass over the groups); with
    person numbers, the fewest people of a group too (>= l whenever the bound holds)."""
    consistent = all(f["consistent"] for f in figures)
    fewest, g_least = min((f["fewest"] for f in figures if f["fewest"] is not None), key=lambda x: x[0])
    worst = max((f["worst"] for f in figures if f["worst"] is not None), key=lambda w: w[0], default=None)
    if worst is None:
        raise ValueError("ST names no group of QIT")
    _, top, size, g_worst = worst
    worst_frac = Fraction(top, size)
    results = [
        PrivacyResult("QIT and ST agree on group sizes", consistent, True, consistent),
        PrivacyResult("l-diversity (distinct)", fewest, l, bool(fewest >= l), {"gid": g_least}),
        PrivacyResult(
            "attribute disclosure",
            str(worst_frac),
            str(Fraction(1, l)),
            bool(worst_frac <= Fraction(1, l)),
            {"gid": g_worst},
        ),
    ]
    people = [f["people"] for f in figures if f.get("people") is not None]
    if people:  # rows_per_person = "many": the shares above are of people
        worst = {**results[2].worst, "group_people": size, "holding": top, "measures": "people"}
        results[2] = replace(results[2], worst=worst)
        least, g_few = min(people, key=lambda x: x[0])
        results.append(PrivacyResult(PEOPLE_PER_GROUP, least, l, bool(least >= l), {"gid": g_few}))
    return results


PEOPLE_PER_GROUP = "people per group"


def verify_anatomy(release: Release, sensitive: str, l: int, chunk_rows: int | None = None) -> list[PrivacyResult]:
    """l-diversity and the 1/l attribute-disclosure bound, read from QIT and ST only (every run
    in this process; one run unless chunk_rows is given); with release.private["people"], counted
    in people."""
    rows = chunk_rows or max(release.tables["QIT"].num_rows, 1)
    return anatomy_results([anatomy_chunk_figures(c) for c in anatomy_chunks(release, sensitive, rows)], l)
