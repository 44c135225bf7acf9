"""Butterfly's and union-qid's cases in the contract battery (tasks/core/contract.py,
privpub.testing): the S1/S2 QIDs of tests/test_butterfly_pipeline.py, salary sensitive (its
adversary knows one QID at a time, so the all-QI series linker does not apply)."""

from __future__ import annotations

from privpub.tasks.core.contract import Contract, narrow_interval

S1 = ["age", "occupation", "country", "sex", "marital", "education"]
S2 = ["sex", "marital", "education", "workclass", "race"]

CONTRACTS = {
    "butterfly": Contract(
        params={"k": 6, "k_prime": 2, "qids": [S1, S2]},
        required=("k", "qids"),
        tamper=narrow_interval("age"),
        series_figure="series-composition-k",
        sensitive="salary",
    ),
    "union-qid": Contract(
        params={"k": 6, "qids": [S1, S2]},
        required=("k", "qids"),
        tamper=narrow_interval("age"),
        series_figure="series-composition-k",
        sensitive="salary",
    ),
}
