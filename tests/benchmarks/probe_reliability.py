"""The reliability probe (issue 25), on demand: bad inputs, bad specs, bad uses of the other
commands, hostile auditor predicates and kills at random moments, each as a fresh `privpub`
process with no Prefect server, then one table: cases tried / refused cleanly / tracebacks /
wrongly published / leaks / unlogged.

    .venv/bin/python -m tests.benchmarks.probe_reliability [--kills 10] [--markdown FILE]

Refused cleanly: exit 1 and exactly one line, `privpub: error: ...`. A traceback: `Traceback` or
a `File "...` frame anywhere in the output. Wrongly published: exit 0, or a release folder
appeared, for a case that must be refused. A leak: a planted person id or planted cell in the
output, the audit log or a release folder. Unlogged: a publish attempt with no new audit row.
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from tests.helpers import census_spec_toml
from tests.test_hardening import CASES as INPUT_CASES
from tests.test_hardening import SECRET, good_frame

ROOT = Path(__file__).resolve().parents[2]
PRIVPUB = [sys.executable, "-m", "privpub.flows.cli"]


@dataclass
class Outcome:
    kind: str
    case: str
    clean: bool
    traceback: bool
    published: bool
    leak: bool
    unlogged: bool
    internal: bool = False  # "internal error" in the output: a failure privpub did not foresee
    duplicates: bool = False  # one attempt with more than one row in the trail
    tamper_missed: bool = False  # an edit of the history or a release that verify did not name


def _env(folder: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PYTHONPATH=str(ROOT), PRIVPUB_HOME=str(folder / "no-service"), PREFECT_HOME=str(folder / "prefect"))
    env["PRIVPUB_LOCK_WAIT"] = "3"
    return env


def cli(folder: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*PRIVPUB, *args], cwd=folder, env=_env(folder), capture_output=True, text=True, timeout=timeout
    )


def audit_rows(folder: Path) -> list[tuple]:
    state = folder / "privpub.duckdb"
    try:
        with duckdb.connect(str(state), read_only=True) as con:
            return con.execute("SELECT * FROM audit_log").fetchall()
    except duckdb.Error:
        return []


def release_dirs(folder: Path) -> set[str]:
    out = folder / "releases"
    return {p.name for p in out.iterdir() if not p.name.startswith(".")} if out.is_dir() else set()


def needles(frame: pd.DataFrame | None) -> list[str]:
    planted = [SECRET]
    if frame is not None:
        planted += list(frame.pid.astype(str))
    return planted


def judge(kind: str, case: str, folder: Path, done, before_rows: int, before_dirs: set, planted, publish: bool):
    text = done.stdout + done.stderr
    # one error line; a warning line beside it is allowed (an attempt that went to the journal)
    lines = [line for line in done.stderr.splitlines() if line.strip() and "warning:" not in line]
    clean = done.returncode == 1 and len(lines) == 1 and lines[0].startswith("privpub: error:") and not done.stdout
    trace = "Traceback" in text or 'File "' in text
    published = done.returncode == 0 or bool(release_dirs(folder) - before_dirs)
    logged = audit_rows(folder)
    hay = text + "\n".join(map(str, logged))
    for path in (folder / "releases").rglob("*") if (folder / "releases").is_dir() else []:
        if path.is_file():
            hay += path.read_bytes().decode("latin-1")
    leak = any(n in hay for n in planted)
    journal = folder / "privpub.duckdb.journal"
    unlogged = publish and len(logged) <= before_rows and not journal.is_file()
    return Outcome(kind, case, clean, trace, published, leak, unlogged, internal="internal error" in text)


def probe_input_cases(root: Path) -> list[Outcome]:
    out = []
    for name, mutate, _ in INPUT_CASES:
        folder = root / f"in-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        frame = good_frame()
        spec = mutate(folder, frame)
        rows, dirs = len(audit_rows(folder)), release_dirs(folder)
        done = cli(folder, "publish", str(spec), "--quiet")
        out.append(judge("input", name, folder, done, rows, dirs, needles(frame), publish=True))
    return out


def _csv_lines(folder: Path, frame: pd.DataFrame) -> list[str]:
    return frame.to_csv(index=False).splitlines()


EXTRA_INPUTS: list[tuple[str, Callable[[Path, pd.DataFrame], None]]] = [
    ("a repeated header name", lambda f, fr: (f / "census.csv").write_text(
        "\n".join([_csv_lines(f, fr)[0] + ",age"] + [x + ",1" for x in _csv_lines(f, fr)[1:]]) + "\n")),
    ("a short row", lambda f, fr: (f / "census.csv").write_text(
        "\n".join(ls[:9] + [ls[9].rsplit(",", 1)[0]] + ls[10:]) + "\n") if (ls := _csv_lines(f, fr)) else None),
    ("a NUL byte in a value", lambda f, fr: (f / "census.csv").write_text(
        "\n".join(ls[:5] + [ls[5][:3] + "\0" + ls[5][3:]] + ls[6:]) + "\n") if (ls := _csv_lines(f, fr)) else None),
    ("a Parquet file named .csv", lambda f, fr: fr.to_parquet(f / "census.csv")),
]  # fmt: skip


def probe_extra_inputs(root: Path) -> list[Outcome]:
    out = []
    for name, write in EXTRA_INPUTS:
        folder = root / f"in-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        frame = good_frame()
        write(folder, frame)
        (folder / "spec.toml").write_text(census_spec_toml(seed=None))
        done = cli(folder, "publish", "spec.toml", "--quiet")
        out.append(judge("input", name, folder, done, 0, set(), needles(frame), publish=True))
    return out


# spec lines: (case, text replaced, replacement) on the census spec (k = 5, l = 3, seed line)
SPEC_EDITS = [
    ("k as a string", "k = 5", 'k = "5"'),
    ("k as a float", "k = 5", "k = 5.0"),
    ("k as a bool", "k = 5", "k = true"),
    ("k negative", "k = 5", "k = -1"),
    ("k = 0", "k = 5", "k = 0"),
    ("k = nan", "k = 5", "k = nan"),
    ("l as a string", "l = 3", 'l = "3"'),
    ("l = inf", "l = 3", "l = inf"),
    ("a seed of 2^64", "seed = 11", "seed = 18446744073709551616"),
    ("a negative seed", "seed = 11", "seed = -1"),
    ("a seed as a string", "seed = 11", 'seed = "42"'),
    ("an unknown technique key", "k = 5", "k = 5\nkk = 2"),
    ("an unknown dataset key", 'name = "census"', 'name = "census"\nnmae = "x"'),
    ("an unknown output key", 'dir = "releases"', 'dir = "releases"\ndri = "x"'),
    ("an unknown top-level key", "[dataset]", 'base_dir = "/tmp"\n[dataset]'),
    ("an unknown section", "[dataset]", "[datasett]\nx = 1\n[dataset]"),
    ("an unknown technique", 'name = "generalization"', 'name = "generalisation"'),
    ("a QI of an unknown kind", 'kind = "numeric"', 'kind = "number"'),
    ("a QI column that is missing", '{ name = "age"', '{ name = "agee"'),
    ("the sensitive column missing", 'sensitive = "occupation"', 'sensitive = "ocupation"'),
    ("the person id missing", 'person_id = "pid"', 'person_id = "id"'),
    ("a workload seed as text", "[output]", '[evaluate]\nworkload_seed = "x"\n[output]'),
    ("a negative workload seed", "[output]", "[evaluate]\nworkload_seed = -1\n[output]"),
    ("workers as a string", "[output]", '[run]\nworkers = "2"\n[output]'),
    ("chunk_rows as a float", "[output]", "[run]\nchunk_rows = 1000.0\n[output]"),
    ("allow_spill as text", "[output]", '[run]\nallow_spill = "yes"\n[output]'),
    ("an unknown task runner", "[output]", '[run]\ntask_runner = "ray"\n[output]'),
    ("composition misspelled", "[output]", '[series]\ncompositon = "warn"\n[output]'),
    ("a [risk] limit above 1", "[output]", "[risk]\nmax_prosecutor = 2.0\n[output]"),
    ("a population below the rows", "[output]", "[risk]\npopulation = 3\n[output]"),
    ("a sample fraction of 0", "[output]", "[risk]\nsample_fraction = 0.0\n[output]"),
    ("a hierarchy cycle", '{ name = "race", kind = "categorical" }',
     '{ name = "race", kind = "categorical", hierarchy = { A = ["B"], B = ["A"] } }'),
    ("a leaf with two parents", '{ name = "race", kind = "categorical" }',
     '{ name = "race", kind = "categorical", hierarchy = { "*" = ["A", "B"], A = ["race-1"], B = ["race-1"] } }'),
    ("an order missing a value", '{ name = "sex", kind = "categorical" }',
     '{ name = "sex", kind = "ordinal", order = ["F"] }'),
    ("a TOML syntax error", "[dataset]", "[dataset"),
]  # fmt: skip


def probe_spec_cases(root: Path) -> list[Outcome]:
    out = []
    base = census_spec_toml(seed=11)
    for name, old, new in SPEC_EDITS:
        assert old in base, name
        folder = root / f"spec-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        frame = good_frame()
        frame.to_csv(folder / "census.csv", index=False)
        (folder / "spec.toml").write_text(base.replace(old, new, 1))
        done = cli(folder, "publish", "spec.toml", "--quiet")
        out.append(judge("spec", name, folder, done, 0, set(), needles(frame), publish=True))
    # serial: spec failures are attempts too
    for name, edit in (("serial l = 0", ("l = 3", "l = 0")), ("serial min above max", ("l = 3", "l = 3"))):
        folder = root / f"serial-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        frame = good_frame()
        frame.to_csv(folder / "census.csv", index=False)
        text = census_spec_toml(seed=11, technique="serial", k=None).replace(*edit)
        if "min above max" in name:
            text = text.replace("l = 3", "l = 3\nmin_group_size = 10\nmax_group_size = 3")
        (folder / "spec.toml").write_text(text)
        done = cli(folder, "serial", "spec.toml", "--quiet")
        out.append(judge("spec", name, folder, done, 0, set(), needles(frame), publish=True))
    folder = root / "serial-generalization"
    folder.mkdir()
    frame = good_frame()
    frame.to_csv(folder / "census.csv", index=False)
    (folder / "spec.toml").write_text(base)
    out.append(
        judge(
            "spec",
            "privpub serial with a generalization spec",
            folder,
            cli(folder, "serial", "spec.toml", "--quiet"),
            0,
            set(),
            needles(frame),
            True,
        )
    )
    return out


def probe_commands(root: Path) -> list[Outcome]:
    """Bad uses of the other commands, on a folder holding one good release."""
    folder = root / "commands"
    folder.mkdir()
    frame = good_frame()
    frame.to_csv(folder / "census.csv", index=False)
    (folder / "spec.toml").write_text(census_spec_toml(seed=11))
    assert cli(folder, "publish", "spec.toml", "--quiet").returncode == 0
    (folder / "copy.duckdb").write_bytes(b"")
    uses = [
        ("verify an unknown release", ["verify", "census-9999-abcdef"]),
        ("verify with a missing state", ["verify", "x", "--state", "nowhere.duckdb"]),
        ("report an unknown release", ["report", "census-9999-abcdef"]),
        ("history of a missing state", ["history", "--state", "nowhere.duckdb"]),
        ("trail since a non-date", ["trail", "--since", "yesterday"]),
        ("snapshot over an existing file", ["snapshot", "copy.duckdb"]),
        ("explore with a bad --set", ["explore", "spec.toml", "--set", "k=five"]),
        ("explore with an unknown key", ["explore", "spec.toml", "--set", "kk=5"]),
        ("init from a missing file", ["init", "nothere.csv", "--sensitive", "occupation"]),
        ("publish a missing spec", ["publish", "nothere.toml"]),
        ("audit ask before init", ["audit", "ask", "--where", "age > 30"]),
    ]
    out = []
    ids = list(frame.pid.astype(str))  # the sensitive values are published: only ids must not be
    for name, args in uses:
        rows, dirs = len(audit_rows(folder)), release_dirs(folder)
        done = cli(folder, *args)
        out.append(judge("command", name, folder, done, rows, dirs, ids, publish=False))
    return out


HOSTILE = [
    "age > 200) UNION ALL SELECT 'FAKE-ID-1' UNION ALL (SELECT pid FROM population WHERE age > 200",
    "age > (SELECT count(*) FROM range(12000000000) t(x) WHERE x % 7 = 3) - 1000000000",
    "error(pid) IS NULL",
    "pid = 'x'",
    "occupation = 'x'",
    "agee > 30",
    "age > 30; DROP TABLE audit_log",
    "read_csv('/etc/passwd') IS NOT NULL",
    "length(sex) > 0",
    "age BETWEEN 30 AND",
    "",
]


def probe_auditor(root: Path) -> list[Outcome]:
    folder = root / "auditor"
    folder.mkdir()
    frame = good_frame(200)
    frame.to_csv(folder / "census.csv", index=False)
    spec = census_spec_toml(seed=11).replace("[output]", "[audit]\nl = 2\nbudget = 50\n[output]")
    (folder / "clinic.toml").write_text(spec)
    init = cli(folder, "audit", "init", "clinic.toml")
    assert init.returncode == 0, init.stderr
    out = []
    for predicate in HOSTILE:
        done = cli(folder, "audit", "ask", "--where", predicate, "--as", "analyst")
        out.append(judge("auditor", predicate[:50] or "(empty)", folder, done, 0, set(), needles(frame), publish=False))
    return out


def probe_kills(root: Path, kills: int, seed: int) -> list[Outcome]:
    """SIGKILL at a random moment of a publish; the next publish must commit and record it."""
    rnd = random.Random(seed)
    out = []
    folder = root / "kills"
    folder.mkdir()
    frame = good_frame(3000)
    frame.to_csv(folder / "census.csv", index=False)
    (folder / "spec.toml").write_text(census_spec_toml(seed=None))
    for i in range(kills):
        before = len(audit_rows(folder))
        proc = subprocess.Popen(
            [*PRIVPUB, "publish", "spec.toml", "--allow-repeat"],
            cwd=folder,
            env=_env(folder),
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        delay = rnd.uniform(0.3, 3.0)
        markers = folder / "privpub.duckdb.attempts"
        deadline = time.monotonic() + delay
        began = None  # when the attempt's marker appeared (the spec read): from then it is recorded
        while time.monotonic() < deadline:
            if began is None and markers.is_dir() and any(markers.iterdir()):
                began = delay - (deadline - time.monotonic())
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        after = cli(folder, "publish", "spec.toml", "--allow-repeat", "--quiet")
        rows = audit_rows(folder)
        # the killed attempt: committed before the kill, or folded in as interrupted
        logged = len(rows) >= before + 2
        out.append(
            Outcome(
                "kill",
                f"SIGKILL #{i + 1} at {delay:.2f} s"
                + (f" (attempt began at {began:.2f} s)" if began is not None else " (before the spec was read)"),
                after.returncode == 0,
                "Traceback" in after.stderr,
                False,
                any(n in after.stdout + after.stderr for n in needles(frame)),
                not logged,
            )
        )
    verify = [cli(folder, "verify", rid).returncode for rid in sorted(release_dirs(folder))]
    assert all(rc == 0 for rc in verify), verify
    return out


def round_four(root: Path) -> list[Outcome]:
    """Issue 41's cases, one module per area: tests/benchmarks/probe_r4_<area>.py, each `probe(root)`."""
    out: list[Outcome] = []
    for path in sorted(Path(__file__).parent.glob("probe_r4_*.py")):
        out += importlib.import_module(f"tests.benchmarks.{path.stem}").probe(root)
    return out


