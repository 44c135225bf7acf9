"""A deterministic census-like table at any size (no download), shaped after the Ambiguity
paper's Fig. 10 attributes: age (78 values), sex (2), education (17, ordered), marital (6),
race (9), work class (10), country (83), occupation (50), salary class (50).

Skew is realistic rather than uniform: Zipf-like categorical marginals, one dominant country,
and correlations (education drives occupation and salary class, age drives marital status),
so partitions and query errors behave as on real data.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pandas as pd

from privpub.schemas.spec import TechniqueSpec

EDUCATION = [
    "preschool",
    "1st-4th",
    "5th-6th",
    "7th-8th",
    "9th",
    "10th",
    "11th",
    "12th",
    "hs-grad",
    "some-college",
    "assoc-voc",
    "assoc-acdm",
    "bachelors",
    "masters",
    "prof-school",
    "doctorate",
    "postdoc",
]
MARITAL = ["never-married", "married", "separated", "divorced", "widowed", "married-spouse-absent"]
RACE = [f"race-{i}" for i in range(1, 10)]
WORKCLASS = [
    "private",
    "self-emp",
    "self-emp-inc",
    "federal-gov",
    "state-gov",
    "local-gov",
    "without-pay",
    "never-worked",
    "military",
    "other",
]
COUNTRY = ["united-states"] + [f"country-{i:02d}" for i in range(1, 83)]
OCCUPATION = [f"occ-{i:02d}" for i in range(1, 51)]
SALARY = [f"sal-{i:02d}" for i in range(1, 51)]

# The census QIs as spec entries; occupation is the default sensitive attribute.
CENSUS_QI: list[dict[str, Any]] = [
    {"name": "age", "kind": "numeric"},
    {"name": "sex", "kind": "categorical"},
    {"name": "education", "kind": "ordinal", "order": EDUCATION},
    {"name": "marital", "kind": "categorical"},
    {"name": "race", "kind": "categorical"},
    {"name": "workclass", "kind": "categorical"},
    {"name": "country", "kind": "categorical"},
    {"name": "salary", "kind": "ordinal", "order": SALARY},
]


def _zipf(rng: np.random.Generator, n: int, k: int, a: float) -> np.ndarray:
    """n draws from {0..k-1} with P(i) proportional to 1/(i+1)^a, labels in a shuffled order."""
    p = 1.0 / np.arange(1, k + 1) ** a
    p /= p.sum()
    return rng.permutation(k)[rng.choice(k, size=n, p=p)]


def census(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = np.clip(np.round(rng.gamma(6.0, 6.5, n) + 17), 17, 94).astype(np.int64)
    sex = rng.choice(2, n, p=[0.52, 0.48])
    edu_base = np.clip(np.round(rng.normal(9.5, 2.6, n)), 0, len(EDUCATION) - 1).astype(np.int64)
    education = np.where(age < 22, np.minimum(edu_base, 9), edu_base)
    married_p = np.clip((age - 18) / 30, 0, 0.65)
    u = rng.random(n)
    marital = np.where(u < married_p, 1, _zipf(rng, n, len(MARITAL), 1.2))
    marital = np.where((age > 70) & (rng.random(n) < 0.3), 4, marital)
    race = _zipf(rng, n, len(RACE), 2.0)
    workclass = _zipf(rng, n, len(WORKCLASS), 1.8)
    country = np.where(rng.random(n) < 0.86, 0, 1 + _zipf(rng, n, len(COUNTRY) - 1, 1.1))
    # occupation and salary follow education (plus noise), so they are skewed and correlated
    occupation = np.clip(np.round(education * 2.6 + rng.normal(0, 7, n)), 0, len(OCCUPATION) - 1)
    salary = np.clip(np.round(education * 2.2 + (age - 17) * 0.15 + rng.normal(0, 6, n)), 0, len(SALARY) - 1)
    return pd.DataFrame(
        {
            "pid": np.arange(1, n + 1, dtype=np.int64),
            "age": age,
            "sex": np.array(["female", "male"], dtype=object)[sex],
            "education": np.array(EDUCATION, dtype=object)[education],
            "marital": np.array(MARITAL, dtype=object)[marital],
            "race": np.array(RACE, dtype=object)[race],
            "workclass": np.array(WORKCLASS, dtype=object)[workclass],
            "country": np.array(COUNTRY, dtype=object)[country],
            "occupation": np.array(OCCUPATION, dtype=object)[occupation.astype(np.int64)],
            "salary": np.array(SALARY, dtype=object)[salary.astype(np.int64)],
        }
    )


def census_spec(
    input_path: str,
    name: str = "census",
    k: int = 10,
    l: int | None = 3,
    qi: list[str] | None = None,
    technique: dict[str, Any] | None = None,
    output_dir: str = "releases",
    state: str = "privpub.duckdb",
    seed: int | None = None,
) -> dict[str, Any]:
    """A spec dictionary for a census file (same keys as the TOML spec)."""
    wanted = [copy.deepcopy(q) for q in CENSUS_QI if qi is None or q["name"] in qi]
    # the spec's default technique (schemas/spec.py), named so the dict reads like the TOML file
    default = TechniqueSpec.model_fields["name"].default
    tech = technique or {"name": default, "k": k, **({"l": l} if l else {})}
    out: dict[str, Any] = {"dir": output_dir, "state": state}
    if seed is not None:
        out["seed"] = seed
    return {
        "dataset": {"name": name, "input": input_path, "person_id": "pid", "sensitive": "occupation", "qi": wanted},
        "technique": tech,
        "output": out,
    }


# --- the seed papers' small example tables ---------------------------------------------------


def ambiguity_fig1() -> pd.DataFrame:
    """Fig. 1(a) of the Ambiguity paper (Wang, JCST 2010)."""
    return pd.DataFrame(
        {
            "name": ["Alan", "Charles", "George", "Henry", "Alice", "Carol", "Grace", "Helen"],
            "age": [45, 20, 50, 60, 20, 50, 60, 60],
            "gender": ["M", "M", "M", "M", "F", "F", "F", "F"],
            "zipcode": [11000, 12000, 23000, 12000, 54000, 23000, 23000, 21000],
            "disease": ["diabetes", "flu", "diarrhea", "stroke", "leukemia", "diabetes", "leukemia", "dyspepsia"],
        }
    )


def butterfly_table1() -> pd.DataFrame:
    """Table 1 of the Butterfly paper: traffic accident records."""
    return pd.DataFrame(
        {
            "pid": [1, 2, 3, 4],
            "occupation": ["Dentist", "Family doctor", "Banker", "Mortgage broker"],
            "age": [30, 30, 30, 30],
            "vehicle": ["Red Truck", "White Sedan", "Green Sedan", "Black Truck"],
            "postcode": [31043, 31043, 31043, 31043],
            "faulty": ["No", "Yes", "No", "No"],
        }
    )
