"""Re-identification risk of the input and of a release (issue 28, first part).

Figures, each over the records of a table whose quasi-identifier cells an adversary reads:
- `prosecutor-risk-max`: 1 / the size of the smallest equivalence class (records with equal QI
  cells). The prosecutor knows the person is in the table and links them to their class; a
  record of a class of size f is theirs with probability 1 / f.
- `prosecutor-risk-avg`: the mean of 1 / f over the records (= number of classes / records).
- `records-at-risk`: the share of records whose prosecutor risk is above `[risk] threshold`
  (default 0.2: classes of fewer than 5 records).
- `sample-uniques`: the share of records alone in their class.
- `attribute-risk-max`: the highest share of one sensitive value in a class: the probability
  that the prosecutor, having linked a person to their class, names their sensitive value.
- `attribute-gain-max`: the largest (p_g(v) - p(v)) / p(v) over groups g and sensitive values v,
  p(v) the value's share of everyone in the table and p_g(v) its share in g: what linking a
  person to their group adds to what everyone already knows (beta-likeness's figure).
- `attribute-difference-max`: the largest p_g(v) - p(v).
  Both count people when the table has several rows per person (a person counts once in a group,
  and once per value they hold there), else rows; `attribute_summary` says, per value, its share
  and its highest share in a group, and which (value, group) is the worst.
The records at the highest risk are named by row position in the published table
(`riskiest_rows`), never by person id. The input's figures carry the same names prefixed
`input-`, computed on the input's QIs as they are (what a release of the raw table would risk).
A release's figures come from its published tables, the way the adversary reads them
(Technique.risk_table and attribute_risk; tasks/risk/parted.py for rows kept in parts and
folder tables); a technique that publishes QIs unchanged shows identity figures equal to the
input's.

Against a population (`[risk] population`, its size N, or `sample_fraction`, N = records / it;
neither: these are not computed), the table being a sample of fraction pi = records / N
(tasks/population_models.py has the models and their formulas):
- `journalist-risk-max`: the journalist picks a person of the population, not knowing whether
  they are in the table; a record of a class of size f stands for F people of the population,
  and E[1 / F | f] (Benedetti & Franconi) is its risk; the highest over the records.
- `marketer-risk`: the marketer links every record to someone of the population; the expected
  share of correct links, the mean of E[1 / F | f] over the records.
- `population-uniques`: the estimated share of the population unique on the QIs (Dankar et
  al.'s rule between Pitman's and Zayatz's models); the same value is stored under
  `population-uniques-<model>` to name the model, and pi as `sample-fraction`.
A release's pi is its published record count over the same N (suppressed rows leave the
population as it is).

Optional limits refuse a release above them: `[risk] max_prosecutor`, `max_records_at_risk`,
`max_attribute`, `max_gain`, `max_difference`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from privpub.schemas.errors import SpecError
from privpub.schemas.spec import ReleaseSpec
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.core.sensitive_models import pair_counts
from privpub.tasks.core.technique import Technique
from privpub.tasks.core.types import Release
from privpub.tasks.population_models import expected_inverse_class_size, population_uniques
from privpub.tasks.verify.published import class_ids, column_codes, release_people

FIGURES = ("prosecutor-risk-max", "prosecutor-risk-avg", "records-at-risk", "sample-uniques", "attribute-risk-max")
# attribute disclosure as the gain over the base rate (value_shares)
GAIN_FIGURES = ("attribute-gain-max", "attribute-difference-max")
# against a population (with `population-uniques-<model>` and `sample-fraction` beside them)
POPULATION_FIGURES = ("journalist-risk-max", "marketer-risk", "population-uniques")
# [risk] key -> the figure it limits
LIMITS = {
    "max_prosecutor": "prosecutor-risk-max",
    "max_records_at_risk": "records-at-risk",
    "max_attribute": "attribute-risk-max",
    "max_gain": "attribute-gain-max",
    "max_difference": "attribute-difference-max",
}


@dataclass(frozen=True)
class RiskSettings:
    threshold: float = 0.2
    limits: tuple[tuple[str, float], ...] = ()  # (figure, highest value allowed)
    population: int | None = None  # [risk] population: its size
    sample_fraction: float | None = None  # [risk] sample_fraction: the input's share of it

    def population_size(self, records: int) -> int | None:
        """N for an input of `records` records (None: no population given); the releases of
        that input are compared with the same N, whatever rows they suppress."""
        if self.population is not None:
            return self.population
        if self.sample_fraction is not None:
            return max(round(records / self.sample_fraction), records)
        return None

    def check_population(self, records: int) -> None:
        """Refuses a population smaller than the input, once its records are counted."""
        if self.population is not None and self.population < records:
            raise SpecError(
                f"[risk] population = {self.population}: smaller than the input's {records} records "
                "(the input is a sample of the population)"
            )


def risk_settings(spec: ReleaseSpec) -> RiskSettings:
    """[risk] read strictly (schemas/spec.py RiskSpec), each key in its own domain: `population` a
    whole number (at least the input's records, checked once they are counted: check_population),
    `max_gain` a finite number above 0 (a gain is a ratio: 1 allows twice the base rate), every
    other key a number in (0, 1]; a bool, a string or a float where a whole number is expected is
    refused; `population` and `sample_fraction` are exclusive."""
    risk = spec.risk
    limits = tuple((figure, limit) for key, figure in LIMITS.items() if (limit := getattr(risk, key)) is not None)
    return RiskSettings(risk.threshold, limits, risk.population, risk.sample_fraction)


def _classes_of_codes(codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Class id of every row of an (n, D) code matrix, as class_ids does for published cells."""
    key = np.zeros(len(codes), dtype=np.int64)
    bound = 1
    for j in range(codes.shape[1]):
        col = codes[:, j].astype(np.int64)
        width = int(col.max()) + 2 if len(col) else 1  # + 2: the code -1 (missing) gets a place
        if bound * width >= 2**62:
            key, uniq = pd.factorize(key)
            bound = len(uniq)
        key = key * width + (col + 1)
        bound *= width
    ids, uniq = pd.factorize(key)
    return ids.astype(np.int64), len(uniq)


def figures_from_classes(
    size: np.ndarray, most: np.ndarray, threshold: float, population: int | None = None
) -> dict[str, float]:
    """The figures of FIGURES from every class's size and the count of its most frequent
    sensitive value (records: size.sum()), and those against a population of `population`
    people when it is given."""
    n = int(size.sum())
    figures = population_figures(size, population) if population is not None else {}
    if n == 0:
        return {**dict.fromkeys(FIGURES, 0.0), **figures}
    risk = 1.0 / size
    return {
        "prosecutor-risk-max": float(1.0 / size.min()),
        "prosecutor-risk-avg": float(len(size) / n),
        "records-at-risk": float(size[risk > threshold].sum() / n),
        "sample-uniques": float(size[size == 1].sum() / n),
        "attribute-risk-max": float((most / size).max()),
        **figures,
    }


def most_frequent(
    ids: np.ndarray,
    n_classes: int,
    sensitive: np.ndarray,
    weights: np.ndarray | None = None,
    pairs: tuple[np.ndarray, ...] | None = None,
) -> np.ndarray:
    """Per class, the count of its most frequent sensitive code; a negative code (a withheld
    value, shown as null) is nobody's value and never the most frequent. weights: records per
    entry (a published count), else one each. pairs: shown_pairs(ids, sensitive, n_classes), when known."""
    most = np.zeros(n_classes, dtype=np.int64)
    if pairs is not None and weights is None:
        np.maximum.at(most, pairs[0], pairs[2])
        return most
    shown = sensitive >= 0
    ids, sensitive = ids[shown], sensitive[shown]
    if len(ids):
        counted = None if weights is None else weights[shown].astype(np.int64)
        g, _, n = pair_counts(ids, sensitive, n_classes, int(sensitive.max()) + 1, counted)
        np.maximum.at(most, g, n)
    return most


def population_figures(size: np.ndarray, population: int) -> dict[str, float]:
    """The figures of POPULATION_FIGURES for a table whose classes have these sizes, taken as a
    sample of `population` people (docs/risk.md); none when the table holds more records than
    the population (no sample of it)."""
    n = int(size.sum())
    if n == 0:
        return {**dict.fromkeys(POPULATION_FIGURES, 0.0), "sample-fraction": 0.0}
    if n > population:
        return {}
    pi = n / population
    sizes, counts = np.unique(size, return_counts=True)  # the class-size frequency table
    inverse = expected_inverse_class_size(sizes, pi)  # E[1 / F | f], decreasing in f
    uniques, model = population_uniques(sizes, counts, population)
    return {
        "journalist-risk-max": float(inverse[0]),
        "marketer-risk": float((counts * sizes * inverse).sum() / n),
        "population-uniques": uniques,
        f"population-uniques-{model}": uniques,
        "sample-fraction": pi,
    }


def shown_pairs(ids: np.ndarray, sensitive: np.ndarray, n_classes: int, m: int) -> tuple[np.ndarray, ...]:
    """pair_counts of the shown (non-negative) sensitive codes per class: (g, v, n)."""
    shown = sensitive >= 0
    return pair_counts(ids[shown], sensitive[shown], n_classes, m)


def risk_figures(
    ids: np.ndarray,
    n_classes: int,
    sensitive: np.ndarray,
    threshold: float,
    population: int | None = None,
    pairs: tuple[np.ndarray, ...] | None = None,
) -> dict[str, float]:
    """The figures of FIGURES from every record's class and sensitive code (-1: withheld), and
    those against the population when its size is given. pairs: shown_pairs of them, when known."""
    if len(ids) == 0:
        return figures_from_classes(np.zeros(0, np.int64), np.zeros(0, np.int64), threshold, population)
    size = np.bincount(ids, minlength=n_classes)
    return figures_from_classes(size, most_frequent(ids, n_classes, sensitive, pairs=pairs), threshold, population)


def grouped_attribute_risk(keys: list[np.ndarray], sensitive: np.ndarray, count: np.ndarray) -> float:
    """attribute-risk-max of a published count table (Anatomy's, Ambiguity's and PriView's ST):
    the adversary links a person to the rows of one group (`keys`: the columns that name it,
    e.g. gid, or gid and the QI ST shows) and names the group's most frequent sensitive value;
    the group's size is the sum of its counts."""
    if len(count) == 0:
        return 0.0
    group = np.zeros(len(count), dtype=np.int64)
    for key in keys:  # combined one column at a time, compacted so the key never overflows
        code, uniques = pd.factorize(key)
        group = pd.factorize(group * len(uniques) + code)[0]
    n_groups = int(group.max()) + 1
    size = np.bincount(group, weights=count, minlength=n_groups)
    most = most_frequent(group, n_groups, sensitive, count)
    return float((most / size).max())


def st_attribute_risk(st: pa.Table, sensitive: str, also: tuple[str, ...] = ()) -> float:
    """attribute-risk-max of an ST(gid, [also...], sensitive, count) table: a group is a gid
    (and the values of the `also` columns ST shows beside it, e.g. PriView's QI')."""
    keys = [st.column(c).to_numpy(zero_copy_only=False) for c in ("gid", *also)]
    count = st.column("count").to_numpy().astype(np.int64)
    return grouped_attribute_risk(keys, shown_codes(st, sensitive), count)


@dataclass(frozen=True)
class InputClasses:
    """The input's classes (its distinct QI combinations): each row's class id and how many, and
    (one row a person) the rows per (class, sensitive value): keyed and counted once for both
    the risk figures and the attribute shares (a million keys each)."""

    ids: np.ndarray
    n: int
    pairs: tuple[np.ndarray, ...] | None


def input_classes(data: Microdata) -> InputClasses:
    ids, n = _classes_of_codes(data.codes)
    codes = data.sensitive_codes.astype(np.int64)
    pairs = shown_pairs(ids, codes, n, len(data.sensitive_values)) if data.person is None else None
    return InputClasses(ids, n, pairs)


def input_risk(
    data: Microdata, threshold: float, population: int | None = None, classes: InputClasses | None = None
) -> dict[str, float]:
    """The input's figures (`input-` names): its QIs as they are (over people under
    rows_per_person = "many": people_risk_figures). classes: input_classes(data), when known."""
    known = input_classes(data) if classes is None else classes
    ids, n = known.ids, known.n
    if data.person is not None:
        return as_input(
            people_risk_figures(ids, n, data.sensitive_codes.astype(np.int64), data.person, threshold, population)
        )
    return as_input(risk_figures(ids, n, data.sensitive_codes.astype(np.int64), threshold, population, known.pairs))


def people_risk_figures(
    ids: np.ndarray,
    n_classes: int,
    sensitive: np.ndarray,
    person: np.ndarray,
    threshold: float,
    population: int | None = None,
) -> dict[str, float]:
    """FIGURES counted over people (`[dataset] rows_per_person = "many"`, docs/risk.md): a
    class's prosecutor risk is 1 / its distinct people; a person's risk is the highest of the
    classes holding one of their rows (one class in a release; in the input, every QI
    combination of their records); `prosecutor-risk-avg`, `records-at-risk` and `sample-uniques`
    are a mean and shares over people; `attribute-risk-max` is the highest share of a class's
    people holding one sensitive value (a person's value counted once). Against a population
    (of people) only when every person is in one class: the class-size table is then one of
    people."""
    if len(ids) == 0:
        return figures_from_classes(np.zeros(0, np.int64), np.zeros(0, np.int64), threshold, population)
    people_in, most = people_classes(ids, n_classes, sensitive, person)
    width = int(person.max()) + 1
    pairs = np.unique(ids * width + person)  # distinct (class, person)
    risk = np.zeros(width)
    np.maximum.at(risk, pairs % width, 1.0 / people_in[pairs // width])
    risk = risk[np.bincount(person, minlength=width) > 0]  # one entry per person
    one_class_each = len(pairs) == len(risk)
    assert most is not None  # a sensitive array was given
    figures = population_figures(people_in, population) if population is not None and one_class_each else {}
    return {
        "prosecutor-risk-max": float(risk.max()),
        "prosecutor-risk-avg": float(risk.mean()),
        "records-at-risk": float((risk > threshold).mean()),
        "sample-uniques": float((risk == 1.0).mean()),
        "attribute-risk-max": float((most / people_in).max()),
        **figures,
    }


def as_input(figures: dict[str, float]) -> dict[str, float]:
    return {f"input-{name}": value for name, value in figures.items()}


def table_risk(
    table: pa.Table,
    qi_columns: list[str],
    sensitive: str | None,
    threshold: float,
    population: int | None = None,
    person: np.ndarray | None = None,
) -> dict[str, float]:
    """A published table's figures, its QI cells read as published (lists and ranges whole);
    without a sensitive column in the table, no attribute-risk-max (the technique gives it).
    person: each row's person number (release.private["people"]): the figures count people."""
    ids, n = class_ids(table, qi_columns)
    s_codes = shown_codes(table, sensitive) if sensitive else np.zeros(len(ids), np.int64)
    if person is not None:
        figures = people_risk_figures(ids, n, s_codes, person, threshold, population)
    else:
        figures = risk_figures(ids, n, s_codes, threshold, population)
    if not sensitive:
        del figures["attribute-risk-max"]
    return figures


def shown_codes(table: pa.Table, name: str) -> np.ndarray:
    """Codes of a published column, -1 where the cell is null (a withheld value)."""
    codes = column_codes(table, name).astype(np.int64)
    column = table.column(name)
    if column.null_count:
        codes = np.where(np.asarray(pc.is_null(column).to_numpy(zero_copy_only=False)), -1, codes)
    return codes


WORST_CLASSES = 5  # the report lists this many of the riskiest classes


def riskiest_rows(technique: Technique, release: Release, limit: int = 10) -> dict[str, Any] | None:
    """table_riskiest of the Arrow table the technique names for risk (None: no such table;
    a folder of parts: tasks/risk/parted.py)."""
    view = technique.risk_table(release)
    if view is None or not isinstance(view[0], pa.Table):
        return None
    table, columns = view
    sensitive = technique.spec.dataset.sensitive
    has_s = sensitive in table.column_names
    where = table_riskiest(table, columns, sensitive if has_s else None, limit, release_people(release))
    return None if where is None else {**where, "table": table_name(release, table)}


def table_name(release: Release, table: object) -> str:
    """The name of the published table the technique's risk_table returned (the report names it)."""
    return next((name for name, t in release.tables.items() if t is table), "table")


def table_riskiest(
    table: pa.Table, columns: list[str], sensitive: str | None, limit: int = 10, person: np.ndarray | None = None
) -> dict[str, Any] | None:
    """Where the highest prosecutor risk is in a published table (never a person id): the
    smallest class size, how many records have it, the first `limit` of their row positions
    (0-based), and the worst classes (`worst_classes`). None for a table without rows.
    person: each row's person number: class sizes and shares count people ("unit": "people")."""
    ids, n = class_ids(table, columns)
    if not n:
        return None
    if person is not None:
        size, most = people_classes(ids, n, shown_codes(table, sensitive) if sensitive else None, person)
    else:
        size = np.bincount(ids, minlength=n)
        most = most_frequent(ids, n, shown_codes(table, sensitive)) if sensitive else None
    worst = np.flatnonzero(size[ids] == size.min())
    first_row = np.full(n, len(ids), dtype=np.int64)
    np.minimum.at(first_row, ids, np.arange(len(ids)))
    order = np.lexsort((-(most / size) if most is not None else np.zeros(n), size))[:WORST_CLASSES]
    cells = table.select(columns).take(pa.array(first_row[order])).to_pylist()
    out = {
        "class_size": int(size.min()),
        "records": len(worst),
        "rows": worst[:limit].tolist(),
        "classes": worst_classes(cells, size[order], None if most is None else most[order]),
    }
    return out if person is None else {**out, "unit": "people"}


def people_classes(
    ids: np.ndarray, n_classes: int, sensitive: np.ndarray | None, person: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """Per class: its distinct people, and the people holding its most frequent sensitive value
    (a person's value counted once; None without a sensitive column)."""
    width = int(person.max()) + 1
    pairs = np.unique(ids * width + person)
    people_in = np.bincount(pairs // width, minlength=n_classes)
    if sensitive is None:
        return people_in, None
    shown = sensitive >= 0
    m = max(int(sensitive.max()) + 1, 1)
    votes = np.unique(np.searchsorted(pairs, ids[shown] * width + person[shown]) * m + sensitive[shown])
    return people_in, most_frequent((pairs // width)[votes // m], n_classes, votes % m)


def worst_classes(cells: list[dict[str, Any]], size: np.ndarray, most: np.ndarray | None) -> list[dict[str, Any]]:
    """The riskiest classes as the report lists them: their published cells (what every one
    of their rows shows), size and the share of their most frequent sensitive value."""
    out = []
    for i, row in enumerate(cells):
        entry = {"cells": row, "size": int(size[i])}
        if most is not None:
            entry["attribute_risk"] = float(most[i] / size[i])
        out.append(entry)
    return out


def over_limits(figures: dict[str, float], settings: RiskSettings) -> list[str]:
    """What breaks a [risk] limit, one phrase each (empty: none)."""
    return [
        f"{figure} is {figures[figure]:.4g}, above the limit {limit:g}"
        for figure, limit in settings.limits
        if figure in figures and figures[figure] > limit
    ]


# --- attribute disclosure as the gain over what everyone already knows (issue 39) ---------------


def _combined(*columns: np.ndarray) -> np.ndarray:
    """One dense id per entry for the combination of the columns' values, combined one column
    at a time and compacted, so the key never overflows."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for col in columns:
        code, uniques = pd.factorize(col)
        key = pd.factorize(key * len(uniques) + code)[0].astype(np.int64)
    return key


def _first_of_each(ids: np.ndarray) -> np.ndarray:
    """The position of the first entry of each distinct id."""
    return np.unique(ids, return_index=True)[1]


@dataclass(frozen=True)
class ValueShares:
    """Per sensitive value v (its code), in whole counts: the people (rows) holding v, of `total`,
    so p(v) = holders / total; the group where its share p_g(v) is highest, and that group's
    people holding v (`holding`) and people (`size`). Counted over distinct people when
    `people`, else over rows (or the counts of a count table). The figures are computed from
    the counts with one division each, so a gain or a difference that is a short fraction comes
    out exact (a limit of 19 holds a gain of exactly 19)."""

    holders: np.ndarray  # (m,) people (rows) holding v
    group: np.ndarray  # (m,) the first group where p_g(v) is highest; -1 for a value nobody holds
    holding: np.ndarray  # (m,) people (rows) of that group holding v
    size: np.ndarray  # (m,) people (rows) of that group
    total: int  # people (rows) in all
    people: bool

    @property
    def held(self) -> np.ndarray:
        return np.flatnonzero(self.group >= 0)

    @property
    def share(self) -> np.ndarray:
        return self.holders / self.total if self.total else np.zeros(len(self.holders))

    @property
    def highest(self) -> np.ndarray:
        return np.where(self.size > 0, self.holding / np.maximum(self.size, 1), 0.0)

    def _rise(self) -> np.ndarray:
        """holding * total - holders * size: p_g(v) - p(v) times size * total, in whole numbers."""
        return self.holding * self.total - self.holders * self.size  # type: ignore[no-any-return]

    def gains(self) -> np.ndarray:
        """(p_g(v) - p(v)) / p(v) at each value's highest share (0 for a value nobody holds): for a
        value, the gain grows with p_g(v), so this is its largest over groups."""
        below = np.maximum(self.holders * self.size, 1)
        return np.where(self.group >= 0, self._rise() / below, 0.0)

    def differences(self) -> np.ndarray:
        below = np.maximum(self.size * self.total, 1)
        return np.where(self.group >= 0, self._rise() / below, 0.0)

    def figures(self) -> dict[str, float]:
        held = self.held
        if not len(held):
            return dict.fromkeys(GAIN_FIGURES, 0.0)
        return {
            "attribute-gain-max": float(self.gains()[held].max()),
            "attribute-difference-max": float(self.differences()[held].max()),
        }


def value_shares(
    group: np.ndarray,
    value: np.ndarray,
    n_groups: int,
    m: int,
    weight: np.ndarray | None = None,
    person: np.ndarray | None = None,
    group_size: np.ndarray | None = None,
    pairs: tuple[np.ndarray, ...] | None = None,
) -> ValueShares:
    """The shares of every value, overall and in every group, from each entry's group (0..n_groups-1),
    value code (0..m-1; negative: withheld, it counts in its group's size but is nobody's value)
    and either
    - nothing: an entry is a row and a row is a person;
    - `weight`: the rows (or people) an entry stands for (a published count table), with
      `group_size` the people per group when they are counted elsewhere (else the weights' sum);
    - `person`: each entry's person number: p_g(v) = distinct people of g holding v at least once
      / distinct people of g, p(v) = distinct people holding v / distinct people.
    pairs: shown_pairs(group, value, n_groups, m) when known (entries that are rows only)."""
    group = np.asarray(group, dtype=np.int64)
    value = np.asarray(value, dtype=np.int64)
    shown = value >= 0
    if person is not None:
        person = np.asarray(person, dtype=np.int64)
        size = np.bincount(group[_first_of_each(_combined(group, person))], minlength=n_groups)
        total = len(np.unique(person))
        g_s, v_s, p_s = group[shown], value[shown], person[shown]
        once = _first_of_each(_combined(g_s, v_s, p_s))  # a person holding v in g, once
        g, v, n = pair_counts(g_s[once], v_s[once], n_groups, m)
        holders = np.bincount(v_s[_first_of_each(_combined(v_s, p_s))], minlength=m)
    else:
        w = None if weight is None else np.asarray(weight, dtype=np.int64)
        rows = np.bincount(group, weights=w, minlength=n_groups).astype(np.int64)
        size = rows if group_size is None else np.asarray(group_size, dtype=np.int64)
        total = int(size.sum())
        if pairs is None or w is not None:
            pairs = pair_counts(group[shown], value[shown], n_groups, m, None if w is None else w[shown].astype(float))
        g, v, n = pairs
        holders = np.bincount(v, weights=n, minlength=m).astype(np.int64)
    where = np.full(m, -1, dtype=np.int64)
    holding, of_size = np.zeros(m, dtype=np.int64), np.zeros(m, dtype=np.int64)
    if len(g):
        best = _best_entries(g, v, n / size[g], m)
        where[v[best]] = g[best]
        holding[v[best]], of_size[v[best]] = n[best], size[g[best]]
    return ValueShares(holders.astype(np.int64), where, holding, of_size, int(total), person is not None)


def _best_entries(g: np.ndarray, v: np.ndarray, share: np.ndarray, m: int) -> np.ndarray:
    """Per value occurring in `v`, the entry of its highest share, ties to the first group (the
    (g, v) pairs are distinct): two scatters over the entries, where a lexsort of three keys took
    several times longer on a million of them."""
    top = np.full(m, -np.inf)
    np.maximum.at(top, v, share)
    at_top = share == top[v]
    first = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, v[at_top], g[at_top])
    return np.flatnonzero(at_top & (g == first[v]))


def _plain(value: object) -> object:
    """A value as JSON writes it (numpy scalars to Python)."""
    return value.item() if isinstance(value, np.generic) else value


def attribute_summary(
    shares: ValueShares, labels: Sequence[object] | np.ndarray, cells: Callable[[int], dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """What the report says of attribute disclosure (never a person id): whether shares count
    people or rows, and for every value held, the largest gain first, the value, its share
    overall, its highest share in a group and the gain; `worst`: the (value, group)
    with the largest gain, with the group's published cells when `cells` gives them. None when
    no value is held (an empty table)."""
    held = shares.held
    if not len(held):
        return None
    gain = shares.gains()
    order = held[np.lexsort((held, -gain[held]))]  # largest gain first
    w = int(order[0])
    worst = {
        "value": _plain(labels[w]),
        "share": float(shares.share[w]),
        "group_share": float(shares.highest[w]),
        "holding": int(shares.holding[w]),
        "group_size": int(shares.size[w]),
        "gain": float(gain[w]),
        "difference": float(shares.differences()[w]),
    }
    if cells is not None:
        worst["group"] = cells(int(shares.group[w]))
    return {
        "counts": "people" if shares.people else "rows",
        "total": shares.total,
        "values_held": len(held),
        "values": [
            {
                "value": _plain(labels[i]),
                "share": float(shares.share[i]),
                "highest": float(shares.highest[i]),
                "gain": float(gain[i]),
            }
            for i in order
        ],
        "worst": worst,
    }


def published_value_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the code of its published sensitive value (-1 for null: withheld), and the
    values in code order."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    enc = pc.dictionary_encode(col)
    codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, enc.dictionary.to_numpy(zero_copy_only=False)


def group_cells(table: pa.Table, columns: list[str], ids: np.ndarray) -> Callable[[int], dict[str, Any]]:
    """The published cells naming a group (those of its first row)."""

    def cells(g: int) -> dict[str, Any]:
        row = int(np.argmax(ids == g))
        return {k: _plain(v) for k, v in table.select(columns).slice(row, 1).to_pylist()[0].items()}

    return cells


def table_shares(
    table: pa.Table,
    columns: list[str],
    sensitive: str,
    count: str | None = None,
    person: np.ndarray | None = None,
    people_table: tuple[pa.Table, np.ndarray] | None = None,
) -> tuple[dict[str, float], dict[str, Any] | None]:
    """GAIN_FIGURES and attribute_summary of a published table: a group is a combination of
    `columns` cells as published (an equivalence class, or ST's gid); `count`: the column of
    counts of a count table; `person`: each row's person number (distinct people counted);
    `people_table`: for a count table, the table with a row per record that names the same
    groups (its `columns`) and its rows' person numbers (the people per group are counted there,
    and the counts are taken as people holding each value)."""
    codes, labels = published_value_codes(table.column(sensitive))
    weight = None if count is None else table.column(count).to_numpy().astype(np.int64)
    group_size = None
    if people_table is not None and count is not None:
        other, persons = people_table
        both = pa.concat_tables([table.select(columns), other.select(columns).cast(table.select(columns).schema)])
        ids_both, n = class_ids(both, columns)
        ids = ids_both[: table.num_rows]
        theirs = ids_both[table.num_rows :]
        group_size = np.bincount(theirs[_first_of_each(_combined(theirs, persons))], minlength=n)
    else:
        ids, n = class_ids(table, columns)
        if count is not None:
            person = None  # a count table's rows are not a person's
    shares = value_shares(ids, codes, n, len(labels), weight, person, group_size)
    return shares.figures(), attribute_summary(shares, labels, group_cells(table, columns, ids))


def input_shares(
    data: Microdata, classes: InputClasses | None = None
) -> tuple[dict[str, float], dict[str, Any] | None]:
    """The input's GAIN_FIGURES (`input-` names) and attribute_summary: its groups are its
    distinct QI combinations (a person with rows in several counts in each); no group's cells
    (the input's QI values are not published). classes: input_classes(data), when known."""
    known = input_classes(data) if classes is None else classes
    codes = data.sensitive_codes.astype(np.int64)
    m = len(data.sensitive_values)
    shares = value_shares(known.ids, codes, known.n, m, person=data.person, pairs=known.pairs)
    return as_input(shares.figures()), attribute_summary(shares, data.sensitive_values)