def failed(o: Outcome) -> bool:
    """A case the probe counts against privpub in any column."""
    return (
        o.traceback or o.internal or o.published or o.leak or o.unlogged or o.duplicates or o.tamper_missed
    ) or not o.clean


def report(outcomes: list[Outcome]) -> str:
    """Print the failed cases and the table; return the table."""
    for o in outcomes:
        if failed(o):
            print(f"  {o.kind}: {o.case}: {o}")
    text = table(outcomes)
    print(text)
    return text


def run_alone(probe: Callable[[Path], list[Outcome]]) -> None:
    """One probe_r4_<area> module on its own (`python -m tests.benchmarks.probe_r4_<area>`)."""
    with tempfile.TemporaryDirectory(prefix="privpub-probe-r4-") as tmp:
        report(probe(Path(tmp)))


def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| kind | cases tried | refused cleanly | tracebacks | internal errors | wrongly published | leaks | unlogged |"
        " duplicate trail rows | tampering missed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    kinds = sorted({o.kind for o in outcomes}, key=[o.kind for o in outcomes].index)
    for kind in [*kinds, "all"]:
        group = [o for o in outcomes if kind in ("all", o.kind)]
        lines.append(
            f"| {kind} | {len(group)} | {sum(o.clean for o in group)} | {sum(o.traceback for o in group)} | "
            f"{sum(o.internal for o in group)} | {sum(o.published for o in group)} | {sum(o.leak for o in group)} | "
            f"{sum(o.unlogged for o in group)} | {sum(o.duplicates for o in group)} | "
            f"{sum(o.tamper_missed for o in group)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--markdown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="privpub-probe-") as tmp:
        root = Path(tmp)
        outcomes = []
        for step in (probe_input_cases, probe_extra_inputs, probe_spec_cases, probe_commands, probe_auditor):
            outcomes += step(root)
        outcomes += probe_kills(root, args.kills, args.seed)
        outcomes += round_four(root)
    text = report(outcomes)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")


if __name__ == "__main__":
    main()
