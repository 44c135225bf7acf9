"""Benchmark of the release spine (not run by CI): `make bench`, or

    .venv/bin/python -m tests.benchmarks.bench_spine [--rows 1000000] [--compare-rows 100000]
        [--k 10] [--l 3] [--repeat 2] [--external-repeat 2] [--skip-external] [--json out.json]

Three parts, all on tasks.demo_data.census (8 QIs: age numeric; education, salary ordinal; sex,
marital, race, workclass, country categorical; occupation sensitive), technique `generalization`:

1. Scale: encode (Microdata.from_frame) -> Mondrian partition -> generalized table -> verification
   (k-anonymity and distinct l-diversity from the published table, DuckDB) on --rows rows.
   Each repetition runs in a fresh subprocess so its memory figure is its own: the peak RSS is the
   kernel's high-water mark (VmHWM) reset with /proc/self/clear_refs after the input frame is
   built, so it covers the pipeline with its input resident (the process-wide ru_maxrss, input
   generation included, is reported too). Targets: < 20 s, < 2 GiB.
2. anonypyx's Mondrian (machine-readable generalisation) vs ours on the same --compare-rows rows,
   same QIs, same k and l. anonypyx handles numeric and pandas-category columns: the ordinal QIs
   are handed to it as their integer codes in the spec's order (so it cuts them as ranges, as we
   do) and the categorical ones as category dtype. Its output is converted to our published
   format and both are scored by tasks.evaluate.metrics.uncertainty_penalty (Butterfly paper,
   Definition 1: total and normalised per tuple and QI); a second convention scores a categorical
   set by its size instead of its code range. Target: ours >= 50x faster, penalty no worse.
   Run on all 8 QIs, then on the example spec's 3 QIs (docs/spec.md) (age, sex, education) as a smaller point of
   comparison (--compare-qi chooses other sets).
3. pycanon's k_anonymity and l_diversity on our published table (one string column per QI:
   "lo-hi" for ranges, comma-joined sets) vs our verifier on the Arrow table. Target: identical
   figures, ours >= 20x faster.

anonypyx and pycanon run in bench-env/ (their pins clash with the project's numpy / pandas /
scipy) through tests/benchmarks/bench_spine_external.py, exchanging Parquet files. Every timed
part runs --repeat (ours, pycanon) or --external-repeat (anonypyx) times; the best wall time is
reported, with the CPU time of that run (the machine is shared: CPU time is the steadier figure).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from privpub.schemas.spec import spec_from_dict  # noqa: E402
from privpub.tasks.core.microdata import Microdata  # noqa: E402
from privpub.tasks.demo_data import CENSUS_QI, census, census_spec  # noqa: E402
from privpub.tasks.evaluate.metrics import uncertainty_penalty  # noqa: E402
from privpub.tasks.techniques.registry import get_technique  # noqa: E402
from privpub.tasks.verify.k_anonymity import k_anonymity, l_diversity  # noqa: E402
from privpub.tasks.verify.published import equivalence_classes, qi_columns  # noqa: E402

EXTERNAL = Path(__file__).with_name("bench_spine_external.py")
DEFAULT_BENCH_PYTHON = ROOT / "bench-env" / "bin" / "python"
ALL_QI = [q["name"] for q in CENSUS_QI]
SPEC_EXAMPLE_QI = ["age", "sex", "education"]  # the example spec's QIs (docs/spec.md): a 3-QI point of comparison
SENSITIVE = "occupation"
GiB = 1024**3


# --- small helpers ------------------------------------------------------------------------------


def clock(fn, *args, **kwargs):
    """(result, wall seconds, process CPU seconds: all threads, DuckDB's included)."""
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - w, time.process_time() - c


def proc_status(field: str) -> int | None:
    """A /proc/self/status memory figure in bytes (VmRSS, VmHWM), None off Linux."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def reset_peak_rss() -> bool:
    """Reset the kernel's RSS high-water mark of this process (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def make_spec(k: int, l: int | None, qi: list[str]):
    return spec_from_dict(census_spec("census.parquet", k=k, l=l, qi=qi))


def results_dict(results) -> dict:
    return {r.model: r.value for r in results}


def fmt_s(x: float) -> str:
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


def fmt_x(x: float) -> str:
    return f"{x:.0f}x" if x >= 10 else f"{x:.1f}x"


def fmt_bytes(b: int | None) -> str:
    return "n/a" if b is None else f"{b / GiB:.2f} GiB"


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for j, r in enumerate(cells):
        print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if j == 0:
            print("  " + "  ".join("-" * w for w in widths))


def run_external(python: Path, args: list[str]) -> dict:
    proc = subprocess.run([str(python), str(EXTERNAL), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{EXTERNAL.name} {args[0]} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- part 1: scale ------------------------------------------------------------------------------

STEPS = ("encode", "partition", "anonymize", "verify")


def scale_worker(rows: int, k: int, l: int | None, seed: int) -> dict:
    """One run of the pipeline in this (fresh) process; returns the figures."""
    frame = census(rows, seed)
    spec = make_spec(k, l, ALL_QI)
    get_technique(spec)  # imports the technique plug-ins once, outside the timed steps
    gc.collect()
    hwm_reset = reset_peak_rss()
    rss_before = proc_status("VmRSS")
    times: dict[str, tuple[float, float]] = {}

    def encode():
        data = Microdata.from_frame(spec, frame)
        tech = get_technique(spec)
        tech.check_data(data)
        return data, tech

    (data, tech), *times["encode"] = clock(encode)
    rng = np.random.default_rng(seed)
    part, *times["partition"] = clock(tech.partition, data, rng)
    release, *times["anonymize"] = clock(tech.anonymize, data, part, rng)
    results, *times["verify"] = clock(tech.verify, release, {})
    peak = proc_status("VmHWM") if hwm_reset else None
    return {
        "rows": rows,
        "groups": part.n_groups,
        "published_rows": release.tables["table"].num_rows,
        "privacy": results_dict(results),
        "passed": all(r.passed for r in results),
        "times": {s: {"wall": w, "cpu": c} for s, (w, c) in times.items()},
        "total_wall": sum(w for w, _ in times.values()),
        "total_cpu": sum(c for _, c in times.values()),
        "rss_before": rss_before,
        "peak_rss": peak,
        "ru_maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def part_scale(args) -> dict:
    runs = []
    for i in range(args.repeat):
        cmd = [
            sys.executable,
            "-m",
            "tests.benchmarks.bench_spine",
            "--scale-worker",
            "--rows",
            str(args.rows),
            "--k",
            str(args.k),
            "--seed",
            str(args.seed),
        ]
        if args.l:
            cmd += ["--l", str(args.l)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"scale worker failed:\n{proc.stderr[-3000:]}")
        run = json.loads(proc.stdout.strip().splitlines()[-1])
        runs.append(run)
        print(
            f"  scale run {i + 1}/{args.repeat}: {run['total_wall']:.2f} s wall, "
            f"{run['total_cpu']:.2f} s CPU, peak {fmt_bytes(run['peak_rss'])}",
            flush=True,
        )
    best = min(runs, key=lambda r: r["total_wall"])
    peaks = [r["peak_rss"] for r in runs if r["peak_rss"] is not None]
    return {
        "runs": runs,
        "best": best,
        "max_peak_rss": max(peaks) if peaks else None,
        "max_ru_maxrss": max(r["ru_maxrss"] for r in runs),
    }


def report_scale(res: dict, args) -> None:
    best = res["best"]
    rows = [[s, fmt_s(best["times"][s]["wall"]), fmt_s(best["times"][s]["cpu"])] for s in STEPS]
    rows.append(["total", fmt_s(best["total_wall"]), fmt_s(best["total_cpu"])])
    all_walls = ", ".join(f"{r['total_wall']:.2f}" for r in res["runs"])
    print_table(
        f"1. Scale: {args.rows:,} census rows, 8 QIs, k = {args.k}, l = {args.l} "
        f"(best of {len(res['runs'])} by wall time; all totals: {all_walls} s)",
        ["step", "wall s", "CPU s"],
        rows,
    )
    print(f"  groups {best['groups']:,}; reached {best['privacy']}; all checks passed: {best['passed']}")
    print(
        f"  RSS with the input frame built: {fmt_bytes(best['rss_before'])}; peak RSS during the "
        f"pipeline (max over runs): {fmt_bytes(res['max_peak_rss'])}; process peak incl. data "
        f"generation: {fmt_bytes(res['max_ru_maxrss'])}"
    )
    ok_t = best["total_wall"] < 20
    ok_m = res["max_peak_rss"] is not None and res["max_peak_rss"] < 2 * GiB
    print(
        f"  target < 20 s: {'met' if ok_t else 'MISSED'} ({best['total_wall']:.2f} s wall, "
        f"{best['total_cpu']:.2f} s CPU); target < 2 GiB: {'met' if ok_m else 'MISSED'}"
    )


# --- part 2: anonypyx vs ours -------------------------------------------------------------------


def _list_from_mask(mask: np.ndarray, labels: pa.Array) -> pa.ListArray:
    """One list per row of a boolean (rows x values) matrix: the labels where it is True, in
    label (domain) order."""
    counts = mask.sum(axis=1)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    child = np.nonzero(mask)[1]  # row-major: each row's codes ascending
    return pa.ListArray.from_arrays(pa.array(offsets), labels.take(pa.array(child)))


def _list_from_ranges(lo: np.ndarray, hi: np.ndarray, labels: pa.Array) -> pa.ListArray:
    """One list per row: the labels of codes lo..hi."""
    codes = np.arange(len(labels))
    return _list_from_mask((codes >= lo[:, None]) & (codes <= hi[:, None]), labels)


def anonypyx_input(frame: pd.DataFrame, data: Microdata, qi: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """The frame anonypyx gets: numeric as is, ordinal as integer codes, categorical as strings
    (the helper makes them pandas categories)."""
    out = {}
    categorical = []
    for j, dom in enumerate(data.domains):
        if dom.name not in qi:
            continue
        if dom.kind == "numeric":
            out[dom.name] = frame[dom.name].to_numpy()
        elif dom.kind == "ordinal":
            out[dom.name] = data.codes[:, j].astype(np.int64)
        else:
            out[dom.name] = frame[dom.name].astype(str).to_numpy(dtype=object)
            categorical.append(dom.name)
    out[SENSITIVE] = frame[SENSITIVE].astype(str).to_numpy(dtype=object)
    return pd.DataFrame(out), categorical


def anonypyx_to_published(out: pd.DataFrame, data: Microdata) -> pa.Table:
    """anonypyx's machine-readable output (one row per group and sensitive value, with `count`)
    in our published format: one row per tuple, <qi>_lo/<qi>_hi for numeric, lists otherwise."""
    counts = out["count"].to_numpy().astype(np.int64)
    per_tuple = pa.array(np.repeat(np.arange(len(out)), counts))
    cols: dict[str, pa.Array] = {}
    for dom in data.domains:
        name = dom.name
        labels = pa.array(np.asarray(dom.values, dtype=object).astype(str))
        if dom.kind == "numeric":
            cols[f"{name}_lo"] = pa.array(out[f"{name}_min"].to_numpy()).take(per_tuple)
            cols[f"{name}_hi"] = pa.array(out[f"{name}_max"].to_numpy()).take(per_tuple)
        elif dom.kind == "ordinal":
            arr = _list_from_ranges(out[f"{name}_min"].to_numpy(), out[f"{name}_max"].to_numpy(), labels)
            cols[name] = arr.take(per_tuple)
        else:
            onehot = [f"{name}_{v}" for v in labels.to_pylist()]
            mask = np.column_stack(
                [out[c].to_numpy(dtype=bool) if c in out.columns else np.zeros(len(out), dtype=bool) for c in onehot]
            )
            cols[name] = _list_from_mask(mask, labels).take(per_tuple)
    cols[SENSITIVE] = pa.array(out[SENSITIVE].astype(str).to_numpy(dtype=object)).take(per_tuple)
    return pa.table(cols)


def set_size_penalty(table: pa.Table, data: Microdata) -> dict:
    """Definition 1 with a categorical set scored by (|set| - 1) / (|A| - 1) instead of its code
    range; numeric and ordinal cells as in uncertainty_penalty (an ordinal list is a range)."""
    per_attr = {}
    for dom in data.domains:
        if dom.span == 0:
            per_attr[dom.name] = 0.0
        elif f"{dom.name}_lo" in table.column_names:
            lo = table.column(f"{dom.name}_lo").to_numpy().astype(float)
            hi = table.column(f"{dom.name}_hi").to_numpy().astype(float)
            per_attr[dom.name] = float(((hi - lo) / dom.span).sum())
        else:
            lengths = pc.list_value_length(table.column(dom.name)).to_numpy().astype(float)
            per_attr[dom.name] = float(((lengths - 1) / (dom.size - 1)).sum())
    total = sum(per_attr.values())
    n = max(table.num_rows, 1)
    return {"total": total, "normalized": total / (n * len(data.domains)), "per_attr": per_attr}


def score(table: pa.Table, data: Microdata, spec) -> dict:
    up = uncertainty_penalty(table, data)
    ss = set_size_penalty(table, data)
    cols = qi_columns(table, data.qi_names)
    sizes = equivalence_classes(table, cols).column("size").to_numpy()
    privacy = {"k-anonymity": k_anonymity(table, cols, spec.technique.params["k"]).value}
    if spec.technique.params.get("l"):
        privacy["l-diversity"] = l_diversity(table, cols, SENSITIVE, spec.technique.params["l"]).value
    return {
        "penalty": up["uncertainty-penalty"],
        "penalty_normalized": up["uncertainty-penalty-normalized"],
        "per_attr": {k[len("penalty-") :]: v for k, v in up.items() if k.startswith("penalty-")},
        "setsize_penalty": ss["total"],
        "setsize_penalty_normalized": ss["normalized"],
        "setsize_per_attr": ss["per_attr"],
        "classes": int(len(sizes)),
        "avg_class": float(sizes.mean()),
        "privacy": privacy,
    }


def run_ours(frame: pd.DataFrame, spec, seed: int, repeat: int) -> dict:
    get_technique(spec)  # imports the technique plug-ins once, outside the timed runs
    runs = []
    for _ in range(repeat):
        gc.collect()
        (data, tech), ew, ec = clock(lambda: (Microdata.from_frame(spec, frame), get_technique(spec)))
        rng = np.random.default_rng(seed)
        part, pw, pcpu = clock(tech.partition, data, rng)
        release, aw, acpu = clock(tech.anonymize, data, part, rng)
        runs.append(
            {
                "encode_s": ew,
                "partition_s": pw,
                "anonymize_s": aw,
                "total_s": ew + pw + aw,
                "total_cpu_s": ec + pcpu + acpu,
                "partition_cpu_s": pcpu,
                "groups": part.n_groups,
            }
        )
    best = min(runs, key=lambda r: r["total_s"])
    return {"runs": runs, "best": best, "data": data, "tech": tech, "release": release}


def part_anonypyx(args, frame: pd.DataFrame, qi: list[str], workdir: Path) -> dict:
    spec = make_spec(args.k, args.l, qi)
    ours = run_ours(frame, spec, args.seed, args.repeat)
    data = ours["data"]
    ours_score = score(ours["release"].tables["table"], data, spec)
    print(f"  ours ({len(qi)} QIs): {ours['best']['total_s']:.2f} s", flush=True)
    res = {"qi": qi, "ours": {k: v for k, v in ours.items() if k in ("runs", "best")}, "ours_score": ours_score}
    if args.skip_external:
        return res | {"_ours": ours}
    ax_in, categorical = anonypyx_input(frame, data, qi)
    tag = f"{len(qi)}qi"
    in_path, out_path = workdir / f"anonypyx_in_{tag}.parquet", workdir / f"anonypyx_out_{tag}.parquet"
    ax_in.to_parquet(in_path, index=False)
    ext_args = [
        "anonypyx",
        "--input",
        str(in_path),
        "--output",
        str(out_path),
        "--qi",
        ",".join(qi),
        "--categorical",
        ",".join(categorical),
        "--sensitive",
        SENSITIVE,
        "--k",
        str(args.k),
        "--repeat",
        str(args.external_repeat),
    ]
    if args.l:
        ext_args += ["--l", str(args.l)]
    print(f"  anonypyx ({len(qi)} QIs, {args.external_repeat} run(s)) ...", flush=True)
    ax = run_external(args.bench_python, ext_args)
    for r in ax["runs"]:
        r["total_s"] = r["partition_s"] + r["generalise_s"]
        r["total_cpu_s"] = r["partition_cpu_s"] + r["generalise_cpu_s"]
        print(f"    anonypyx run: {r['total_s']:.1f} s wall, {r['total_cpu_s']:.1f} s CPU", flush=True)
    ax["best"] = min(ax["runs"], key=lambda r: r["total_s"])
    ax_table = anonypyx_to_published(pd.read_parquet(out_path), data)
    if ax_table.num_rows != len(frame):
        raise RuntimeError(f"anonypyx output covers {ax_table.num_rows} tuples, expected {len(frame)}")
    res |= {
        "anonypyx": ax,
        "anonypyx_score": score(ax_table, data, spec),
        "speedup_wall": ax["best"]["total_s"] / ours["best"]["total_s"],
        "speedup_cpu": ax["best"]["total_cpu_s"] / ours["best"]["total_cpu_s"],
        "speedup_partition": ax["best"]["partition_s"] / ours["best"]["partition_s"],
    }
    return res | {"_ours": ours}


def report_anonypyx(res: dict, args) -> None:
    qi = res["qi"]
    o, os_ = res["ours"]["best"], res["ours_score"]
    header = [
        "",
        "partition s",
        "generalise s",
        "total s",
        "CPU s",
        "groups",
        "k",
        "l",
        "penalty total",
        "normalised",
        "set-size total",
        "set-size norm.",
    ]

    def row(label, part_s, gen_s, tot, cpu, sc):
        pr = sc["privacy"]
        return [
            label,
            fmt_s(part_s),
            fmt_s(gen_s),
            fmt_s(tot),
            fmt_s(cpu),
            f"{sc['classes']:,}",
            pr.get("k-anonymity", ""),
            pr.get("l-diversity", "-"),
            f"{sc['penalty']:,.0f}",
            f"{sc['penalty_normalized']:.4f}",
            f"{sc['setsize_penalty']:,.0f}",
            f"{sc['setsize_penalty_normalized']:.4f}",
        ]

    rows = [row("ours (encode incl.)", o["partition_s"], o["anonymize_s"], o["total_s"], o["total_cpu_s"], os_)]
    if "anonypyx" in res:
        a = res["anonypyx"]["best"]
        rows.append(
            row(
                f"anonypyx {res['anonypyx']['version']}",
                a["partition_s"],
                a["generalise_s"],
                a["total_s"],
                a["total_cpu_s"],
                res["anonypyx_score"],
            )
        )
    print_table(
        f"2. Mondrian side by side: {args.compare_rows:,} rows, {len(qi)} QIs ({', '.join(qi)}), "
        f"k = {args.k}, l = {args.l}; best of {args.repeat} (ours) / {args.external_repeat} (anonypyx)",
        header,
        rows,
    )
    if "anonypyx" in res:
        ap = res["anonypyx_score"]
        faster = res["speedup_wall"] >= 50
        no_worse = os_["penalty"] <= ap["penalty"]
        print(
            f"  ours is {fmt_x(res['speedup_wall'])} faster by wall time ({fmt_x(res['speedup_cpu'])} by CPU, "
            f"{fmt_x(res['speedup_partition'])} partition alone); penalty ours/anonypyx = "
            f"{os_['penalty'] / ap['penalty']:.3f} (set-size convention "
            f"{os_['setsize_penalty'] / ap['setsize_penalty']:.3f})"
        )
        print(f"  target >= 50x: {'met' if faster else 'MISSED'}; penalty no worse: {'met' if no_worse else 'MISSED'}")
        per = ", ".join(f"{q} {os_['per_attr'][q]:,.0f}/{ap['per_attr'][q]:,.0f}" for q in qi)
        print(f"  penalty per QI, ours/anonypyx: {per}")
        per = ", ".join(f"{q} {os_['setsize_per_attr'][q]:,.0f}/{ap['setsize_per_attr'][q]:,.0f}" for q in qi)
        print(f"  set-size convention per QI, ours/anonypyx: {per}")


# --- part 3: pycanon vs our verifier ------------------------------------------------------------


def pycanon_frame(table: pa.Table, qi: list[str]) -> pa.Table:
    """One string column per QI, as pycanon groups on plain column values."""
    cols = {}
    for q in qi:
        if f"{q}_lo" in table.column_names:
            lo = pc.cast(table.column(f"{q}_lo"), pa.string())
            hi = pc.cast(table.column(f"{q}_hi"), pa.string())
            cols[q] = pc.binary_join_element_wise(lo, hi, "-")
        else:
            cols[q] = pc.binary_join(table.column(q), ",")
    cols[SENSITIVE] = table.column(SENSITIVE)
    return pa.table(cols)


def part_pycanon(args, ours: dict, qi: list[str], workdir: Path) -> dict:
    tech, release = ours["tech"], ours["release"]
    table = release.tables["table"]
    runs = []
    for _ in range(args.repeat):
        results, w, c = clock(tech.verify, release, {})
        runs.append({"verify_s": w, "verify_cpu_s": c, "figures": results_dict(results)})
    best = min(runs, key=lambda r: r["verify_s"])
    res = {
        "ours": {"runs": runs, "best": best},
        "rows": table.num_rows,
        "classes": equivalence_classes(table, qi_columns(table, qi)).num_rows,
    }
    if args.skip_external:
        return res
    frame, cw, _ = clock(pycanon_frame, table, qi)
    path = workdir / "pycanon_in.parquet"
    pq.write_table(frame, path)
    print(f"  pycanon ({args.repeat} run(s)) ...", flush=True)
    pyc = run_external(
        args.bench_python,
        ["pycanon", "--input", str(path), "--qi", ",".join(qi), "--sensitive", SENSITIVE, "--repeat", str(args.repeat)],
    )
    for r in pyc["runs"]:
        r["total_s"], r["total_cpu_s"] = r["k_s"] + r["l_s"], r["k_cpu_s"] + r["l_cpu_s"]
    pyc["best"] = min(pyc["runs"], key=lambda r: r["total_s"])
    pyc["convert_s"] = cw
    return res | {
        "pycanon": pyc,
        "speedup_wall": pyc["best"]["total_s"] / best["verify_s"],
        "speedup_cpu": pyc["best"]["total_cpu_s"] / best["verify_cpu_s"],
    }


def report_pycanon(res: dict, args) -> None:
    o = res["ours"]["best"]
    rows = [
        [
            "ours (tech.verify)",
            "-",
            "-",
            fmt_s(o["verify_s"]),
            fmt_s(o["verify_cpu_s"]),
            o["figures"].get("k-anonymity"),
            o["figures"].get("l-diversity", "-"),
            f"{res['classes']:,}",
        ]
    ]
    if "pycanon" in res:
        p = res["pycanon"]["best"]
        rows.append(
            [
                f"pycanon {res['pycanon']['version']}",
                fmt_s(p["k_s"]),
                fmt_s(p["l_s"]),
                fmt_s(p["total_s"]),
                fmt_s(p["total_cpu_s"]),
                p["k"],
                p["l"],
                f"{res['pycanon']['classes']:,}",
            ]
        )
    print_table(
        f"3. Verification of our published table: {res['rows']:,} rows, 8 QIs; best of {args.repeat}",
        ["", "k s", "l s", "k + l s", "CPU s", "k", "l", "classes"],
        rows,
    )
    if "pycanon" in res:
        p = res["pycanon"]["best"]
        same = (
            p["k"] == o["figures"].get("k-anonymity")
            and p["l"] == o["figures"].get("l-diversity")
            and res["pycanon"]["classes"] == res["classes"]
        )
        print(f"  (conversion to pycanon's string columns, untimed above: {res['pycanon']['convert_s']:.2f} s)")
        print(
            f"  ours is {fmt_x(res['speedup_wall'])} faster by wall time ({fmt_x(res['speedup_cpu'])} by CPU); "
            f"identical figures: {'met' if same else 'MISSED'}; >= 20x: "
            f"{'met' if res['speedup_wall'] >= 20 else 'MISSED'}"
        )


# --- main ---------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--compare-rows", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--l", type=int, default=3, help="distinct l-diversity; 0 for k-anonymity only")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2, help="runs of our timed parts and of pycanon")
    ap.add_argument("--external-repeat", type=int, default=2, help="runs of anonypyx (slow)")
    ap.add_argument(
        "--compare-qi",
        action="append",
        default=None,
        help="comma-separated QI set for part 2 (repeatable); default: all 8, then age,sex,education",
    )
    ap.add_argument("--parts", default="1,2,3")
    ap.add_argument("--bench-python", type=Path, default=DEFAULT_BENCH_PYTHON)
    ap.add_argument("--skip-external", action="store_true", help="ours only (no bench-env)")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--scale-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.l = args.l or None
    if args.scale_worker:
        print(json.dumps(scale_worker(args.rows, args.k, args.l, args.seed)))
        return
    if not args.skip_external and not args.bench_python.exists():
        sys.exit(f"{args.bench_python} not found: run `make bench` (it builds bench-env) or pass --skip-external")
    parts = {int(p) for p in args.parts.split(",")}
    qi_sets = [s.split(",") for s in args.compare_qi] if args.compare_qi else [ALL_QI, SPEC_EXAMPLE_QI]
    out: dict = {"args": {k: str(v) for k, v in vars(args).items()}, "cpus": os.cpu_count()}
    print(f"privpub spine benchmark: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)

    if 1 in parts:
        out["scale"] = part_scale(args)
        report_scale(out["scale"], args)

    if parts & {2, 3}:
        frame = census(args.compare_rows, args.seed)
        with tempfile.TemporaryDirectory(prefix="bench_spine_") as tmp:
            workdir = Path(tmp)
            out["compare"] = []
            ours_all = None
            for qi in qi_sets:
                if 2 not in parts and qi != ALL_QI:
                    continue
                if 2 in parts:
                    res = part_anonypyx(args, frame, qi, workdir)
                    ours = res.pop("_ours")
                    out["compare"].append(res)
                    report_anonypyx(res, args)
                else:
                    spec = make_spec(args.k, args.l, qi)
                    ours = run_ours(frame, spec, args.seed, 1)
                if qi == ALL_QI:
                    ours_all = ours
            if 3 in parts:
                if ours_all is None:
                    ours_all = run_ours(frame, make_spec(args.k, args.l, ALL_QI), args.seed, 1)
                out["pycanon"] = part_pycanon(args, ours_all, ALL_QI, workdir)
                report_pycanon(out["pycanon"], args)

    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
