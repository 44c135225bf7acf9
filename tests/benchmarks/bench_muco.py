"""MuCo benchmark and the paper's Section 5 experiment (not run by CI).

    .venv/bin/python -m tests.benchmarks.bench_muco                    # 40,152 rows, delta 1/6, l 10
    .venv/bin/python -m tests.benchmarks.bench_muco --rows 1000000     # time and memory at scale
    .venv/bin/python -m tests.benchmarks.bench_muco --experiment       # ILoss, disclosure, SUM error

Data: tasks.demo_data.census with 7 QIs (age, sex, education, marital, race, workclass, country)
and a numeric sensitive `income` derived from its salary class (the paper's SUM(salary)).
Timings are wall clock and process CPU (the machine is shared: CPU time is the steadier figure).
The Mondrian baseline of the experiment is computed here from the same partitioner: each QI cell
generalized to its group's range (numeric, ordinal) or value set (categorical), as the
`generalization` technique publishes it.
"""
from __future__ import annotations

import argparse
import resource
import time
from fractions import Fraction

import numpy as np
import pandas as pd

from schemas.spec import spec_from_dict
from tasks.anonymize.anatomy import Anatomy
from tasks.anonymize.base import get_technique
from tasks.anonymize.muco import exact_sums, iloss, random_sum_queries, relative_errors
from tasks.demo_data import CENSUS_QI, census
from tasks.microdata import Microdata
from tasks.partition.mondrian import mondrian_partition
from tasks.verify import delta_probability as dp

QI_NAMES = ("age", "sex", "education", "marital", "race", "workclass", "country")


def census_income(n: int, seed: int = 0) -> pd.DataFrame:
    frame = census(n, seed)
    rng = np.random.default_rng(seed + 1)
    cls = frame["salary"].str[4:].astype(int).to_numpy()
    frame["income"] = (np.round(np.exp(8.6 + 0.06 * cls + rng.normal(0, 0.35, n)) / 100) * 100).astype(np.int64)
    return frame.drop(columns=["salary", "occupation"])


def make_spec(technique: dict):
    qi = [q for q in CENSUS_QI if q["name"] in QI_NAMES]
    return spec_from_dict({"dataset": {"name": "census", "input": "census.csv", "person_id": "pid",
                                       "sensitive": "income", "qi": qi}, "technique": technique})


class Clock:
    def __init__(self):
        self.rows: list[tuple[str, float, float]] = []

    def __call__(self, label, fn, *args):
        w, c = time.perf_counter(), time.process_time()
        out = fn(*args)
        self.rows.append((label, time.perf_counter() - w, time.process_time() - c))
        return out

    def report(self):
        for label, w, c in self.rows:
            print(f"  {label:<28} wall {w:7.2f} s   cpu {c:7.2f} s")
        print(f"  {'total':<28} wall {sum(r[1] for r in self.rows):7.2f} s   "
              f"cpu {sum(r[2] for r in self.rows):7.2f} s")


