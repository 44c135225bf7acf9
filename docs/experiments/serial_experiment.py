"""Issue 5's experiment: serial releases under the paper's protocol on the synthetic census.

Protocol (the paper's Section 8, on tasks/demo_data.census instead of CADRMP): a full table of
N = n0 * (1 + 0.2 * (releases - 1)) people is drawn once (the paper's "Reactions"). Release 1 is
its first n0 rows. Each later release takes the previous snapshot, inserts the next 0.2 * n0
people (20 % of a partition, as the paper inserts 20 % of P_i), then gives 20 % of the tuples of
the result a new sensitive value copied from a random tuple of the full table (the overall
distribution). Occupation is sensitive; the 8 census QIs are the QIs. Transient values: the 10 %
least frequent occupations of release 1 (transient = 0.1, computed once and then fixed as a list
so that the protected set does not drift between releases, as docs/serial.md advises).

For each configuration it publishes the whole series in-process (no Prefect, no store): the
aggregate and summary of release j (Release.private["serial_aggregate"], ["serial_summary"]) and
its number are fed to release j + 1 as data.extra, as the store would, and every release is
verified with technique.verify (global p(o, s, k) over the whole series, exact: the pairs of the
release's people recomputed, the others from the summary). Per release it records average
and maximum group size, suppressed values, the worst global breach probability and how many
(person, value) pairs exceed 1/l, the mean relative error of a random count-query workload
(make_workload: queries over 1-3 QI ranges/sets at 1 %, 5 %, 10 % selectivity and one occupation
value; answered by tasks/evaluate: exact_answers on the snapshot and the technique's
estimate_counts on the published table), and seconds (release = grouping + tables + verification
+ aggregate; evaluation apart).

    # one configuration, appended as JSON lines to the results file
    .venv/bin/python -m docs.experiments.serial_experiment run --strategy constant-ratio --l 4
    .venv/bin/python -m docs.experiments.serial_experiment run --strategy geometric --l 4
    .venv/bin/python -m docs.experiments.serial_experiment run --strategy localized --l 4
    # all configurations of the issue, one after the other (l in 2 4 6 8 10, three strategies)
    .venv/bin/python -m docs.experiments.serial_experiment all
    # markdown tables + PNG plots from whatever is in the results file
    .venv/bin/python -m docs.experiments.serial_experiment report

Options of run/all: --tuples n0 (default 20000), --releases (20), --queries (5000),
--results (docs/experiments/serial_results.jsonl), --seed (data, 3), --workload-seed (0).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pickle  # noqa: E402

from privpub.schemas.spec import spec_from_dict  # noqa: E402
from privpub.tasks.core.microdata import Microdata  # noqa: E402
from privpub.tasks.demo_data import CENSUS_QI, census  # noqa: E402
from privpub.tasks.evaluate.metrics import error_by_selectivity, nonzero_relative_errors  # noqa: E402
from privpub.tasks.evaluate.workload import exact_answers, make_workload  # noqa: E402
from privpub.tasks.techniques.serial.technique import SerialTechnique  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "serial_results.jsonl"
STRATEGIES = ("constant-ratio", "geometric", "localized")
LS = (2, 4, 6, 8, 10)


def serial_technique(l: int, strategy: str, transient):
    spec = spec_from_dict(
        {
            "dataset": {
                "name": "census",
                "input": "census.csv",
                "person_id": "pid",
                "sensitive": "occupation",
                "qi": CENSUS_QI,
            },
            "technique": {
                "name": "serial",
                "l": l,
                "strategy": strategy,
                "releases": 20,
                "factor": 2,
                "transient": transient,
            },
        }
    )
    return spec, SerialTechnique(spec)  # directly: the registry imports every plug-in


def snapshots(n0: int, releases: int, seed: int):
    """The series of snapshots (generator), as described in the module docstring."""
    step = int(round(0.2 * n0))
    full = census(n0 + step * (releases - 1), seed=seed)
    overall = full["occupation"].to_numpy(dtype=object)
    rng = np.random.default_rng(seed + 1000)
    snap = full.iloc[:n0].copy()
    yield snap
    for r in range(2, releases + 1):
        start = n0 + step * (r - 2)
        snap = pd.concat([snap, full.iloc[start : start + step]], ignore_index=True)
        change = rng.choice(len(snap), size=int(round(0.2 * len(snap))), replace=False)
        snap.loc[change, "occupation"] = overall[rng.integers(0, len(overall), len(change))]
        yield snap


def shared_workload(first: Microdata, queries: int, workload_seed: int, n0: int, seed: int) -> list:
    """One workload for the whole series and every configuration: make_workload on release 1
    (1 %, 5 %, 10 % bands, queries / 3 each), cached in /tmp because drawing it takes a minute.
    The bands are selectivities on release 1; the census rows are i.i.d., so they stay about the
    same on later snapshots. A query whose true answer is 0 in a release is skipped there."""
    path = Path(f"/tmp/privpub_serial_workload_{n0}_{seed}_{workload_seed}_{queries}.pkl")
    if path.exists():
        return pickle.loads(path.read_bytes())
    workload = make_workload(first, np.random.default_rng(workload_seed), per_band=math.ceil(queries / 3))
    workload = workload[:queries]
    path.write_bytes(pickle.dumps(workload))
    return workload


def frac(s: str) -> float:
    return float(Fraction(s))


def run(
    strategy: str, l: int, n0: int, releases: int, queries: int, seed: int, workload_seed: int, results: Path
) -> None:
    spec, probe = serial_technique(l, strategy, 0.1)
    transient = None
    carried: dict = {}
    t_config = time.perf_counter()
    for r, snap in enumerate(snapshots(n0, releases, seed), start=1):
        if transient is None:
            first = Microdata.from_frame(spec, snap)
            transient = [str(v) for v in probe.protected_values(first)]
            spec, tech = serial_technique(l, strategy, transient)
            workload = shared_workload(first, queries, workload_seed, n0, seed)
        t0 = time.perf_counter()
        data = Microdata.from_frame(spec, snap.reset_index(drop=True))
        data.extra = dict(carried)
        gen = np.random.default_rng([seed, r])
        part = tech.partition(data, gen)
        release = tech.anonymize(data, part, gen)
        t1 = time.perf_counter()
        checks = {x.model: x for x in tech.verify(release, dict(carried))}
        t2 = time.perf_counter()
        # what the store hands the next release (Release.private of this one)
        carried = {
            "serial_aggregate": release.private["serial_aggregate"],
            "serial_summary": release.private["serial_summary"],
            "serial_release": int(release.private["release"]) + 1,
        }

        # the project's workload answers: exact on the snapshot, estimated by the technique
        actual = exact_answers(data.frame, workload, "occupation")
        estimate = np.asarray(tech.estimate_counts(release, workload), dtype=float)
        t3 = time.perf_counter()
        glob, loc = checks["serial-global"], checks["serial-localized"]
        row = {
            "strategy": strategy,
            "l": l,
            "n0": n0,
            "release": r,
            "tuples": data.n,
            "transient": transient,
            "groups": release.info["groups"],
            "avg_group": release.info["avg_group_size"],
            "max_group": release.info["max_group_size"],
            "suppressed": release.info["suppressed"],
            "query_error": float(nonzero_relative_errors(actual, estimate).mean()),
            "queries": len(workload),
            **error_by_selectivity(workload, actual, estimate),
            "worst_p": glob.value,
            "worst_p_float": frac(glob.value),
            "global_ok": glob.passed,
            "breaching_pairs": glob.worst.get("breaching_pairs", 0),
            "pairs": glob.worst.get("pairs", 0),
            "worst_links": glob.worst.get("links"),
            "localized_worst": loc.value,
            "localized_ok": loc.passed,
            "seconds": round(t2 - t0, 2),
            "seconds_verify": round(t2 - t1, 2),
            "seconds_eval": round(t3 - t2, 2),
        }
        with results.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(
            f"{strategy:>14} l={l:<2} r={r:<2} n={data.n:<6} avg={row['avg_group']:.1f} "
            f"max={row['max_group']} supp={row['suppressed']} err={row['query_error']:.3f} "
            f"p={row['worst_p_float']:.4f} breach={row['breaching_pairs']}/{row['pairs']} "
            f"t={row['seconds']}s eval={row['seconds_eval']}s",
            flush=True,
        )
    print(f"{strategy} l={l}: {time.perf_counter() - t_config:.0f} s", flush=True)


# ------------------------------------------------------------------------------------------------
# report: tables and plots from the results file


def load(results: Path) -> pd.DataFrame:
    rows = [json.loads(x) for x in results.read_text().splitlines() if x.strip()]
    frame = pd.DataFrame(rows)
    # a configuration run twice: keep its last complete run
    return frame.drop_duplicates(["strategy", "l", "n0", "release"], keep="last")


def summary_table(frame: pd.DataFrame) -> str:
    lines = [
        "| strategy | l | releases | avg group (r1 → r20) | max group (r1 → max) | suppressed (total) "
        "| query error (mean; r1 → r20) | worst p at the end (1/l) | first release with p > 1/l "
        "| pairs > 1/l at the end | s/release (mean; max) |",
        "|---|---:|---:|---|---|---:|---|---|---:|---:|---|",
    ]
    for (strategy, l), g in frame.groupby(["strategy", "l"], sort=False):
        g = g.sort_values("release")
        first, last = g.iloc[0], g.iloc[-1]
        lines.append(
            f"| {strategy} | {l} | {len(g)} | {first.avg_group:.1f} → {last.avg_group:.1f} "
            f"| {first.max_group} → {g.max_group.max()} | {g.suppressed.sum()} "
            f"| {g.query_error.mean():.3f}; {first.query_error:.3f} → {last.query_error:.3f} "
            f"| {last.worst_p_float:.4f} ({1 / l:.4f}) "
            f"| {first_breach(g)} | {last.breaching_pairs:,} "
            f"| {g.seconds.mean():.1f}; {g.seconds.max():.1f} |"
        )
    return "\n".join(lines)


def first_breach(g: pd.DataFrame) -> str:
    over = g[g.breaching_pairs > 0]
    return str(int(over.release.min())) if len(over) else "never"


def per_release_table(frame: pd.DataFrame, strategy: str, l: int) -> str:
    g = frame[(frame.strategy == strategy) & (frame.l == l)].sort_values("release")
    lines = [
        f"{strategy}, l = {l}:",
        "",
        "| release | tuples | groups | avg group | max group | suppressed | query error | worst p | pairs > 1/l | s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for x in g.itertuples():
        lines.append(
            f"| {x.release} | {x.tuples:,} | {x.groups:,} | {x.avg_group:.2f} | {x.max_group} "
            f"| {x.suppressed} | {x.query_error:.3f} | {x.worst_p_float:.4f} "
            f"| {x.breaching_pairs:,} | {x.seconds:.1f} |"
        )
    return "\n".join(lines)


def side_by_side(frame: pd.DataFrame, l: int) -> str:
    """The three strategies at one l, release by release."""
    parts = {s: frame[(frame.strategy == s) & (frame.l == l)].set_index("release") for s in STRATEGIES}
    lines = [
        f"l = {l}: avg / max group, suppressed values, query error, worst p (1/l = {1 / l:.4f})",
        "",
        "| release | tuples | constant-ratio avg / max | error | worst p | geometric avg / max | suppressed "
        "| error | worst p | localized avg / max | error | worst p | pairs > 1/l |",
        "|---:|---:|---|---:|---:|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    releases = sorted(set().union(*[set(x.index) for x in parts.values()]))
    for r in releases:
        cells = [str(r)]
        tuples = next((x.loc[r, "tuples"] for x in parts.values() if r in x.index), 0)
        cells.append(f"{tuples:,}")
        for s in STRATEGIES:
            x = parts[s]
            if r not in x.index:
                cells += ["-"] * (4 if s != "constant-ratio" else 3)
                continue
            y = x.loc[r]
            cells.append(f"{y.avg_group:.1f} / {y.max_group}")
            if s == "geometric":
                cells.append(str(y.suppressed))
            cells += [f"{y.query_error:.3f}", f"{y.worst_p_float:.4f}"]
            if s == "localized":
                cells.append(f"{y.breaching_pairs:,}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plots(frame: pd.DataFrame, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    ls = sorted(frame.l.unique())
    colors = {l: c for l, c in zip(LS, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"])}
    styles = {"constant-ratio": "-", "geometric": "--", "localized": ":"}
    # 1. group sizes and query error per release, one column per strategy
    strategies = [s for s in STRATEGIES if s in set(frame.strategy)]
    fig, axes = plt.subplots(
        3, len(strategies), figsize=(4.6 * len(strategies), 10), squeeze=False, sharex=True, sharey="row"
    )
    for j, s in enumerate(strategies):
        for l in ls:
            g = frame[(frame.strategy == s) & (frame.l == l)].sort_values("release")
            if g.empty:
                continue
            kw = dict(color=colors.get(l), marker="o", ms=3, label=f"l = {l}")
            axes[0, j].plot(g.release, g.avg_group, **kw)
            axes[1, j].plot(g.release, g.max_group, **kw)
            axes[2, j].plot(g.release, g.query_error, **kw)
        axes[0, j].set_title(s)
        axes[1, j].set_yscale("log")
        axes[2, j].set_xlabel("release")
    axes[0, 0].set_ylabel("average group size")
    axes[1, 0].set_ylabel("maximum group size (log)")
    axes[2, 0].set_ylabel("mean relative error")
    from matplotlib.ticker import MaxNLocator

    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0, -1].legend(loc="upper left", fontsize=8)
    fig.suptitle("Serial releases on the synthetic census: group size and query error per release")
    fig.tight_layout()
    p = out / "serial_groups_error.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    written.append(p)

    # 2. worst global breach probability per release vs 1/l
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    for s in strategies:
        for l in ls:
            g = frame[(frame.strategy == s) & (frame.l == l)].sort_values("release")
            if g.empty:
                continue
            ax[0].plot(
                g.release, g.worst_p_float * l, styles[s], color=colors.get(l), marker="o", ms=3, label=f"{s}, l = {l}"
            )
            if s == "localized":
                ax[1].plot(g.release, g.breaching_pairs, color=colors.get(l), marker="o", ms=3, label=f"l = {l}")
    ax[0].axhline(1.0, color="black", lw=1)
    ax[0].text(1, 1.02, "p = 1/l", fontsize=8)
    ax[0].set_ylabel("worst p(o, s, k) × l   (> 1 is a breach)")
    ax[0].set_xlabel("release")
    ax[0].set_title("worst global breach probability, scaled by l")
    ax[0].legend(fontsize=7, ncol=2)
    ax[1].set_title("localized-only baseline: (person, value) pairs with p > 1/l")
    ax[1].set_xlabel("release")
    ax[1].set_ylabel("pairs breaching the global guarantee")
    ax[1].legend(fontsize=8)
    for a in ax:
        a.grid(alpha=0.3)
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    p = out / "serial_breach.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    written.append(p)
    return written


def report(results: Path) -> None:
    frame = load(results)
    md = ["## Summary", "", summary_table(frame), ""]
    for l in sorted(frame.l.unique()):
        md += [side_by_side(frame, int(l)), ""]
    for (strategy, l), _ in frame.groupby(["strategy", "l"], sort=False):
        md += [per_release_table(frame, strategy, l), ""]
    text = "\n".join(md)
    (HERE / "serial_results.md").write_text(text + "\n")
    print(text)
    for p in plots(frame, HERE):
        print("wrote", p)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["run", "all", "report"])
    ap.add_argument("--strategy", default="constant-ratio", choices=STRATEGIES)
    ap.add_argument("--l", type=int, default=4)
    ap.add_argument("--tuples", type=int, default=20_000)
    ap.add_argument("--releases", type=int, default=20)
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--workload-seed", type=int, default=0)
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args()
    results = Path(args.results)
    common = dict(
        n0=args.tuples,
        releases=args.releases,
        queries=args.queries,
        seed=args.seed,
        workload_seed=args.workload_seed,
        results=results,
    )
    if args.command == "run":
        run(args.strategy, args.l, **common)
    elif args.command == "all":
        for l in LS:
            for s in STRATEGIES:
                run(s, l, **common)
    else:
        report(results)


if __name__ == "__main__":
    main()
