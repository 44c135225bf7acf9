"""Loosen each privacy check in turn and show that the tests notice (`make mutants`, on demand).

For every mutant: copy the tree to a temporary folder, replace one piece of a verifier's text
(the comparison that decides pass or fail), run the tests that guard that check there (the copy
first on PYTHONPATH through a tree of links, tests/import_root.py, so its modules are the ones
imported) and report the mutant as killed (some
test failed) or survived (every test passed); each guarding test file runs alone, so the
report names every file that notices. The unmutated copy is run first: its tests must
pass, or no verdict would mean anything. Exit status 1 when a mutant survives.

    python tests/mutation/run_mutants.py [--only NAME_PART ...] [--from NAME_PART] [--every] [--slow] [--markdown FILE]

--every runs each guarding file to its end (no -x) and names every test function that kills the
mutant (parametrized cases of one function count once), and counts the mutants that fewer than two
test functions kill (slower). --only may be given several times. The tests run as `make test`
runs them, without the full-size sweeps (marker `slow`): a mutant must be killed by what CI runs;
--slow runs those too.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.import_root import link_tree  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

GENERALIZED = ["tests/test_verify_k_anonymity.py", "tests/test_golden_spine.py", "tests/test_thresholds.py"]
MUCO = ["tests/test_muco.py", "tests/test_muco_verifier.py", "tests/test_thresholds.py"]
PRESENCE = [
    "tests/test_presence_association.py",
    "tests/test_ambiguity.py",
    "tests/test_priview.py",
    "tests/test_thresholds.py",
]
BUTTERFLY = [
    "tests/test_butterfly.py",
    "tests/test_butterfly_properties.py",
    "tests/test_thresholds.py",
    "tests/test_chunked_verify.py",
]
SERIAL = ["tests/test_serial_guarantee.py", "tests/test_serial_technique.py", "tests/test_thresholds.py"]
AUDIT = ["tests/audit/test_golden.py", "tests/audit/test_properties.py", "tests/test_thresholds.py"]
AUDIT_GRID = ["tests/audit/test_grid.py", "tests/audit/test_grid_kinds.py"]
AUDIT_NESTED = ["tests/audit/test_nested.py"]
ANATOMY = ["tests/test_anatomy.py", "tests/test_thresholds.py", "tests/test_chunked_verify.py"]
ANATOMY_PEOPLE = ["tests/test_anatomy_people.py", "tests/test_anatomy.py"]
SERIES = ["tests/test_series_composition.py", "tests/test_composition_oracle.py"]
SERIES_PEOPLE = ["tests/test_composition_people.py"]
REMEDIES = ["tests/test_series_remedies.py"]
SENSITIVE = ["tests/test_sensitive_models.py", "tests/test_thresholds.py"]
GAIN = ["tests/test_attribute_gain.py", "tests/test_thresholds.py", "tests/test_sensitive_models.py"]
CLUSTER = ["tests/test_cluster_release.py", "tests/test_thresholds.py"]
AUDIT_PROOFS = ["tests/audit/test_witness.py", "tests/audit/test_exchange.py", "tests/audit/test_properties.py"]
AUDIT_AFTER_DENIAL = ["tests/audit/test_after_denial.py"]
SERIAL_INCREMENTAL = ["tests/test_serial_incremental.py", "tests/test_serial_technique.py", "tests/test_thresholds.py"]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    tests: list[str]
    occurrence: int = 1  # which occurrence of `old` (it must occur at least this often)


MUTANTS = [
    # generalization's suppress (tasks/partition/suppression.py)
    Mutant(
        "suppression takes a group one row over its budget",
        "tasks/partition/suppression.py",
        "<= budget",
        "<= budget + 1",
        ["tests/test_suppress.py"],
    ),
    Mutant(
        "the suppression budget from the float below the share",
        "tasks/partition/suppression.py",
        "math.floor(Fraction(str(share)) * n)",
        "math.floor(share * n)",
        ["tests/test_suppress.py"],
    ),
    # direct identifiers (schemas/input.py, issue 39 item 2): a QI with more values than half the people
    Mutant(
        "identifier check lets a near-unique QI through",
        "schemas/input.py",
        "distinct > NEAR_UNIQUE_SHARE * people",
        "distinct > NEAR_UNIQUE_SHARE * people + 1",
        ["tests/test_near_unique.py", "tests/test_init.py"],
    ),
    # several rows per person (docs/models.md): the verifier's people per class
    Mutant(
        "k counts rows instead of people",
        "tasks/verify/published.py",
        "return np.bincount(pairs // width, minlength=n_classes), spread",
        "return np.bincount(ids, minlength=n_classes), spread",
        ["tests/test_many_rows.py", "tests/test_thresholds.py"],
    ),
    # re-identification risk (tasks/risk/__init__.py)
    Mutant(
        "records-at-risk counts records exactly at the threshold",
        "tasks/risk/__init__.py",
        "size[risk > threshold]",
        "size[risk >= threshold]",
        ["tests/test_risk.py"],
    ),
    Mutant(
        "a [risk] limit lets a figure 1% above it through",
        "tasks/risk/__init__.py",
        "figures[figure] > limit",
        "figures[figure] > limit * 1.01",
        ["tests/test_risk.py"],
    ),
    Mutant(
        "the highest prosecutor risk read from the largest class",
        "tasks/risk/__init__.py",
        "1.0 / size.min()",
        "1.0 / size.max()",
        ["tests/test_risk.py"],
    ),
    Mutant(
        "attribute risk of an ST counts a withheld value as a value",
        "tasks/risk/__init__.py",
        "shown = sensitive >= 0",
        "shown = sensitive >= -1",
        ["tests/test_risk_techniques.py", "tests/test_risk.py"],
    ),
    # risk against a population (tasks/risk/__init__.py, tasks/population_models.py)
    Mutant(
        "Dankar's rule leaves Pitman's model at a sampling fraction of exactly 0.1",
        "tasks/population_models.py",
        "n / population <= PITMAN_UP_TO",
        "n / population < PITMAN_UP_TO",
        ["tests/test_population_risk.py"],
    ),
    Mutant(
        "the highest journalist risk read from the largest class",
        "tasks/risk/__init__.py",
        '"journalist-risk-max": float(inverse[0])',
        '"journalist-risk-max": float(inverse[-1])',
        ["tests/test_population_risk.py"],
    ),
    Mutant(
        "a population as large as the input is refused",
        "tasks/risk/__init__.py",
        "self.population < records",
        "self.population <= records",
        ["tests/test_population_risk.py"],
    ),
    Mutant(
        "Zayatz's model takes a class just small enough to give one record as impossible",
        "tasks/population_models.py",
        "population - sizes >= n - 1",
        "population - sizes > n - 1",
        ["tests/test_population_risk.py"],
    ),
    # k-anonymity and distinct l-diversity (generalization)
    Mutant(
        "k-anonymity accepts a class of k - 1",
        "tasks/verify/k_anonymity.py",
        "reached >= k,",
        "reached >= k - 1,",
        GENERALIZED,
    ),
    Mutant(
        "k-anonymity refuses a class of exactly k",
        "tasks/verify/k_anonymity.py",
        "reached >= k,",
        "reached > k,",
        GENERALIZED,
    ),
    Mutant(
        "l-diversity accepts l - 1 values",
        "tasks/verify/k_anonymity.py",
        "reached >= l,",
        "reached >= l - 1,",
        GENERALIZED,
    ),
    # entropy and recursive (c, l)-diversity, t-closeness (tasks/core/sensitive_models.py)
    # the folder-of-parts verifier of the Dask path (tasks/verify/parted.py)
    Mutant(
        "parted k-anonymity accepts a class of k - 1",
        "tasks/verify/parted.py",
        "k is None or reached >= k,",
        "k is None or reached >= k - 1,",
        CLUSTER,
    ),
    Mutant(
        "parted l-diversity accepts l - 1 values",
        "tasks/verify/parted.py",
        "fewest >= l,",
        "fewest >= l - 1,",
        CLUSTER,
    ),
    Mutant(
        "entropy l-diversity accepts exp(H) >= l - 1",
        "tasks/core/sensitive_models.py",
        "h >= np.log(l) * (1 - ROUNDING)",
        "h >= np.log(l - 1) * (1 - ROUNDING)",
        SENSITIVE,
    ),
    Mutant(
        "entropy l-diversity rounding 1e-6 instead of 1e-12",
        "tasks/core/sensitive_models.py",
        "h >= np.log(l) * (1 - ROUNDING)",
        "h >= np.log(l) * (1 - 1e-6)",
        SENSITIVE,
    ),
    Mutant(
        "recursive (c, l)-diversity accepts r1 = c (r_l + ... + r_m)",
        "tasks/core/sensitive_models.py",
        "r1 < c * tail",
        "r1 <= c * tail",
        SENSITIVE,
    ),
    Mutant(
        "recursive (c, l)-diversity sorts counts ascending (as pycanon does)",
        "tasks/core/sensitive_models.py",
        "order = np.lexsort((-n, g))",
        "order = np.lexsort((n, g))",
        SENSITIVE,
    ),
    Mutant(
        "t-closeness accepts a distance of t + 1e-6",
        "tasks/core/sensitive_models.py",
        "distance <= t + ROUNDING",
        "distance <= t + 1e-6",
        SENSITIVE,
    ),
    Mutant(
        "t-closeness ordered distance divides by m instead of m - 1",
        "tasks/core/sensitive_models.py",
        "return (out + lead) / (m - 1)",
        "return (out + lead) / m",
        SENSITIVE,
    ),
    Mutant(
        "t-closeness equal distance forgets the values a class lacks",
        "tasks/core/sensitive_models.py",
        "weights=np.abs(p - q[v]) - q[v]",
        "weights=np.abs(p - q[v])",
        SENSITIVE,
    ),
    Mutant(
        "t-closeness hierarchical distance twice the tree's transport cost",
        "tasks/core/sensitive_models.py",
        "/ (2 * root_height)",
        "/ root_height",
        SENSITIVE,
    ),
    # attribute disclosure as the gain over the base rate (issue 39): beta-likeness and the risk step
    Mutant(
        "β gain: base rate taken from the group (beta-likeness in Mondrian and the verifier)",
        "tasks/core/sensitive_models.py",
        "held = counts.astype(np.int64)[v]",
        "held = n.astype(np.int64) * int(counts.sum()) // size",
        GAIN,
    ),
    Mutant(
        "β gain: base rate taken from the group (the risk step's attribute-gain-max)",
        "tasks/risk/__init__.py",
        "return self.holding * self.total - self.holders * self.size",
        "return self.holding * self.total - self.holding * self.total",
        GAIN,
    ),
    Mutant(
        "beta-likeness accepts a gain of 1.01 beta",
        "tasks/core/sensitive_models.py",
        "gain <= beta + ROUNDING * max(beta, 1.0)",
        "gain <= beta * 1.01 + ROUNDING * max(beta, 1.0)",
        GAIN,
    ),
    Mutant(
        "[risk] max_gain compared with the difference, not the gain",
        "tasks/risk/__init__.py",
        '"max_gain": "attribute-gain-max",',
        '"max_gain": "attribute-difference-max",',
        GAIN,
    ),
    # MuCo
    Mutant(
        "delta-probability accepts ratios up to 1.5 delta (issue 18)",
        "tasks/techniques/muco/delta_probability.py",
        "float(delta) * stats.sum",
        "1.5 * float(delta) * stats.sum",
        MUCO,
    ),
    Mutant(
        "delta-probability tolerance 1e-6 instead of 1e-9",
        "tasks/techniques/muco/delta_probability.py",
        "TOL = 1e-9",
        "TOL = 1e-6",
        MUCO,
    ),
    Mutant(
        "cover asks ceil(1/delta) - 1 tuples (issue 18)",
        "tasks/techniques/muco/delta_probability.py",
        "need = math.ceil(1 / Fraction(delta))",
        "need = math.ceil(1 / Fraction(delta)) - 1",
        MUCO,
    ),
    Mutant(
        "cover verdict accepts ceil(1/delta) - 1 (reported threshold unchanged)",
        "tasks/techniques/muco/delta_probability.py",
        "worst_n >= need",
        "worst_n >= need - 1",
        MUCO,
    ),
    Mutant(
        "cover refuses exactly ceil(1/delta) tuples",
        "tasks/techniques/muco/delta_probability.py",
        "worst_n >= need",
        "worst_n > need",
        MUCO,
    ),
    Mutant(
        "Definition 1 ignores a tuple missing on one QI",
        "tasks/techniques/muco/delta_probability.py",
        "if len(present) < len(rows):",
        "if False:",
        MUCO,
    ),
    Mutant(
        "Definition 1 accepts row sums off by 0.1",
        "tasks/techniques/muco/delta_probability.py",
        "passed=(err <= 1e-6)",
        "passed=(err <= 1e-1)",
        MUCO,
    ),
    Mutant(
        "Definition 1 accepts a negative entry",
        "tasks/techniques/muco/delta_probability.py",
        "(err <= 1e-6) and not neg",
        "(err <= 1e-6)",
        MUCO,
    ),
    # Ambiguity and PriView
    Mutant(
        "Ambiguity alpha-presence checked against 1.5 alpha",
        "tasks/techniques/ambiguity/presence.py",
        "worst_and_check(num, den, alpha)",
        "worst_and_check(num, den, alpha * 3 / 2)",
        PRESENCE,
    ),
    Mutant(
        "PriView alpha-presence checked against 1.5 alpha",
        "tasks/techniques/ambiguity/presence.py",
        "worst_and_check(num, den, alpha)",
        "worst_and_check(num, den, alpha * 3 / 2)",
        PRESENCE,
        occurrence=2,
    ),
    Mutant(
        "Ambiguity beta-association checked against 1.5 beta",
        "tasks/techniques/ambiguity/association.py",
        "worst_and_check(num, den, beta)",
        "worst_and_check(num, den, beta * 3 / 2)",
        PRESENCE,
    ),
    Mutant(
        "PriView beta-association checked against 1.5 beta",
        "tasks/techniques/ambiguity/association.py",
        "worst_and_check(num, den, beta)",
        "worst_and_check(num, den, beta * 3 / 2)",
        PRESENCE,
        occurrence=2,
    ),
    Mutant(
        "presence / association comparison loosened by one unit",
        "tasks/techniques/ambiguity/presence.py",
        "num * threshold.denominator > threshold.numerator * den",
        "num * threshold.denominator > threshold.numerator * den + 1",
        PRESENCE,
    ),
    # Anatomy
    Mutant(
        "Ambiguity presence takes a repeated AT row for another person",
        "tasks/techniques/ambiguity/presence.py",
        "broken = (den == 0) | (num > den) | g.repeats",
        "broken = (den == 0) | (num > den)",
        PRESENCE,
    ),
    Mutant(
        "PriView presence scores a group too large to count as safe",
        "tasks/techniques/ambiguity/presence.py",
        "p = Fraction(1)  # too large to count",
        "p = Fraction(0)  # too large to count",
        PRESENCE,
    ),
    Mutant(
        "Anatomy l-diversity accepts l - 1 values",
        "tasks/techniques/anatomy/technique.py",
        "fewest >= l",
        "fewest >= l - 1",
        ANATOMY,
    ),
    Mutant(
        "Anatomy size check: one agreeing chunk is enough",
        "tasks/techniques/anatomy/technique.py",
        'all(f["consistent"] for f in figures)',
        'any(f["consistent"] for f in figures)',
        ANATOMY,
    ),
    Mutant(
        "Anatomy disclosure bound 1/(l - 1)",
        "tasks/techniques/anatomy/technique.py",
        "worst_frac <= Fraction(1, l)",
        "worst_frac <= Fraction(1, l - 1)",
        ANATOMY,
    ),
    Mutant(
        "Anatomy counts rows instead of people",
        "tasks/techniques/anatomy/technique.py",
        "gids, counts = np.unique(np.unique(chunk.gid * width + chunk.person) // width, return_counts=True)",
        "gids, counts = np.unique(chunk.gid, return_counts=True)",
        ANATOMY_PEOPLE,
    ),
    # Butterfly
    Mutant(
        "Butterfly per-QID k checked as k - 1",
        "tasks/techniques/butterfly/multi_qid.py",
        "checks.thresholds.append(k)",
        "checks.thresholds.append(k - 1)",
        BUTTERFLY,
    ),
    Mutant(
        "Butterfly k-anonymity accepts a class of k - 1",
        "tasks/verify/class_chunks.py",
        "reached >= k,",
        "reached >= k - 1,",
        BUTTERFLY,
    ),
    Mutant(
        "Butterfly class sizes: the largest chunk's part, not the sum",
        "tasks/verify/class_chunks.py",
        "np.add.at(size, ids",
        "np.maximum.at(size, ids",
        BUTTERFLY,
    ),
    Mutant(
        "Butterfly checks every QID but the last",
        "tasks/techniques/butterfly/multi_qid.py",
        "enumerate(qids, start=1)",
        "enumerate(qids[:-1], start=1)",
        BUTTERFLY,
    ),
    Mutant(
        "two-level union QID checked as k' - 1",
        "tasks/techniques/butterfly/multi_qid.py",
        "checks.thresholds.append(k_prime)",
        "checks.thresholds.append(k_prime - 1)",
        BUTTERFLY,
    ),
    # serial publishing
    Mutant(
        "serial global guarantee p <= 1/(l - 1)",
        "tasks/techniques/serial/guarantee.py",
        "np.asarray(l * q >= (l - 1) * d, dtype=bool)",
        "np.asarray((l - 1) * q >= (l - 2) * d, dtype=bool)",
        SERIAL,
    ),
    Mutant(
        "serial global guarantee refuses p = 1/l",
        "tasks/techniques/serial/guarantee.py",
        "np.asarray(l * q >= (l - 1) * d, dtype=bool)",
        "np.asarray(l * q > (l - 1) * d, dtype=bool)",
        SERIAL,
    ),
    Mutant(
        "serial global verdict tolerates one breaching pair",
        "tasks/techniques/serial/guarantee.py",
        'summary["breaching"] == 0',
        'summary["breaching"] <= 1',
        SERIAL,
    ),
    # the serial check in O(release) (tasks/techniques/serial/guarantee.py advance_summary)
    Mutant(
        "incremental serial summary keeps its first worst pair",
        "tasks/techniques/serial/guarantee.py",
        "if old_p is None or p > old_p or (p == old_p and _record_order(new) < _record_order(worst)):",
        "if old_p is None:",
        SERIAL_INCREMENTAL,
    ),
    Mutant(
        "incremental serial summary forgets earlier breaching pairs",
        "tasks/techniques/serial/guarantee.py",
        '"breaching": int(prior["breaching"]) + int((~new_ok & old_ok).sum()),',
        '"breaching": int((~new_ok & old_ok).sum()),',
        SERIAL_INCREMENTAL,
    ),
    Mutant(
        "serial localized guarantee n(s)/|G| <= 1/(l - 1)",
        "tasks/techniques/serial/groups.py",
        "loc_ok = l * cnt <= size_of[gv_gid]",
        "loc_ok = (l - 1) * cnt <= size_of[gv_gid]",
        SERIAL,
    ),
    # the online auditor
    Mutant(
        "auditor consults the secret when floor(Delta) = l - 1",
        "tasks/audit/decide.py",
        "floor is None or floor >= l",
        "floor is None or floor >= l - 1",
        AUDIT,
    ),
    Mutant(
        "auditor answers when someone keeps l - 1 values",
        "tasks/audit/decide.py",
        "if min(len(s) for s in values_after) >= l:",
        "if min(len(s) for s in values_after) >= l - 1:",
        AUDIT,
    ),
    # (not a mutant: `distinct_count(m) < l` -> `< l - 1` in classify is equivalent, because an
    # answer with fewer than l distinct values leaves its own people fewer than l values, which
    # the next test finds; see docs/testing.md)
    Mutant(
        "auditor misses groups an answer narrows to l - 1 values",
        "tasks/audit/decide.py",
        "prog.can_be_narrow(work, c, l - 1)",
        "prog.can_be_narrow(work, c, l - 2)",
        AUDIT,
    ),
    # the auditor's proofs that spare it a listing (route 4: witness.py; exchanges: exchange.py)
    Mutant(
        "route 4 takes a cell covering l - 1 values across Delta as safe",
        "tasks/audit/witness.py",
        "short = covered.sum(axis=1) < need",
        "short = covered.sum(axis=1) < need - 1",
        AUDIT_PROOFS,
    ),
    Mutant(
        "an exchange proof takes a value a cell may lack as always held",
        "tasks/audit/exchange.py",
        "if b != a and bounds.lower(c, [b]) >= 1]",
        "if b != a and bounds.lower(c, [b]) >= 0]",
        AUDIT_PROOFS,
    ),
    Mutant(
        "auditor's Delta = G shortcut needs groups of l - 1",
        "tasks/audit/decide.py",
        "(prog.sizes < l)",
        "(prog.sizes < l - 1)",
        AUDIT,
    ),
    # the auditor's policy after a positive denial (issue 31: after_denial.py)
    Mutant(
        "after_denial list reads a route-4 query whose Delta took one unit over the allowance",
        "tasks/audit/auditor.py",
        "allowance = self.new_work()",
        "allowance = Work(None if self.budget is None else self.budget + 1)",
        AUDIT_AFTER_DENIAL,
    ),
    Mutant(
        "after_denial list reads unlisted when floor(Delta) = l",
        "tasks/audit/after_denial.py",
        'return policy == "list" and report.implicit and report.is_safe_query(l)',
        'return policy == "list" and report.implicit and report.is_safe_query(l + 1)',
        AUDIT_AFTER_DENIAL,
    ),
    # the auditor's nested path (issue 31): closed form over a tree of facts
    Mutant(
        "nested path forgets B's people when B is one person",
        "tasks/audit/nested.py",
        "if s.pool is not None and s.b > 0:  # B's people hold < l values",
        "if s.pool is not None and s.b > 1:  # B's people hold < l values",
        AUDIT_NESTED,
    ),
    Mutant(
        "nested path lets people outside the split keep l - 1 values",
        "tasks/audit/nested.py",
        "if (s.support[others].sum(axis=1) < l).any():",
        "if (s.support[others].sum(axis=1) < l - 1).any():",
        AUDIT_NESTED,
    ),
    # the auditor's public query grid (issue 31)
    Mutant(
        "audit grid accepts cells of min_cell - 1 people",
        "tasks/audit/grid.py",
        "if sizes.min() >= min_cell:",
        "if sizes.min() >= min_cell - 1:",
        AUDIT_GRID,
    ),
    Mutant(
        "audit grid reads an order into a categorical QI's comparisons",
        "tasks/audit/snap.py",
        'if grid.kind(column) == "categorical" or any(math.isnan(k) for k in keys):',
        "if any(math.isnan(k) for k in keys):",
        AUDIT_GRID,
    ),
    Mutant(
        "audit predicate reads an ordinal '<' as '<=' in the declared order",
        "tasks/audit/query.py",
        "exp.LT: lambda ranks, r: ranks < r,",
        "exp.LT: lambda ranks, r: ranks <= r,",
        AUDIT_GRID,
    ),
    Mutant(
        "audit snap drops a band holding one whole number of the query (not outward)",
        "tasks/audit/snap.py",
        "np.maximum(first, cond.lo) <= np.minimum(last, cond.hi)",
        "np.maximum(first, cond.lo) < np.minimum(last, cond.hi)",
        AUDIT_GRID,
    ),
    Mutant(
        "audit snap drops a band starting at a closed upper end (not outward)",
        "tasks/audit/snap.py",
        "upper_ok = (low < cond.hi) if cond.hi_open else (low <= cond.hi)",
        "upper_ok = low < cond.hi",
        AUDIT_GRID,
    ),
    # the series composition check (issue 17)
    Mutant(
        "composition accepts l - 1 candidate values",
        "tasks/compose/check.py",
        "(fig < self.threshold)",
        "(fig < self.threshold - 1)",
        SERIES,
    ),
    Mutant(
        "composition forgets earlier transient groups",
        "tasks/compose/algebra.py",
        "np.minimum(prior.min_t[prev], t_here)",
        "t_here",
        SERIES,
    ),
    Mutant(
        "composition keeps a value the new group lacks",
        "tasks/compose/algebra.py",
        "held = here > 0",
        "held = here >= 0",
        SERIES,
    ),
    Mutant(
        "composition counts records of the newest group only",
        "tasks/compose/algebra.py",
        "np.minimum(prior.minc[p2], here)",
        "here",
        SERIES,
    ),
    Mutant(
        "composition input check lets a value change when one side is transient",
        "tasks/compose/check.py",
        "result: np.ndarray = changed & ~(transient[codes] & was_transient)",
        "result: np.ndarray = changed & ~(transient[codes] | was_transient)",
        SERIES,
    ),
    # changing a series' settings (issue 29, item 5: tasks/compose/change.py)
    Mutant(
        "series change accepts l - 1 candidate values",
        "tasks/compose/change.py",
        "below = checked & (fig < threshold)",
        "below = checked & (fig < threshold - 1)",
        REMEDIES,
    ),
    Mutant(
        "composition takes PriView's whole groups, not the units of the person's QI'",
        "tasks/techniques/ambiguity/priview.py",
        "        return group, len(pairs)",
        "        return part.group, part.n_groups",
        ["tests/test_composition_oracle.py"],
    ),
    Mutant(
        "composition takes Butterfly's whole units, not each QID's classes",
        "tasks/techniques/butterfly/technique.py",
        "key = unit * (int(wing.max(initial=0)) + 1) + wing[row_point] if attrs else unit",
        "key = unit",
        ["tests/test_composition_oracle.py", "tests/test_butterfly.py"],
    ),
    Mutant(
        "series change checks only people beyond the second release",
        "tasks/compose/change.py",
        "latest[stored_people] > first,",
        "latest[stored_people] > first + 1,",
        REMEDIES,
    ),
    Mutant(
        "series change lets a value change when one side is transient",
        "tasks/compose/change.py",
        "(list_contains($t, vkey) AND list_contains($t, before))",
        "(list_contains($t, vkey) OR list_contains($t, before))",
        REMEDIES,
    ),
    Mutant(
        "a commit takes summaries rebuilt while it was computed",
        "tasks/compose/summaries.py",
        "if now is None or now[0] != read_next_set:",
        "if now is None:",
        REMEDIES,
    ),
    Mutant(
        "explore passes a setting the pipeline refuses",
        "flows/explore.py",
        "        not reasons,",
        "        True,",
        ["tests/test_explore.py"],
    ),
    Mutant(
        "shares of the input divide by the rows kept, not the rows read",
        "tasks/report/figures.py",
        'return int(rows_in) + int(utility.get("dropped-rows") or 0)',
        "return int(rows_in)",
        ["tests/test_report.py"],
    ),
    Mutant(
        "the series check composes an @row release (row i taken for one person)",
        "tasks/compose/check.py",
        "self.row_ids = spec.dataset.person_id == ROW_ID",
        "self.row_ids = False",
        ["tests/test_explore.py"],
    ),
    Mutant(
        "published list check: an item outside the QI's domain passes",
        "schemas/published.py",
        "return outside if outside.any() else None",
        "return None",
        ["tests/test_published_schema.py"],
    ),
    Mutant(
        "published list check: coded items pass without their values looked up",
        "schemas/published.py",
        "if items.null_count == 0 and known.all():",
        "if items.null_count == 0:",
        ["tests/test_fast_paths.py"],
    ),
    Mutant(
        "published list check: an empty list passes",
        "schemas/published.py",
        "ok = np.diff(np.asarray(cells.offsets)) > 0",
        "ok = np.diff(np.asarray(cells.offsets)) >= 0",
        ["tests/test_published_schema.py"],
    ),
    Mutant(
        "published date range: low end after high end",
        "schemas/published.py",
        "df[lo] <= df[hi]",  # the first: the date branch
        "df[lo] <= df[lo]",
        ["tests/test_spec_language.py"],
    ),
    Mutant(
        "input: a cell that is not a date",
        "schemas/input.py",
        "parse_dates(s).notna()",
        "parse_dates(s).notna() | True",
        ["tests/test_spec_language.py"],
    ),
    Mutant(
        "input: a masked code holding the mask character",
        "schemas/input.py",
        ".str.contains(MASK_CHAR, regex=False).fillna(False)",
        ".str.contains(MASK_CHAR, regex=False).fillna(False) | True",
        ["tests/test_spec_language.py"],
    ),
    Mutant(
        "input: a number outside an ordinal's order of numbers",
        "schemas/input.py",
        "np.isin(_as_numbers(s).to_numpy(), allowed)",
        "np.isin(_as_numbers(s).to_numpy(), allowed) | True",
        ["tests/test_spec_language.py"],
    ),
    Mutant(
        "pseudonyms: a state whose key file is missing is refused",
        "state/store.py",
        "                raise missing_key(self.path, path)",
        "                pass",
        ["tests/test_pseudonyms.py"],
    ),
    Mutant(
        "pseudonyms: a state given another key is refused",
        "state/store.py",
        "if recorded is not None and recorded != found.check:",
        "if recorded is not None and recorded != found.check and False:",
        ["tests/test_pseudonyms.py"],
    ),
    Mutant(
        "pseudonyms: migration 9 rewrites the composition summaries' ids",
        "state/pseudonyms.py",
        'pseudonymise_column(con, "compose_people", "person", key)',
        "pass",
        ["tests/test_pseudonyms.py"],
    ),
    # the series composition under rows_per_person = "many" (tasks/compose)
    Mutant(
        "series composition counts (person, value) pairs as people",
        "tasks/compose/check.py",
        '"people": int(self.by_person(published).sum()),',
        '"people": int(published.sum()),',
        SERIES_PEOPLE,
    ),
    Mutant(
        "series k figure ignores a group's excess (pairs counted as people)",
        "tasks/compose/algebra.py",
        "tc_here = tc_here - e_here",
        "tc_here = tc_here - 0 * e_here",
        SERIES_PEOPLE,
    ),
    # the README's promises (issue 46): each named by its tests ("Promise: <id>", tests/promises.py)
    Mutant(
        "repeat protection compares the input with the series' oldest release",
        "state/store.py",
        "WHERE series = ? ORDER BY sequence DESC LIMIT 1",
        "WHERE series = ? ORDER BY sequence ASC LIMIT 1",
        ["tests/test_promise_repeat.py"],
    ),
    Mutant(
        "explore --optimize chooses a setting a privacy check or [risk] limit refuses",
        "flows/optimize.py",
        "if r.passed and u is not None:",
        "if u is not None:",
        ["tests/test_explore_optimize.py"],
    ),
    Mutant(
        "explore writes the pseudonym key on a fresh state",
        "flows/explore.py",
        "Store(first.state_path, makes_key=False)",
        "Store(first.state_path)",
        ["tests/test_promise_explore.py"],
    ),
    Mutant(
        "file fingerprints hash only the first MiB",
        "state/store.py",
        "            h.update(chunk)\n",
        "            h.update(chunk)\n            break\n",
        ["tests/test_promise_fingerprint.py"],
    ),
    Mutant(
        "serial leaves the least frequent value out of its transient share",
        "tasks/techniques/serial/technique.py",
        'np.argsort(freq, kind="stable")[:take]',
        'np.argsort(freq, kind="stable")[1 : take + 1]',
        ["tests/test_promise_transient.py"],
    ),
    Mutant(
        "the serial guarantee's worst case carries the person's pseudonym into the figures",
        "tasks/techniques/serial/guarantee.py",
        '"links": w["links"], "p": str(p)}',
        '"links": w["links"], "p": str(p), "person": w["person"]}',
        ["tests/test_promise_leaks.py"],
    ),
    # dp-synthetic (issue 45): the measurement's noise scaled down, the recorded sigma unchanged
    Mutant(
        "dp-synthetic measures with half the recorded noise",
        "tasks/techniques/dp_synthetic/mst.py",
        "rng.normal(0.0, sigma, counts.shape)",
        "rng.normal(0.0, sigma * 0.5, counts.shape)",
        ["tests/test_dp_synthetic.py"],
    ),
    # the quality models' KL divergence (issue 43): the search's runs are matched on the columns
    # before the one where they stopped, and on that column's interval only (not its set)
    Mutant(
        "the KL search takes a stopped run's set cell as its whole interval",
        "tasks/evaluate/quality.py",
        "for j in range(i, len(dims)):",
        "for j in range(i + 1, len(dims)):",
        ["tests/test_quality_kl_search.py", "tests/test_quality_models.py"],
    ),
    Mutant(
        "the release stores a seed other than the one it used",
        "flows/pipeline.py",
        "        seed=run.seed,\n",
        "        seed=run.seed + 1,\n",
        ["tests/test_promise_seed.py"],
    ),
]


def copy_tree(dest: Path) -> None:
    """The files git knows (tracked and untracked, not ignored): no venv, no caches."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def replace(text: str, old: str, new: str, occurrence: int) -> str:
    starts = [m.start() for m in re.finditer(re.escape(old), text)]
    if len(starts) < occurrence:
        raise SystemExit(f"mutant text {old!r} occurs {len(starts)} time(s), not {occurrence}")
    at = starts[occurrence - 1]
    return text[:at] + new + text[at + len(old) :]