def bench(rows: int, delta: str, l: int, disclosure: bool) -> None:
    frame = census_income(rows)
    spec = make_spec({"name": "muco", "delta": delta, "l": l})
    clock = Clock()
    rng = np.random.default_rng(2024)
    data = clock("validate (Microdata)", Microdata.from_frame, spec, frame)
    tech = get_technique(spec)
    part = clock("partition (Mondrian)", tech.partition, data, rng)
    release = clock("anonymize", tech.anonymize, data, part, rng)
    results = clock("verify (Def. 3, Cor. 3.2)", tech.verify, release, {})
    if disclosure:
        results += clock("disclosure (Section 5.1)", tech.verify, release, {"data": data})[3:]
    print(f"MuCo, {rows:,} rows, {len(QI_NAMES)} QIs, delta = {delta}, l = {l}")
    clock.report()
    print(f"  anonymize split: {release.info['seconds']}")
    print(f"  groups {release.info['groups']} (sizes {release.info['min_group']}..{release.info['max_group']}), "
          f"randomized unchanged {release.info['randomized_unchanged']}, unchangeable {release.info['unchangeable']}")
    print(f"  stored table entries {release.private['output_tables'].num_rows:,}; "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    for r in results:
        print(f"  {'PASS' if r.passed else 'FAIL'} {r.model}: {r.value}")


# --- Mondrian baseline measured on the generalized cells ------------------------------------

def group_boxes(data: Microdata, group: np.ndarray, n_groups: int):
    """Per QI: (lo, hi) codes per group, or for categorical QIs a (groups x values) presence matrix."""
    boxes = []
    for a, dom in enumerate(data.domains):
        c = data.codes[:, a]
        if dom.kind == "categorical":
            present = np.zeros((n_groups, dom.size), dtype=bool)
            present[group, c] = True
            boxes.append(present)
        else:
            lo = np.full(n_groups, dom.size)
            hi = np.full(n_groups, -1)
            np.minimum.at(lo, group, c)
            np.maximum.at(hi, group, c)
            boxes.append((lo, hi))
    return boxes


def mondrian_iloss(data, boxes, group) -> float:
    per = []
    for dom, box in zip(data.domains, boxes):
        if dom.kind == "categorical":
            width = (box.sum(axis=1) - 1) / max(dom.size - 1, 1)
        else:
            width = dom.width(box[0], box[1]) / dom.span if dom.span > 0 else np.zeros(len(box[0]))
        per.append(width[group])
    return float(np.mean(np.column_stack(per)))


def mondrian_sums(data, boxes, group, n_groups, queries) -> np.ndarray:
    s = data.frame["income"].to_numpy(dtype=float)
    gsum = np.bincount(group, weights=s, minlength=n_groups)
    out = []
    for q in queries:
        frac = np.ones(n_groups)
        for name, cond in q.conditions:
            a = data.qi_names.index(name)
            dom, box = data.domains[a], boxes[a]
            if dom.kind == "numeric":
                lo, hi = dom.values[box[0]].astype(float), dom.values[box[1]].astype(float)
                width = hi - lo
                overlap = np.clip(np.minimum(hi, cond.hi) - np.maximum(lo, cond.lo), 0, None)
                inside = ((lo >= cond.lo) & (lo <= cond.hi)).astype(float)
                frac *= np.where(width > 0, overlap / np.where(width > 0, width, 1), inside)
            else:
                hit = np.isin(dom.values.astype(str), list(cond.values))
                if dom.kind == "categorical":
                    members = box
                else:
                    codes = np.arange(dom.size)
                    members = (codes[None, :] >= box[0][:, None]) & (codes[None, :] <= box[1][:, None])
                frac *= (members & hit[None, :]).sum(axis=1) / members.sum(axis=1)
        out.append(float((gsum * frac).sum()))
    return np.array(out)


def mondrian_disclosure(data, boxes, group, n_groups, rng, targets=2000, p_matches=dp.P_MATCH):
    """Same measure as dp.disclosure, on generalized cells (a target matches a group whose cell
    contains its value), exact over the attribute subsets, for a random sample of targets."""
    t = rng.choice(data.n, size=min(targets, data.n), replace=False)
    size = np.bincount(group, minlength=n_groups).astype(float)
    s_codes = data.sensitive_codes
    same_s = np.zeros((len(t), n_groups))
    for i, r in enumerate(t):
        same_s[i] = np.bincount(group[s_codes == s_codes[r]], minlength=n_groups)
    member = []
    for a, (dom, box) in enumerate(zip(data.domains, boxes)):
        v = data.codes[t, a]
        member.append(box[:, v].T if dom.kind == "categorical"
                      else (box[0][None, :] <= v[:, None]) & (v[:, None] <= box[1][None, :]))
    d = len(member)
    sums = {s: [0.0, 0.0] for s in range(1, d + 1)}

    def visit(start, prod, depth):
        for a in range(start, d):
            p = member[a] if prod is None else prod & member[a]
            count = p @ size
            sums[depth + 1][0] += float(np.mean(1.0 / count))  # own group always matches
            sums[depth + 1][1] += float(np.mean((p * same_s).sum(axis=1) / count))
            visit(a + 1, p, depth + 1)

    visit(0, None, 0)
    out = {}
    for pm in p_matches:
        w = dp.subset_weights(pm, d)
        out[pm] = (sum(w[s] * sums[s][0] for s in w), sum(w[s] * sums[s][1] for s in w))
    return out


def experiment(rows: int, l: int, deltas: list[str], n_queries: int) -> None:
    frame = census_income(rows)
    rng = np.random.default_rng(7)
    base = Microdata.from_frame(make_spec({"name": "muco", "delta": "1/6", "l": l}), frame)
    queries = random_sum_queries(base, rng, n=n_queries)
    exact = exact_sums(base, queries)
    lines = ["| technique | ILoss | SUM rel. error mean | SUM rel. error var | "
             + " | ".join(f"id/attr P={p}" for p in dp.P_MATCH) + " |",
             "|---" * (4 + len(dp.P_MATCH)) + "|"]

    def row(name, il, err, disc):
        cells = " | ".join(f"{disc[p][0]:.4f} / {disc[p][1]:.4f}" for p in dp.P_MATCH) if disc else \
            " | ".join("-" for _ in dp.P_MATCH)
        il_txt = f"{il:.4f}" if il is not None else "0 (QIs exact)"
        lines.append(f"| {name} | {il_txt} | {err.mean():.4f} | {err.var():.4f} | {cells} |")
        print(lines[-1], flush=True)

    for delta in deltas:
        spec = make_spec({"name": "muco", "delta": delta, "l": l})
        data = Microdata.from_frame(spec, frame)
        tech = get_technique(spec)
        g = np.random.default_rng(11)
        part = tech.partition(data, g)
        rel = tech.anonymize(data, part, g)
        res = {r.model: r.value for r in tech.verify(rel, {"data": data})}
        disc = {p: (res[f"identity disclosure (P_match={p})"], res[f"attribute disclosure (P_match={p})"])
                for p in dp.P_MATCH}
        row(f"MuCo delta={delta}", iloss(rel, data), relative_errors(tech.estimate_sums(rel, queries), exact), disc)

    part = mondrian_partition(base, l, l)
    boxes = group_boxes(base, part.group, part.n_groups)
    est = mondrian_sums(base, boxes, part.group, part.n_groups, queries)
    disc = mondrian_disclosure(base, boxes, part.group, part.n_groups, np.random.default_rng(3))
    row(f"Mondrian l={l}", mondrian_iloss(base, boxes, part.group), relative_errors(est, exact), disc)

    aspec = make_spec({"name": "anatomy", "l": l})
    adata = Microdata.from_frame(aspec, frame)
    anat = Anatomy(aspec)
    g = np.random.default_rng(5)
    arel = anat.anonymize(adata, anat.partition(adata, g), g)
    row(f"Anatomy l={l}", None, relative_errors(anat.estimate_sums(arel, queries), exact), None)
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=40_152)
    ap.add_argument("--delta", default="1/6")
    ap.add_argument("--l", type=int, default=10)
    ap.add_argument("--no-disclosure", action="store_true")
    ap.add_argument("--experiment", action="store_true")
    ap.add_argument("--queries", type=int, default=1000)
    args = ap.parse_args()
    if args.experiment:
        experiment(args.rows, args.l, ["1/5", "1/6", "1/7", "1/8", "1/10"], args.queries)
    else:
        Fraction(args.delta)
        bench(args.rows, args.delta, args.l, not args.no_disclosure)


if __name__ == "__main__":
    main()
