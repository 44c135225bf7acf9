"""Mondrian over people (`[dataset] rows_per_person = "many"`, docs/models.md "Several rows per
person"): every person's rows land in one QI-group, k counts distinct people, and the
sensitive-value models count each person's distinct values once.

The split decisions read one point per person: per QI, the lower median of the codes of the
person's rows. Mondrian (`split_levels`) then runs on the person's distinct (person, sensitive
value) pairs, each placed at the person's point: a pair is one vote of the models (distinct,
entropy, recursive l-diversity, t-closeness over people), and a weight of 1 on one pair per
person makes the medians and the >= k tests count people. The pairs of a person share a point,
so they always go the same way. Each group is mapped back to all its people's rows; the
published box of a group is then the range / set of ALL its rows (generalized_table), so the
boxes of sibling groups may overlap (docs/models.md says why that is safe).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from privpub.schemas.errors import PartitionError
from privpub.tasks.core.sensitive_models import SensitiveModel
from privpub.tasks.core.types import Partition
from privpub.tasks.partition.mondrian import CodedRows, TreeBuilder, model_codes, split_levels


def dense_people(person: np.ndarray) -> tuple[np.ndarray, int]:
    """Person numbers 0..P-1 (kept rows may have lost some people)."""
    codes, uniques = pd.factorize(person)
    return codes.astype(np.int64), len(uniques)


def person_points(codes: np.ndarray, person: np.ndarray, n_people: int) -> np.ndarray:
    """(P, D) the lower median code of each person's rows, per QI (one sort per QI)."""
    count = np.bincount(person, minlength=n_people)
    start = np.concatenate(([0], np.cumsum(count)[:-1]))
    at = start + (count - 1) // 2
    points = np.empty((n_people, codes.shape[1]), dtype=codes.dtype)
    for j in range(codes.shape[1]):  # per QI, not per row
        order = np.lexsort((codes[:, j], person))
        points[:, j] = codes[order, j][at]
    return points


def person_value_pairs(person: np.ndarray, sensitive: np.ndarray, n_values: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (person, sensitive code) pairs, sorted by person then code."""
    key = np.unique(person.astype(np.int64) * max(n_values, 1) + sensitive)
    return key // max(n_values, 1), key % max(n_values, 1)


def pair_value_counts(person: np.ndarray, sensitive: np.ndarray, n_values: int) -> np.ndarray:
    """People holding each sensitive code (a person's value counted once however many rows
    hold it): the distribution the models compare with under "many"."""
    dense, _ = dense_people(person)
    _, value = person_value_pairs(dense, sensitive, n_values)
    return np.bincount(value, minlength=n_values)


def people_partition(
    data: CodedRows,
    person: np.ndarray,
    k: int,
    l: int | None = None,
    model: SensitiveModel | None = None,
    split_width: str = "range",
) -> Partition:
    """QI-groups of whole people: at least k distinct people each, and l distinct sensitive
    values (or every model of `model`, over the group's distinct (person, value) pairs).
    Returns a group per row; the tree's sizes count people."""
    if k < 1:
        raise PartitionError("k must be at least 1")
    who, n_people = dense_people(person)
    if n_people < k:
        raise PartitionError(f"k = {k} is larger than the table ({n_people} people): no k-anonymous release exists")
    raw = data.sensitive_codes.astype(np.int64)
    m = int(raw.max()) + 1 if len(raw) else 1
    pair_person, pair_raw = person_value_pairs(who, raw, m)
    s = model_codes(pair_raw, l, model)

    points = person_points(data.codes, who, n_people)
    xt = np.ascontiguousarray(points[pair_person].T)  # (D, pairs): each pair at its person's point
    weights = np.zeros(len(pair_person), dtype=np.int64)
    weights[np.concatenate(([0], np.flatnonzero(np.diff(pair_person)) + 1))] = 1  # one per person
    cols = np.arange(len(data.domains))
    tree = TreeBuilder(n_people)
    leaf_items, leaf_sizes, leaf_nodes = split_levels(
        xt,
        list(data.domains),
        k,
        np.arange(len(pair_person), dtype=np.int64),
        np.array([len(pair_person)], dtype=np.int64),
        np.array([0], dtype=np.int64),
        l=l,
        s=s,
        tree=tree,
        dim_names=cols,
        weights=weights,
        model=model,
        pair_items=True,
        split_width=split_width,
    )
    group_of_person = np.empty(n_people, dtype=np.int64)
    group_of_person[pair_person[leaf_items]] = np.repeat(np.arange(len(leaf_sizes)), leaf_sizes)
    return Partition(
        group=group_of_person[who],
        n_groups=len(leaf_sizes),
        tree=tree.build(leaf_nodes),
        info={"partitioner": "mondrian-people", "k": k, "l": l, "people": n_people},
    )