def python_path(tree: Path) -> str:
    """The copy's privpub (a tree of links, before the editable install's hook) and its tests."""
    return f"{link_tree(tree, tree / '.import-root')}{os.pathsep}{tree}"


def run_tests(tree: Path, tests: list[str], every: bool = False, slow: bool = False) -> tuple[bool, list[str], float]:
    """(all passed, the failing tests: the first only unless `every`, seconds)."""
    env = {**os.environ, "PYTHONPATH": python_path(tree)}
    marks = [] if slow else ["-m", "not slow"]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *([] if every else ["-x"]),
            *marks,
            "-q",
            "-rfE",
            "--hypothesis-seed=0",
            *tests,
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    # a test that errs (a fixture's setup) counts as failing: it did not show the check holds
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", proc.stdout, flags=re.M)
    if proc.returncode != 0 and not failed:
        failed = [f"pytest exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-300:]}"]
    return proc.returncode == 0, failed, time.perf_counter() - t0


def test_functions(failed: list[str]) -> list[str]:
    """The distinct test functions among failing test ids (parametrized cases of one count once)."""
    return list(dict.fromkeys(f.split("[")[0] for f in failed))


def killed_by(test_file: str, failed: list[str], every: bool) -> str:
    """'file (first failing test)', with --every 'file (N tests in M functions: f1, f2, ...)'."""
    names = [f.split("::")[-1] for f in failed] or ["pytest failed"]
    if not every:
        return f"{Path(test_file).name} ({names[0]})"
    functions = [f.split("::")[-1] for f in test_functions(failed)] or ["pytest failed"]
    return (
        f"{Path(test_file).name} ({len(names)} test{'s' if len(names) > 1 else ''}"
        f" in {len(functions)} function{'s' if len(functions) > 1 else ''}: {', '.join(functions)})"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--only", action="append", help="run the mutants whose name contains this text (repeatable: any of them)"
    )
    ap.add_argument("--slow", action="store_true", help="also run the full-size sweeps (marker slow, make test-slow)")
    ap.add_argument("--markdown", type=Path, help="also write the result table to this file")
    ap.add_argument("--from", dest="start", help="start at the first mutant whose name contains this text")
    ap.add_argument(
        "--every", action="store_true", help="run each guarding file to its end and count every test that kills"
    )
    args = ap.parse_args()
    mutants = [m for m in MUTANTS if not args.only or any(o.lower() in m.name.lower() for o in args.only)]
    if args.start:  # the rest of a run that was stopped
        first = next((i for i, m in enumerate(mutants) if args.start.lower() in m.name.lower()), None)
        if first is None:
            raise SystemExit(f"no mutant name contains {args.start!r}")
        mutants = mutants[first:]
    with tempfile.TemporaryDirectory(prefix="privpub-mutants-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        where = subprocess.run(
            [sys.executable, "-c", "import privpub.tasks.core.technique as m; print(m.__file__)"],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": python_path(tree)},
            capture_output=True,
            text=True,
        )
        if not where.stdout.startswith(str(tree)):
            raise SystemExit(f"the copy is not what gets imported: {where.stdout or where.stderr}")
        baseline = sorted({t for m in mutants for t in m.tests})
        ok, failed, secs = run_tests(tree, baseline, slow=args.slow)
        if not ok:
            raise SystemExit(f"the unmutated tests fail ({failed[0]}); fix that first")
        print(f"baseline: {len(baseline)} test files pass ({secs:.0f} s)", flush=True)
        rows = []
        for m in mutants:
            target = tree / m.path
            original = target.read_text()
            target.write_text(replace(original, m.old, m.new, m.occurrence))
            try:  # each guarding file alone, to show which of them notice
                kills = {t: run_tests(tree, [t], args.every, args.slow) for t in m.tests}
            finally:
                target.write_text(original)
            killers = [killed_by(t, failed, args.every) for t, (ok, failed, _) in kills.items() if not ok]
            verdict = "killed" if killers else "SURVIVED"
            functions = [f for _, (_, failed, _) in kills.items() for f in test_functions(failed)]
            rows.append((m, verdict, killers, len(functions)))
            secs = sum(s for _, _, s in kills.values())
            print(f"{verdict:8} {secs:5.0f} s  {m.name}  [{'; '.join(killers) or 'every test passed'}]", flush=True)
    table = ["| mutant | file | change | result | failing test files (first failing test) |", "|---|---|---|---|---|"]
    for m, verdict, killers, _ in rows:
        cells = [m.name, f"`{m.path}`", f"`{m.old}` → `{m.new}`", verdict, "; ".join(killers)]
        table.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    if args.markdown:
        args.markdown.write_text("\n".join(table) + "\n")
    survived = [m.name for m, verdict, _, _ in rows if verdict == "SURVIVED"]
    print(
        f"{len(rows) - len(survived)} of {len(rows)} mutants killed" + (f"; survived: {survived}" if survived else "")
    )
    if args.every:  # issue 25: at least two independent tests (distinct test functions) per mutant
        lone = [m.name for m, verdict, _, n in rows if verdict == "killed" and n < 2]
        print(
            f"{len(rows) - len(survived) - len(lone)} of {len(rows)} killed by two or more test functions"
            + (f"; by one only: {lone}" if lone else "")
        )
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
