"""Entropy and recursive (c, l)-diversity, t-closeness and beta-likeness of a published table,
read as an adversary reads it: the equivalence classes of its published QI cells and each class's
sensitive values (docs/models.md). The figures come from tasks/core/sensitive_models, the
functions Mondrian uses to decide its splits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from privpub.tasks.core import sensitive_models as sm
from privpub.tasks.core.types import PrivacyResult
from privpub.tasks.verify.published import class_profile, describe_row_class

# What the recursive figure shows for a class of fewer than l values (r_l + ... + r_m = 0):
# no finite ratio, and a non-finite number is refused by the spec, JSON and the report alike.
UNBOUNDED = "unbounded (a class holds fewer than l values)"


def sensitive_value_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the code of its sensitive value; and the distinct values in code order."""
    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if col.null_count:
        raise ValueError("the published sensitive column holds a null")
    enc = pc.dictionary_encode(col)
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_numpy(zero_copy_only=False)


def class_pairs(
    class_of: np.ndarray, n_classes: int, codes: np.ndarray, values: np.ndarray, choice: sm.ModelChoice
) -> tuple[sm.SensitiveModel, np.ndarray, np.ndarray, np.ndarray]:
    """The model over the table's own distribution, and the (class, value, rows) triples."""
    model = choice.model(values, np.bincount(codes, minlength=len(values)))
    g, v, n = sm.pair_counts(class_of, model.codes(codes), n_classes, model.m)
    return model, g, v, n


def model_figures(
    model: sm.SensitiveModel, g: np.ndarray, v: np.ndarray, n: np.ndarray, n_classes: int
) -> list[tuple[str, object, object, bool, int, dict[str, Any]]]:
    """Per requested model beyond distinct l: (name, figure, threshold, passed, worst class,
    extra facts about it) from the (class, value, rows) triples."""
    out: list[tuple[str, object, object, bool, int, dict[str, Any]]] = []
    if model.diversity == "entropy" and model.l:
        h = sm.entropy(g, n, n_classes)
        w = int(h.argmin())
        passed = bool(sm.entropy_passes(h[w : w + 1], model.l)[0])
        out.append(("entropy-l-diversity", float(np.exp(h[w])), model.l, passed, w, {"entropy": float(h[w])}))
    if model.diversity == "recursive" and model.l:
        assert model.c is not None  # the parameters require c with recursive
        r1, tail = sm.recursive_terms(g, n, n_classes, model.l)
        short = np.flatnonzero(tail == 0)
        if len(short):
            w = int(short[0])
            figure: object = UNBOUNDED
        else:
            ratio = r1 / tail
            w = int(ratio.argmax())
            figure = float(ratio[w])
        passed = bool(sm.recursive_passes(r1[w : w + 1], tail[w : w + 1], model.c)[0])
        facts = {"r1": int(r1[w]), "r_l_to_r_m": int(tail[w])}
        out.append(("recursive-cl-diversity", figure, f"c = {model.c}, l = {model.l}", passed, w, facts))
    if model.t is not None:
        d = sm.emd(model.ground, g, v, n, n_classes, model.counts)
        w = int(d.argmax())
        passed = bool(sm.closeness_passes(d[w : w + 1], model.t)[0])
        out.append(("t-closeness", float(d[w]), model.t, passed, w, {"distance": model.ground.kind}))
    if model.beta is not None:
        gain = sm.likeness_gain(g, v, n, n_classes, model.counts)
        w = int(gain.argmax())
        passed = bool(sm.likeness_passes(gain[w : w + 1], model.beta)[0])
        # the worst class's value of that gain, by its shares only (never the value itself)
        mine = np.flatnonzero(g == w)
        top = mine[int(sm.pair_gain(g, v, n, n_classes, model.counts)[mine].argmax())]
        q = sm.distribution(model.counts)
        shares = {"class_share": float(n[top] / n[mine].sum()), "table_share": float(q[v[top]])}
        out.append(("beta-likeness", float(gain[w]), model.beta, passed, w, shares))
    return out


def people_votes(class_of: np.ndarray, codes: np.ndarray, person: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (class, person, value) triples as (class, value) per triple: under
    rows_per_person = "many" a person's value is one vote, however many of their rows hold it."""
    who, _ = pd.factorize(class_of * (int(person.max()) + 1) + person)  # (class, person), compacted
    first = np.zeros(int(who.max()) + 1, dtype=np.int64)
    first[who] = class_of  # each (class, person)'s class
    width = int(codes.max()) + 1
    key = np.unique(who.astype(np.int64) * width + codes)
    return first[key // width], key % width


def sensitive_results(
    table: pa.Table, qi_cols: list[str], sensitive: str, choice: sm.ModelChoice, person: np.ndarray | None = None
) -> list[PrivacyResult]:
    """The PrivacyResults of the models in `choice` other than distinct l-diversity (reported by
    k_and_l), for a published table in memory. With `person` (each row's person number), over
    the classes' distinct (person, value) pairs, each one vote: the row formulas applied to them
    (docs/models.md, "Several rows per person")."""
    if table.num_rows == 0:
        return []
    prof = class_profile(table, qi_cols, sensitive, person)
    codes, values = sensitive_value_codes(table.column(sensitive))
    n_classes = len(prof["size"])
    class_of = prof["class"]
    if person is not None:
        class_of, codes = people_votes(class_of, codes, person)
    model, g, v, n = class_pairs(class_of, n_classes, codes, values, choice)
    results = []
    for name, figure, threshold, passed, w, facts in model_figures(model, g, v, n, n_classes):
        people = None if prof["people"] is None else prof["people"][w]
        cls = describe_row_class(table, prof["first_row"][w], qi_cols, prof["size"][w], prof["distinct"][w], people)
        results.append(PrivacyResult(name, figure, threshold, passed, {"class": cls, **facts}))
    return results
