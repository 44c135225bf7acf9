"""Classification accuracy for `[evaluate] target` (issue 44, docs/utility.md).

Before anonymizing, `hold_out` draws `[evaluate] holdout` of the PEOPLE (all rows of a person
together) with a stream of the release's seed; their rows never enter the release. A scikit-learn
random forest is then trained twice, on the release read as an analyst would (a range as its
midpoint, a set as the one-hot of its members, a plain category one-hot) and on the input's
training rows, and both are tested on the same held-out input rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from privpub.schemas.dates import as_day_numbers
from privpub.schemas.errors import InputError
from privpub.tasks.core.microdata import Microdata, QIDomain
from privpub.tasks.evaluate.quality import QualityView, cells, not_applicable, sensitive_codes

CLASSIFICATION_FIGURES = ("classification-accuracy", "input-classification-accuracy")
TREES = 50  # the forest's trees: enough for a stable figure, cheap on a census of 100k rows


@dataclass(frozen=True)
class HeldOut:
    """The input the release was drawn from (`full`), which of its rows are held out (`test`),
    the people held out, and the seed of the model (from the release's seed)."""

    full: Microdata
    test: np.ndarray
    people: int
    model_seed: int


def _streams(seed: int) -> tuple[np.random.Generator, int]:
    """The draw of the held-out people and the model's random_state: the release seed's third
    stream (the first two, the release's and the workload's, are unchanged by it)."""
    stream = np.random.SeedSequence(seed).spawn(3)[2]
    rng_seq, model_seq = stream.spawn(2)
    return np.random.default_rng(rng_seq), int(model_seq.generate_state(1)[0])


def hold_out(data: Microdata, seed: int) -> Microdata:
    """The rows the release is made from: the input without the held-out people (their rows in
    `held_out`); the input itself when no target is set. A target of one class is refused."""
    ev = data.spec.evaluate
    if ev.target is None:
        return data
    labels = _input_labels(data, ev.target)
    if len(np.unique(labels)) < 2:
        raise InputError(f"[evaluate] target = {ev.target!r}: the input holds one class only; nothing to classify")
    rng, model_seed = _streams(seed)
    person = np.arange(data.n) if data.person is None else data.person
    people = data.people
    n_held = min(max(int(round(ev.holdout * people)), 1), people - 1)
    chosen = np.zeros(people, dtype=bool)
    chosen[rng.choice(people, size=n_held, replace=False)] = True
    test = chosen[person]
    kept = data.frame.loc[~test].reset_index(drop=True)
    train = Microdata.from_frame(data.spec, kept)
    return replace(train, dropped_rows=data.dropped_rows, held_out=HeldOut(data, test, n_held, model_seed))


def _input_labels(data: Microdata, target: str) -> np.ndarray:
    if target == data.spec.dataset.sensitive:
        return np.asarray(data.sensitive_codes, dtype=np.int64)
    j = data.qi_names.index(target)
    return np.asarray(data.codes[:, j], dtype=np.int64)


def _features(table: pa.Table, doms: list[QIDomain]) -> Any:
    """One column per numeric QI (a range's midpoint, dates as day numbers) and one per domain
    value of every other QI (1 for each value the cell holds: a set's members, a range's values),
    as a sparse matrix (a QI of many values would not fit dense)."""
    import scipy.sparse as sp  # lazily, as every use of scipy: only with a target

    n = table.num_rows
    blocks = []
    for dom in doms:
        if dom.kind == "numeric":
            if f"{dom.name}_lo" in table.column_names:
                lo = as_day_numbers(table.column(f"{dom.name}_lo")).astype(float)
                mid = (lo + as_day_numbers(table.column(f"{dom.name}_hi")).astype(float)) / 2
            else:
                mid = as_day_numbers(table.column(dom.name)).astype(float)
            blocks.append(sp.csr_matrix(mid.reshape(-1, 1)))
            continue
        c, size = cells(table, dom), max(dom.size, 1)
        if c.members is not None:
            rows, codes = c.members // size, c.members % size
        else:  # each row's code interval [lo, hi]
            width = np.maximum(c.hi - c.lo + 1, 0)
            rows = np.repeat(np.arange(n), width)
            codes = np.repeat(c.lo, width) + np.arange(len(rows)) - np.repeat(np.cumsum(width) - width, width)
        blocks.append(sp.csr_matrix((np.ones(len(rows)), (rows, codes)), shape=(n, size)))
    return sp.hstack(blocks, format="csr") if blocks else sp.csr_matrix((n, 0))


def _input_table(data: Microdata, rows: np.ndarray) -> pa.Table:
    """Input rows as a table of plain cells (what `cells` reads), each QI in its domain's values."""
    cols = {dom.name: pa.array(np.asarray(dom.values)[data.codes[rows, j]]) for j, dom in enumerate(data.domains)}
    return pa.table(cols)


def _release_labels(table: pa.Table, target: str, full: Microdata) -> np.ndarray:
    """The release's target as classes: the input's codes for a published value (-1: withheld);
    a generalized cell (a range or a set of several values) a class of its own (below -1)."""
    if target == full.spec.dataset.sensitive:
        values = pd.Index(np.asarray(full.sensitive_values, dtype=object).astype(str))
        return sensitive_codes(table, target, values)
    c = cells(table, full.domain(target))
    point = (c.lo == c.hi) & (c.size == 1)
    boxes = pd.factorize(c.lo * max(full.domain(target).size, 1) + c.hi)[0]
    return np.where(point, c.lo, -2 - boxes).astype(np.int64)


def _accuracy(x: Any, y: np.ndarray, weights: np.ndarray | None, x_test: Any, y_test: np.ndarray, seed: int) -> float:
    from sklearn.ensemble import RandomForestClassifier  # lazily: only with a target (start-up does not pay)

    model = RandomForestClassifier(n_estimators=TREES, random_state=seed, n_jobs=1)
    model.fit(x, y, sample_weight=weights)
    return float((model.predict(x_test) == y_test).mean())


def classification_figures(view: QualityView | str, data: Microdata) -> dict[str, Any]:
    """The two accuracies on the held-out rows (trained on the release; on the input's training
    rows), or the reason the release's does not apply, and the people and rows held out (the
    report's note reads them); {} without a target."""
    held: HeldOut | None = data.held_out
    target = data.spec.evaluate.target
    if held is None or target is None:
        return {}
    full = held.full
    counts = {"held-out-people": held.people, "held-out-rows": int(held.test.sum())}
    doms = [d for d in full.domains if d.name != target]
    test_rows, train_rows = np.flatnonzero(held.test), np.flatnonzero(~held.test)
    labels = _input_labels(full, target)
    x_test = _features(_input_table(full, test_rows), doms)
    y_test = labels[test_rows]
    input_acc = _accuracy(
        _features(_input_table(full, train_rows), doms), labels[train_rows], None, x_test, y_test, held.model_seed
    )
    if isinstance(view, str):
        return {"classification-accuracy": not_applicable(view), "input-classification-accuracy": input_acc, **counts}
    table = view.table if view.joint is None else view.joint
    if target not in table.column_names and f"{target}_lo" not in table.column_names:
        reason = f"the release publishes no {target} beside the quasi-identifiers in one table"
        return {"classification-accuracy": not_applicable(reason), "input-classification-accuracy": input_acc, **counts}
    y = _release_labels(table, target, full)
    weights = None if view.joint is None or view.weights is None else np.asarray(view.weights, dtype=float)
    known = y != -1  # a withheld value (serial): no label to learn from
    if not known.any():
        return {
            "classification-accuracy": not_applicable(f"the release withholds every {target} value"),
            "input-classification-accuracy": input_acc,
            **counts,
        }
    x = _features(table, doms)[known]
    acc = _accuracy(x, y[known], None if weights is None else weights[known], x_test, y_test, held.model_seed)
    return {"classification-accuracy": acc, "input-classification-accuracy": input_acc, **counts}


__all__ = ["CLASSIFICATION_FIGURES", "HeldOut", "classification_figures", "hold_out"]
