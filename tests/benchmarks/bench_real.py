"""privpub's Mondrian against anonypyx's on real and census-like tables (not run by CI).

    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_real sweep \
        [--tables adult,census] [--ks 2,5,10,20,50] [--values] [--no-anonypyx] [--census-rows N]
    flock /tmp/privpub-bench.lock .venv/bin/python -m tests.benchmarks.bench_real speed \
        [--tables adult,adult5,gen-250k] [--pairs 5]

`sweep` (issue 44 item 4): at each k, `privpub publish` (generalization, seed 1) and the bare
anonypyx script (tests/benchmarks/anonypyx_script.py, Mondrian, in bench-env) as fresh processes
on the same CSV, the order alternating pair by pair. Both published tables are read into one
representation (per QI cell: a code interval, its number of domain values and an identity of
its value set) and scored by one scorer, `score`: gen-iloss as issue 44's contract defines it
(the mean over published QI cells of (hi - lo) / (max - min) for numeric QIs, order positions
for ordinal ones, (values - 1) / (domain - 1) for categorical ones, the domain being the input's
distinct values or the order) and discernibility (the sum of squared class sizes, a class being
the rows with the same published QI cells, as a reader groups them). privpub's own recorded
`gen-iloss` (manifest.json) is printed beside the scorer's. `--values` adds privpub with
`[technique] split_width = "values"` (a categorical QI measured by the values a group holds when
Mondrian chooses its split); `--no-anonypyx` leaves anonypyx out.

`speed` (issue 43 item 5): generalization k = 10 against the anonypyx script, `--pairs` pairs
(order alternating), the median wall and CPU of each and the median of the per-pair ratios.

anonypyx has no ordinal kind: an ordinal QI goes to it as the integer column `<qi>_pos` (its
position in the order; the same ranges of positions). Tables: `adult` (UCI Adult, 48,842
people, tests/benchmarks/real_tables.py), `adult5` (Adult's rows five times over, fresh person
ids: 244,210 rows), `census` (tasks.demo_data.census, 8 QIs, seed 1, `--census-rows`),
`gen-250k` (bench_e2e's census-shaped 250,000 rows, 5 QIs), `fertility` (AER's Fertility, 254,654
mothers from the 1980 census, 7 QIs, sensitive weeks worked; issue 43 item 5's real table) and
`fertility-mother` (the same rows with the mother's own QIs only: age and the three race flags; how
much the verdict depends on the QI choice).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tests.benchmarks import real_tables
from tests.benchmarks.bench_e2e import ANONYPYX_SCRIPT, CATEGORICAL_250K, census_shaped, measured, write_toml
from tests.benchmarks.bench_spine import ROOT, SENSITIVE, print_table

ZOBRIST = np.random.default_rng(44).integers(0, 2**63, size=4096, dtype=np.int64).astype(np.uint64)


# --- tables ---------------------------------------------------------------------------------------


@dataclass
class Table:
    name: str
    frame: pd.DataFrame
    qi: list[dict]  # privpub's [dataset] qi entries
    sensitive: str


def load_table(name: str, census_rows: int) -> Table:
    if name in ("adult", "adult5"):
        df = real_tables.adult()
        qi = real_tables.adult_qi(df)
        if name == "adult5":  # 244,210 rows: five copies, each person a fresh id
            df = pd.concat([df] * 5, ignore_index=True)
            df["pid"] = np.arange(1, len(df) + 1, dtype=np.int64)
        return Table(name, df, qi, "occupation")
    if name in ("fertility", "fertility-mother"):
        qi = real_tables.fertility_qi()
        return Table(name, real_tables.fertility(), qi if name == "fertility" else qi[:4], "work")
    if name == "census":
        from privpub.tasks.demo_data import CENSUS_QI, census

        return Table(name, census(census_rows, seed=1), [dict(q) for q in CENSUS_QI], "occupation")
    if name == "gen-250k":
        qi = [{"name": "age", "kind": "numeric"}] + [{"name": c, "kind": "categorical"} for c in CATEGORICAL_250K]
        return Table(name, census_shaped(250_000), qi, SENSITIVE)
    raise SystemExit(f"unknown table {name!r}: adult, adult5, census, gen-250k, fertility, fertility-mother")


def write_input(t: Table, path: Path) -> None:
    """The CSV both tools read: the table plus `<qi>_pos` for each ordinal QI (anonypyx's)."""
    df = t.frame.copy()
    for q in t.qi:
        if q["kind"] == "ordinal":
            df[f"{q['name']}_pos"] = pd.Index(q["order"]).get_indexer(df[q["name"]].astype(str))
    df.to_csv(path, index=False)


def privpub_spec(t: Table, csv: Path, k: int, extra: dict | None = None) -> dict:
    return {
        "dataset": {"name": t.name, "input": str(csv), "person_id": "pid", "sensitive": t.sensitive, "qi": t.qi},
        "technique": {"name": "generalization", "k": k, **(extra or {})},
        "output": {"dir": "releases", "state": "privpub.duckdb", "seed": 1},
    }


def anonypyx_cmd(t: Table, python: Path, csv: Path, out: Path, k: int) -> list[str]:
    names = [f"{q['name']}_pos" if q["kind"] == "ordinal" else q["name"] for q in t.qi]
    cats = [q["name"] for q in t.qi if q["kind"] == "categorical"]
    return [str(python), str(ANONYPYX_SCRIPT), str(csv), str(out), "--qi", ",".join(names)] + [
        "--categorical",
        ",".join(cats),
        "--sensitive",
        t.sensitive,
        "--k",
        str(k),
    ]


# --- one scorer for both published tables -------------------------------------------------------


@dataclass
class Domain:
    name: str
    kind: str
    values: np.ndarray  # code order: sorted distinct input values, or the order


def domains(t: Table) -> list[Domain]:
    out = []
    for q in t.qi:
        col = t.frame[q["name"]]
        if q["kind"] == "numeric":
            values = np.unique(col.to_numpy(dtype=float))
        elif q["kind"] == "ordinal":
            values = np.asarray(q["order"], dtype=object)
        else:
            values = np.unique(col.astype(str).to_numpy())
        out.append(Domain(q["name"], q["kind"], values))
    return out


@dataclass
class Cells:
    """One QI's published cells, one per published row: the code interval [lo, hi], the number
    of domain values in the cell and an identity of the cell's value set."""

    lo: np.ndarray
    hi: np.ndarray
    n: np.ndarray
    key: np.ndarray


def interval_cells(d: Domain, lo_values: np.ndarray, hi_values: np.ndarray) -> Cells:
    values = d.values.astype(float)
    lo = np.searchsorted(values, np.asarray(lo_values, dtype=float), "left")
    hi = np.searchsorted(values, np.asarray(hi_values, dtype=float), "right") - 1
    return Cells(lo, hi, hi - lo + 1, (lo * len(values) + hi).astype(np.uint64))


def position_cells(d: Domain, lo: np.ndarray, hi: np.ndarray) -> Cells:
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    return Cells(lo, hi, hi - lo + 1, (lo * len(d.values) + hi).astype(np.uint64))


def set_cells(d: Domain, member: np.ndarray) -> Cells:
    """From a (rows, domain) boolean membership matrix."""
    codes = np.arange(member.shape[1])
    lo = np.where(member, codes, member.shape[1]).min(axis=1)
    hi = np.where(member, codes, -1).max(axis=1)
    key = np.bitwise_xor.reduce(np.where(member, ZOBRIST[: member.shape[1]], np.uint64(0)), axis=1)
    return Cells(lo, hi, member.sum(axis=1), key)


def privpub_cells(table: pa.Table, doms: list[Domain]) -> list[Cells]:
    out = []
    for d in doms:
        if d.kind == "numeric":
            out.append(interval_cells(d, table.column(f"{d.name}_lo"), table.column(f"{d.name}_hi")))
            continue
        lists = table.column(d.name).combine_chunks()
        offsets = lists.offsets.to_numpy()
        items = pd.Index(d.values.astype(str)).get_indexer(lists.flatten().to_numpy(zero_copy_only=False).astype(str))
        if (items < 0).any():
            raise ValueError(f"privpub's '{d.name}' holds a value outside the input's domain")
        member = np.zeros((len(lists), len(d.values)), dtype=bool)
        member[np.repeat(np.arange(len(lists)), np.diff(offsets)), items] = True
        out.append(set_cells(d, member))
    return out


def anonypyx_cells(frame: pd.DataFrame, doms: list[Domain]) -> list[Cells]:
    out = []
    for d in doms:
        if d.kind == "numeric":
            out.append(interval_cells(d, frame[f"{d.name}_min"], frame[f"{d.name}_max"]))
        elif d.kind == "ordinal":
            out.append(position_cells(d, frame[f"{d.name}_pos_min"], frame[f"{d.name}_pos_max"]))
        else:
            member = np.column_stack(
                [
                    frame[f"{d.name}_{v}"].to_numpy(dtype=bool)
                    if f"{d.name}_{v}" in frame
                    else np.zeros(len(frame), bool)
                    for v in d.values
                ]
            )
            out.append(set_cells(d, member))
    return out


def cell_loss(c: Cells, d: Domain) -> np.ndarray:
    if len(d.values) <= 1:
        return np.zeros(len(c.lo))
    if d.kind == "numeric":
        v = d.values.astype(float)
        return (v[c.hi] - v[c.lo]) / (v[-1] - v[0])
    if d.kind == "ordinal":
        return (c.hi - c.lo) / (len(d.values) - 1)
    return (c.n - 1) / (len(d.values) - 1)


def score(cells: list[Cells], doms: list[Domain], weight: np.ndarray) -> dict:
    """gen-iloss (overall and per QI), discernibility and the classes of one published table,
    each row standing for `weight` records."""
    w = np.asarray(weight, dtype=float)
    per_qi = {d.name: float((cell_loss(c, d) * w).sum() / w.sum()) for c, d in zip(cells, doms)}
    keys = pd.DataFrame({d.name: c.key for c, d in zip(cells, doms)})
    sizes = pd.Series(w).groupby([keys[col] for col in keys.columns]).sum().to_numpy()
    return {
        "records": int(w.sum()),
        "gen-iloss": float(np.mean(list(per_qi.values()))),
        "per_qi": per_qi,
        "discernibility": float((sizes**2).sum()),
        "classes": len(sizes),
        "smallest class": int(sizes.min()),
    }


def score_privpub(run_dir: Path, doms: list[Domain]) -> tuple[dict, float | None]:
    """The scorer's figures of privpub's release and the gen-iloss privpub recorded."""
    release = next(p for p in (run_dir / "releases").iterdir() if not p.name.startswith("."))
    table = pq.read_table(next(release.glob("*.parquet")))
    manifest = json.loads((release / "manifest.json").read_text())
    return score(privpub_cells(table, doms), doms, np.ones(table.num_rows)), recorded_gen_iloss(manifest)


def recorded_gen_iloss(manifest: dict) -> float | None:
    """manifest.json's figures: {kind: {name: exact value as text}}."""
    text = manifest["figures"].get("utility", {}).get("gen-iloss")
    return None if text is None else float(text)


def score_anonypyx(path: Path, doms: list[Domain]) -> dict:
    frame = pd.read_parquet(path)
    return score(anonypyx_cells(frame, doms), doms, frame["count"].to_numpy())


# --- runs ---------------------------------------------------------------------------------------


@dataclass
class Runner:
    work: Path
    privpub: Path
    python: Path  # bench-env's, with anonypyx
    env: dict

    def privpub_run(self, t: Table, csv: Path, k: int, extra: dict | None = None) -> tuple[dict, Path]:
        run_dir = Path(tempfile.mkdtemp(prefix="privpub-", dir=self.work))
        spec = write_toml(run_dir / "spec.toml", privpub_spec(t, csv, k, extra))
        return measured([str(self.privpub), "publish", str(spec)], self.env, run_dir), run_dir

    def anonypyx_run(self, t: Table, csv: Path, k: int) -> tuple[dict, Path]:
        out = Path(tempfile.mkdtemp(prefix="anonypyx-", dir=self.work)) / "out.parquet"
        return measured(anonypyx_cmd(t, self.python, csv, out, k), dict(os.environ), self.work), out

    def pair(self, t: Table, csv: Path, k: int, privpub_first: bool) -> tuple[tuple[dict, Path], tuple[dict, Path]]:
        """Both tools once, in the order given (alternated by the caller: both see the same load)."""
        if privpub_first:
            mine = self.privpub_run(t, csv, k)
            return mine, self.anonypyx_run(t, csv, k)
        theirs = self.anonypyx_run(t, csv, k)
        return self.privpub_run(t, csv, k), theirs


def timing(r: dict) -> str:
    return f"{r['wall_s']:.2f} / {r['cpu_s']:.2f} / {r['max_rss'] / 2**20:.0f}"


VALUES = {"split_width": "values"}


def sweep_runs(runner: Runner, t: Table, csv: Path, k: int, first: bool, values: bool, reference: bool) -> dict:
    """privpub (default), privpub with split_width = "values" and anonypyx, as asked, the order
    alternating with `first` (privpub's runs first, or anonypyx's)."""
    runs: dict = {}
    if reference and not first:
        runs["anonypyx"] = runner.anonypyx_run(t, csv, k)
    runs["privpub"] = runner.privpub_run(t, csv, k)
    if values:
        runs["values"] = runner.privpub_run(t, csv, k, VALUES)
    if reference and first:
        runs["anonypyx"] = runner.anonypyx_run(t, csv, k)
    return runs


def sweep(runner: Runner, t: Table, ks: list[int], values: bool, reference: bool) -> list[list[str]]:
    csv = runner.work / f"{t.name}.csv"
    write_input(t, csv)
    doms = domains(t)
    rows = []
    for i, k in enumerate(ks):
        runs = sweep_runs(runner, t, csv, k, i % 2 == 0, values, reference)
        scores, recorded = {}, {}
        for who, (_, where) in runs.items():
            if who == "anonypyx":
                scores[who] = score_anonypyx(where, doms)
            else:
                scores[who], recorded[who] = score_privpub(where, doms)
            if scores[who]["records"] != len(t.frame) or scores[who]["smallest class"] < k:
                raise RuntimeError(f"{who} at k={k}: {scores[who]['records']} records, smallest class too small")
            shutil.rmtree(where if who != "anonypyx" else where.parent, ignore_errors=True)
        names = [w for w in ("privpub", "values", "anonypyx") if w in runs]
        rows.append(
            [t.name, str(k)]
            + [f"{scores[w]['gen-iloss']:.4f}" for w in names]
            + [" / ".join(f"{recorded[w]:.4f}" for w in names if w in recorded)]
            + [f"{scores[w]['discernibility']:.4g}" for w in names]
            + [" / ".join(str(scores[w]["classes"]) for w in names)]
            + [timing(runs[w][0]) for w in names]
            + [" ".join(f"{d.name} " + "/".join(f"{scores[w]['per_qi'][d.name]:.3f}" for w in names) for d in doms)]
        )
        print(" | ".join(rows[-1]), flush=True)
    return rows


def sweep_header(values: bool, reference: bool) -> list[str]:
    names = ["privpub"] + (["privpub values"] if values else []) + (["anonypyx"] if reference else [])
    return (
        ["table", "k"]
        + [f"gen-iloss {w}" for w in names]
        + ["privpub recorded"]
        + [f"DM {w}" for w in names]
        + ["classes"]
        + [f"{w} wall/CPU s/MiB" for w in names]
        + ["per QI (" + "/".join(names) + ")"]
    )


def speed(runner: Runner, t: Table, pairs: int, k: int = 10) -> list[str]:
    csv = runner.work / f"{t.name}.csv"
    write_input(t, csv)
    mine, theirs = [], []
    for i in range(pairs):
        (m, run_dir), (a, out) = runner.pair(t, csv, k, privpub_first=i % 2 == 0)
        mine.append(m)
        theirs.append(a)
        print(f"  {t.name} pair {i + 1}: privpub {timing(m)}, anonypyx {timing(a)}", flush=True)
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(out.parent, ignore_errors=True)
    ratios = [m["wall_s"] / a["wall_s"] for m, a in zip(mine, theirs)]

    def med(runs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    def spread(runs: list[dict]) -> str:
        return f"{min(r['wall_s'] for r in runs):.2f}-{max(r['wall_s'] for r in runs):.2f}"

    return [
        f"{t.name} ({len(t.frame):,} rows)",
        f"{med(mine, 'wall_s'):.2f} ({spread(mine)})",
        f"{med(theirs, 'wall_s'):.2f} ({spread(theirs)})",
        f"{med(mine, 'cpu_s'):.2f} / {med(theirs, 'cpu_s'):.2f}",
        f"{max(r['max_rss'] for r in mine) / 2**20:.0f} / {max(r['max_rss'] for r in theirs) / 2**20:.0f}",
        f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})",
        f"{med(mine, 'cpu_s') / med(theirs, 'cpu_s'):.2f}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("sweep", "speed"))
    ap.add_argument("--tables", default=None)
    ap.add_argument("--ks", default="2,5,10,20,50")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--values", action="store_true", help='sweep: also privpub with split_width = "values"')
    ap.add_argument("--no-anonypyx", action="store_true", help="sweep: privpub only")
    ap.add_argument("--census-rows", type=int, default=48_842)
    ap.add_argument("--privpub", type=Path, default=ROOT / ".venv" / "bin" / "privpub")
    ap.add_argument("--bench-python", type=Path, default=ROOT / "bench-env" / "bin" / "python")
    args = ap.parse_args()
    tables = (args.tables or ("adult,census" if args.what == "sweep" else "adult,adult5,gen-250k")).split(",")
    load0 = open("/proc/loadavg").read().strip()
    work = Path(tempfile.mkdtemp(prefix="privpub-bench-real-"))
    from tests.benchmarks.bench_e2e import base_env

    runner = Runner(work, args.privpub.absolute(), args.bench_python.absolute(), base_env(work))
    try:
        if args.what == "sweep":
            reference = not args.no_anonypyx
            rows = [
                r
                for name in tables
                for r in sweep(runner, load_table(name, args.census_rows), _ints(args.ks), args.values, reference)
            ]
            print_table("privpub's Mondrian against anonypyx's, one scorer", sweep_header(args.values, reference), rows)
        else:
            rows = [speed(runner, load_table(name, args.census_rows), args.pairs) for name in tables]
            print_table(
                f"generalization k = 10 against anonypyx, {args.pairs} pairs (median, range)",
                ["table", "privpub wall s", "anonypyx wall s", "CPU s privpub / anonypyx", "peak MiB",
                 "wall ratio (per pair)", "CPU ratio"],
                rows,
            )  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load: {load0} at the start, {open('/proc/loadavg').read().strip()} at the end")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


if __name__ == "__main__":
    main()
