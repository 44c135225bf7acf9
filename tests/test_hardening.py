"""The failure contract, driven through `privpub` as a hostile but ordinary user would.

Bad input: exit 1, exactly one `privpub: error:` line naming the problem (rows by position,
columns and keys by name), no traceback, no person id or secret value in it, nothing written
(no release row, no release folder, no staging leftover), and the next good publish works.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from privpub.tasks.demo_data import census
from tests.helpers import census_spec_toml, child_pythonpath

ROOT = Path(__file__).resolve().parents[1]
PRIVPUB = [sys.executable, "-m", "privpub.flows.cli"]
SECRET = "SECRETVALUE"  # a sensitive value and cell content that must never be echoed


def good_frame(rows: int = 400) -> pd.DataFrame:
    frame = census(rows, seed=4)
    frame["pid"] = [f"person-{uuid.uuid4().hex[:12]}" for _ in range(rows)]
    frame.loc[frame.index % 7 == 0, "occupation"] = SECRET
    return frame


def run(args, env_extra=None, timeout=240, cwd=ROOT):
    env = {**os.environ, "PYTHONPATH": child_pythonpath(ROOT), **(env_extra or {})}
    if (env_extra or {}).get("PREFECT_API_URL") and args[0] in ("publish", "serial"):
        args = [*args, "--server"]  # a server records a publish only when asked (issue 42)
    return subprocess.run(PRIVPUB + args, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def _write(folder: Path, frame: pd.DataFrame | None = None, spec: str | None = None) -> Path:
    if frame is not None:
        frame.to_csv(folder / "census.csv", index=False)
    (folder / "spec.toml").write_text(spec if spec is not None else census_spec_toml(seed=None))
    return folder / "spec.toml"


def _with_cell(column: str, row: int, value):
    def mutate(folder: Path, frame: pd.DataFrame):
        f = frame.astype({column: object})
        f.loc[row - 1, column] = value
        return _write(folder, f)

    return mutate


def _frame(fn):
    return lambda folder, frame: _write(folder, fn(frame))


def _spec(fn):
    return lambda folder, frame: _write(folder, frame, fn(census_spec_toml(seed=None)))


def _non_utf8(folder: Path, frame: pd.DataFrame):
    _write(folder, frame)
    lines = (folder / "census.csv").read_bytes().split(b"\n")
    header = lines[0].split(b",")
    col = header.index(b"sex")
    cells = lines[30].split(b",")  # data row 30
    cells[col] = b"F\xe9\xff"
    lines[30] = b",".join(cells)
    (folder / "census.csv").write_bytes(b"\n".join(lines))
    return folder / "spec.toml"


def _garbage_state(folder: Path, frame: pd.DataFrame):
    (folder / "privpub.duckdb").write_bytes(os.urandom(4096))
    return _write(folder, frame)


def _output_under_file(folder: Path, frame: pd.DataFrame):
    (folder / "blocker").write_text("a regular file")
    return _write(folder, frame, census_spec_toml(seed=None).replace('dir = "releases"', 'dir = "blocker/releases"'))


def _spec_is_dir(folder: Path, frame: pd.DataFrame):
    _write(folder, frame)
    (folder / "specdir.toml").mkdir()
    return folder / "specdir.toml"


def _input_is_dir(folder: Path, frame: pd.DataFrame):
    (folder / "census.csv").mkdir()
    return _write(folder, None)


def _missing_input(folder: Path, frame: pd.DataFrame):
    return _write(folder, None)


# (case, how to break a valid folder, the fragment the one error line must hold)
CASES = [
    ("inf in a numeric QI", _with_cell("age", 40, np.inf), "row 40, column 'age': not a finite number"),
    ("-inf in a numeric QI", _with_cell("age", 3, -np.inf), "row 3, column 'age': not a finite number"),
    ("nan text in a numeric QI", _with_cell("age", 5, "nan"), "row 5, column 'age': is empty"),
    (
        "inf in a numeric sensitive column",
        _frame(lambda f: f.assign(occupation=np.where(f.index == 11, np.inf, f.index % 9 + 0.5))),
        "row 12, column 'occupation': not a finite number",
    ),
    ("empty QI cell", _with_cell("sex", 7, None), "row 7, column 'sex': is empty"),
    (
        "text in a numeric column",
        _frame(lambda f: f.assign(age="old")),
        "row 1, column 'age': not a number (and 399 more row(s) with this problem)",
    ),
    (
        "a repeated person id",
        _frame(lambda f: f.assign(pid=f.pid.where(f.index != 20, f.pid[3]))),
        "row 21, column 'pid': repeats the person id of row 4",
    ),
    ("a missing column", _frame(lambda f: f.drop(columns=["race"])), "missing column(s) 'race'"),
    (
        "a value outside the declared order",
        _with_cell("education", 9, SECRET),
        "row 9, column 'education': value not in the declared order",
    ),
    (
        "a 1 MB text cell",
        _with_cell("occupation", 12, SECRET * 100_000),
        "row 12, column 'occupation': text longer than 256 characters",
    ),
    ("a cell that is not UTF-8", _non_utf8, "row 30, column 'sex': not UTF-8 text"),
    ("no rows", _frame(lambda f: f.head(0)), "input has no rows"),
    (
        "k larger than the table",
        _spec(lambda s: s.replace("k = 5", "k = 100000")),
        "k = 100000 is larger than the table (400 rows)",
    ),
    (
        "l above the distinct sensitive values",
        _spec(lambda s: s.replace("l = 3", "l = 50")),
        "l = 50 is larger than the number of distinct sensitive values",
    ),
    (
        "a misspelled technique key",
        _spec(lambda s: s.replace("k = 5", "kk = 5")),
        "[technique] kk: unknown key; did you mean k?",
    ),
    (
        "a misspelled section",
        _spec(lambda s: s.replace("[technique]", "[techniqe]")),
        "[techniqe]: unknown section; did you mean [technique]?",
    ),
    (
        "a misspelled output key",
        _spec(lambda s: s.replace("seed", "sed") + "sed = 3\n"),
        "[output] sed: unknown key; did you mean seed?",
    ),
    ("k = inf", _spec(lambda s: s.replace("k = 5", "k = inf")), "[technique] k = inf: not a finite number"),
    ("l = 0", _spec(lambda s: s.replace("l = 3", "l = 0")), "[technique] l must be an integer >= 1"),
    (
        "an unknown technique",
        _spec(lambda s: s.replace('"generalization"', '"mondrianx"')),
        "[technique] name = 'mondrianx' is unknown",
    ),
    ("a spec that is not TOML", _spec(lambda s: s.replace("[dataset]", "[dataset")), "is not valid TOML"),
    ("a spec path that is a folder", _spec_is_dir, "is a directory, not a TOML file"),
    ("an input path that is a folder", _input_is_dir, "is a directory, not a file"),
    ("a missing input file", _missing_input, "input file not found"),
    ("a state file that is not DuckDB", _garbage_state, "is not a privpub state file (not a DuckDB database)"),
    ("an output folder under a regular file", _output_under_file, "is a file, not a folder"),
]


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below the folder with its bytes (what 'nothing written' is checked against).
    The empty `<state>.lock` beside an existing state file is a mutex, not content: reading the
    state file takes it."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not (p.name.endswith(".duckdb.lock") and not p.read_bytes()):
            out[str(p.relative_to(folder))] = p.read_bytes()
    return out


@pytest.mark.parametrize("case, mutate, fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_contract(tmp_path, case, mutate, fragment):
    frame = good_frame()
    spec = mutate(tmp_path, frame)
    before = _snapshot(tmp_path)
    res = run(["publish", str(spec)], {"PREFECT_API_URL": "http://127.0.0.1:9/api"})  # never reached
    assert res.returncode == 1, (case, res.stdout, res.stderr)
    errors = [l for l in res.stderr.splitlines() if l.startswith("privpub: error:")]
    assert len(errors) == 1 and fragment in errors[0], (case, res.stderr)
    assert "Traceback" not in res.stderr and res.stdout == ""
    leaked = [p for p in frame.pid if p in res.stderr] + ([SECRET] if SECRET in res.stderr else [])
    assert not leaked, (case, errors[0])
    _only_the_attempt_was_written(tmp_path, before, errors[0].removeprefix("privpub: error: "))


def _only_the_attempt_was_written(folder: Path, before: dict[str, bytes], message: str) -> None:
    """Nothing but the attempt's audit row: in the state file, or in the journal beside a state
    file that cannot be written. No release row, no release folder, no staging."""
    after = _snapshot(folder)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed <= {"privpub.duckdb", "privpub.duckdb.journal"}, changed
    assert not (folder / "releases").exists()
    if "privpub.duckdb.journal" in changed:
        rows = [json.loads(l) for l in (folder / "privpub.duckdb.journal").read_text().splitlines()]
        assert [(r["outcome"], r["detail"]["message"]) for r in rows] == [("failed", message)]
    else:
        assert "privpub.duckdb" in changed
        with duckdb.connect(str(folder / "privpub.duckdb"), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM release_rows").fetchone()[0] == 0
            rows = con.execute("SELECT outcome, detail FROM audit_log").fetchall()
        assert [(o, json.loads(d)["message"]) for o, d in rows] == [("failed", message)]


def test_next_good_publish_after_refusals(prefect_server, tmp_path):
    """Refusals leave nothing in the way: the first good run publishes release #1."""
    frame = good_frame()
    for _, mutate, _ in CASES[:3] + CASES[12:16]:
        res = run(["publish", str(mutate(tmp_path, frame))], {"PREFECT_API_URL": prefect_server})
        assert res.returncode == 1
    res = run(["publish", str(_write(tmp_path, frame)), "--quiet"], {"PREFECT_API_URL": prefect_server})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().startswith("census-0001-")


def test_state_file_held_open_waits_then_names_it(tmp_path):
    """An analyst's read-write DuckDB session: the command waits (bounded, announced), then
    says which file is busy; nothing is written."""
    spec = _write(tmp_path, good_frame())
    duckdb.connect(str(tmp_path / "privpub.duckdb")).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(60)",
            str(tmp_path / "privpub.duckdb"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        before = _snapshot(tmp_path)
        res = run(["publish", str(spec)], {"PRIVPUB_LOCK_WAIT": "1.5", "PREFECT_API_URL": "http://127.0.0.1:9/api"})
    finally:
        holder.kill()
        holder.wait()
    errors = [l for l in res.stderr.splitlines() if l.startswith("privpub: error:")]
    assert res.returncode == 1 and len(errors) == 1, res.stderr
    assert "is busy (held open by" in errors[0] and "waited 2 s (PRIVPUB_LOCK_WAIT)" in errors[0]
    assert "waiting up to 2 s" in res.stderr  # the wait was announced
    _only_the_attempt_was_written(tmp_path, before, errors[0].removeprefix("privpub: error: "))


def test_a_reader_does_not_stop_a_release(prefect_server, tmp_path):
    """A read-only session (what the README tells analysts to use) never blocks a publish."""
    spec = _write(tmp_path, good_frame())
    assert run(["publish", str(spec), "--quiet"], {"PREFECT_API_URL": prefect_server}).returncode == 0
    with duckdb.connect(str(tmp_path / "privpub.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM releases").fetchone()[0] == 1
        hist = run(["history", "--state", str(tmp_path / "privpub.duckdb")])
        assert hist.returncode == 0 and "census-0001-" in hist.stdout


def test_permissions_follow_secrecy_not_umask(prefect_server, tmp_path):
    """State file owner-only whatever the umask; published files as the operator's umask says."""
    spec = _write(tmp_path, good_frame())
    for umask, published_file, published_dir in ((0o022, 0o644, 0o755), (0o000, 0o666, 0o777)):
        env = {**os.environ, "PYTHONPATH": child_pythonpath(ROOT), "PREFECT_API_URL": prefect_server}
        res = subprocess.run(
            # twice, the same input; --server: recorded on the test's server, asked (issue 42)
            PRIVPUB + ["publish", str(spec), "--quiet", "--allow-repeat", "--server"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=240,
            preexec_fn=lambda m=umask: os.umask(m),
        )
        assert res.returncode == 0, res.stderr
        release = tmp_path / "releases" / res.stdout.strip()
        assert (tmp_path / "privpub.duckdb").stat().st_mode & 0o777 == 0o600
        assert release.stat().st_mode & 0o777 == published_dir
        for f in release.iterdir():
            assert f.stat().st_mode & 0o777 == published_file, f


def test_failed_attempts_are_in_the_audit_log(prefect_server, tmp_path, prefect_results_dir):
    """A run that fails inside the flow (a UI run has no CLI in front of it) ends Failed with the
    one-line message, leaves its audit row, and nothing in Prefect's result storage.

    Promise: every-attempt-in-audit-log."""
    from privpub.flows.publish import publish_flow

    frame = good_frame()
    spec = _write(tmp_path, frame)
    assert run(["publish", str(spec), "--quiet"], {"PREFECT_API_URL": prefect_server}).returncode == 0
    _with_cell("age", 40, np.inf)(tmp_path, frame)
    state = publish_flow(spec_path=str(spec), actor="ui-user", return_state=True)
    assert state.is_failed() and state.message == (
        "input rejected: row 40, column 'age': not a finite number (inf or nan)"
    )
    _spec(lambda s: s.replace("k = 5", "kk = 5"))(tmp_path, frame)
    state = publish_flow(spec_path=str(spec), actor="ui-user", return_state=True)
    assert state.is_failed() and state.message == "[technique] kk: unknown key; did you mean k?"
    with duckdb.connect(str(tmp_path / "privpub.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT actor, outcome, detail FROM audit_log ORDER BY id").fetchall()
    assert [r[1] for r in rows] == ["committed", "failed", "failed"]
    assert all(r[0] == "ui-user" for r in rows[1:])
    assert '"error": "InputError"' in rows[1][2] and '"error": "SpecError"' in rows[2][2]
    assert not any(p in r[2] for r in rows for p in frame.pid)
    home = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect"))
    for root in (prefect_results_dir, home / "storage"):  # failed runs persisted nothing either
        for path in root.rglob("*") if root.exists() else []:
            if path.is_file():
                blob = path.read_bytes()
                assert b"InputError" not in blob and not any(p.encode() in blob for p in frame.pid), path


def test_an_attempt_that_cannot_reach_the_state_file_is_journaled(tmp_path):
    """The state file is garbage: the attempt goes to the journal beside it; once the file is
    usable again, the next writer folds the journal into audit_log."""
    from privpub.flows.publish import record_failure
    from privpub.schemas.errors import SpecError
    from privpub.state.store import Store

    spec = _write(tmp_path, good_frame())
    (tmp_path / "privpub.duckdb").write_bytes(b"not duckdb" * 100)
    os.environ["PRIVPUB_LOCK_WAIT"] = "0"
    try:
        record_failure(str(spec), None, "cron", SpecError("x"), "x")
    finally:
        os.environ.pop("PRIVPUB_LOCK_WAIT")
    journal = tmp_path / "privpub.duckdb.journal"
    assert journal.is_file() and journal.stat().st_mode & 0o777 == 0o600
    (tmp_path / "privpub.duckdb").unlink()
    Store(tmp_path / "privpub.duckdb").log("next", "publish", "census", "committed")
    log = Store(tmp_path / "privpub.duckdb").audit_log()
    assert log.outcome.tolist() == ["failed", "committed"] and log.actor.tolist() == ["cron", "next"]
    assert '"journaled": true' in log.detail[0] and not journal.exists()


# --- kills at any moment ------------------------------------------------------------------------


def _processes_with(mark: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries the run's mark."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mark.encode() not in Path(f"/proc/{pid}/environ").read_bytes():
                continue
            if "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text():
                continue
        except OSError:
            continue
        found.append(int(pid))
    return found


def _committed(folder: Path) -> list[str]:
    state = folder / "privpub.duckdb"
    if not state.exists():
        return []
    with duckdb.connect(str(state), read_only=True) as con:
        if not con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'release_rows'"
        ).fetchone()[0]:
            return []
        return [r[0] for r in con.execute("SELECT release_id FROM release_rows ORDER BY sequence").fetchall()]


def _check_no_half_release(folder: Path) -> None:
    """Every visible release folder is a committed release with its tables and report; a
    committed release not yet visible waits in staging, to be rolled forward."""
    committed = set(_committed(folder))
    out = folder / "releases"
    visible = {p.name for p in out.iterdir() if not p.name.startswith(".")} if out.exists() else set()
    assert visible <= committed, visible - committed
    for rid in visible:
        assert {"table.parquet", "report.html"} <= {p.name for p in (out / rid).iterdir()}, rid
    staged = {p.name for p in (out / ".staging").iterdir()} if (out / ".staging").exists() else set()
    if committed - visible:
        with duckdb.connect(str(folder / "privpub.duckdb"), read_only=True) as con:
            tokens = dict(con.execute("SELECT release_id, staging_dir FROM release_rows").fetchall())
        assert all(tokens[r] in staged for r in committed - visible)


STOPS = ["partition", "anonymize", "stage", "report", "commit", "after-commit", "published"]


def test_sigkill_anywhere_leaves_no_half_release_and_no_process(tmp_path, prefect_results_dir):
    """SIGKILL of `privpub publish` (the process only, as `kill -9 PID` does) at every failpoint
    and at random moments within a run (about a second now that no temporary Prefect server
    starts; a run that ended first is not killed): afterwards no process of the run is alive, no
    half release is visible, every committed release has its report and verifies, the next
    publish succeeds, and no secret reached Prefect's storage.

    Promise: no-half-release-after-kill."""
    import signal
    import time

    from privpub.flows.reverify import reverify

    frame = good_frame(600)
    spec = _write(tmp_path, frame)
    rng = np.random.default_rng(20261123)
    plan = [(s, None) for s in STOPS] + [(None, float(d)) for d in rng.uniform(0.2, 1.5, size=6)]
    base_env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    for stage, delay in plan:
        mark = f"privpub-crash-{uuid.uuid4().hex}"
        flag = tmp_path / f"{mark}.flag"
        env = {**base_env, "PYTHONPATH": child_pythonpath(ROOT), "PRIVPUB_TEST_MARK": mark}
        if stage:
            env.update(PRIVPUB_PAUSE_AT=stage, PRIVPUB_PAUSE_FLAG=str(flag))
        proc = subprocess.Popen(  # a run killed after its commit leaves a release of this input
            PRIVPUB + ["publish", str(spec), "--quiet", "--allow-repeat"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started = time.monotonic()
        while proc.poll() is None and not flag.exists() and time.monotonic() - started < (delay or 240):
            time.sleep(0.05)
        if stage:
            assert flag.exists(), f"publish ended before reaching {stage}"
        if stage == "report":  # staged files are secret until the commit publishes them
            for staged in (tmp_path / "releases" / ".staging").iterdir():
                assert staged.stat().st_mode & 0o777 == 0o700
                assert all(f.stat().st_mode & 0o777 == 0o600 for f in staged.iterdir())
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _processes_with(mark) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _processes_with(mark), f"processes left alive after a kill at {stage or delay}"
        _check_no_half_release(tmp_path)
    res = subprocess.run(
        PRIVPUB + ["publish", str(spec), "--quiet", "--allow-repeat"],
        env={**base_env, "PYTHONPATH": child_pythonpath(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert res.returncode == 0, res.stderr
    committed = _committed(tmp_path)
    # kills at after-commit and published leave committed releases; the final run adds one
    assert res.stdout.strip() == committed[-1] and len(committed) >= 3
    assert not (tmp_path / "releases" / ".staging").exists()
    for rid in committed:
        assert (tmp_path / "releases" / rid / "report.html").is_file()
        ok, lines = reverify(tmp_path / "privpub.duckdb", rid)
        assert ok, lines
    home = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect"))
    needles = [p.encode() for p in frame.pid]
    for root in (prefect_results_dir, home / "storage"):
        for path in root.rglob("*") if root.exists() else []:
            if path.is_file():
                blob = path.read_bytes()
                assert not any(n in blob for n in needles), path


# --- random corruptions -------------------------------------------------------------------------

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

COLUMNS = ["pid", "age", "sex", "education", "occupation"]
KINDS = ["empty", "nan", "inf", "text", "number", "huge", "nonutf8"]


def _is_bad(column: str, kind: str) -> bool:
    """The contract, column by column: what must be refused (an oracle written from the README,
    not from the validator)."""
    if kind in ("empty", "huge", "nonutf8"):
        return True  # null, over 256 characters, not UTF-8: refused everywhere
    if column == "age":  # numeric QI: finite numbers only ("nan" is no number: an empty cell)
        return kind in ("inf", "text", "nan")
    if column == "education":  # ordinal: only the declared order
        return True
    return False  # text columns: "inf", "nan", "abc" or "1003" are labels like any other (the NA rule)


def _cell(kind: str, i: int) -> bytes:
    return {
        "empty": b"",
        "nan": b"nan",
        "inf": b"inf",
        "text": b"abc",
        "number": str(1000 + i).encode(),
        "huge": b"y" * 300,
        "nonutf8": b"ab\xff\xfe",
    }[kind]


@settings(max_examples=40)
@given(
    st.lists(st.tuples(st.integers(0, 59), st.sampled_from(COLUMNS), st.sampled_from(KINDS)), min_size=1, max_size=4)
)
@example(corruptions=[(0, "pid", "inf"), (1, "pid", "inf")])  # two ids made equal: a repeated person id
@example(corruptions=[(0, "age", "nan"), (1, "age", "text")])  # nan above text: the first row named
def test_random_corruptions_are_refused_with_row_and_column(tmp_path_factory, corruptions):
    import contextlib
    import io

    from privpub.flows.cli import check_input, check_spec, main
    from privpub.schemas.errors import InputError

    folder = tmp_path_factory.mktemp("corrupt")
    frame = good_frame(60)
    cells = {(r, c): _cell(k, i) for i, (r, c, k) in enumerate(corruptions)}
    kinds = {(r, c): k for r, c, k in corruptions}  # the last corruption of a cell wins
    header = list(frame.columns)
    lines = [",".join(header).encode()]
    for r, row in enumerate(frame.astype(str).itertuples(index=False)):
        lines.append(b",".join(cells.get((r, c), str(v).encode()) for c, v in zip(header, row)))
    (folder / "census.csv").write_bytes(b"\n".join(lines) + b"\n")
    spec = _write(folder, None)
    bad = sorted((r + 1, c) for (r, c), k in kinds.items() if _is_bad(c, k))
    if not bad:
        pids = [cells.get((r, "pid"), str(v).encode()) for r, v in enumerate(frame["pid"])]
        if len(set(pids)) < len(pids):  # e.g. two rows whose ids both became "inf"
            with pytest.raises(InputError, match=r"row \d+, column 'pid': repeats the person id of row \d+"):
                check_input(check_spec(str(spec)))
            return
        check_input(check_spec(str(spec)))  # accepted as it is
        return
    unreadable = sorted((r + 1, c) for (r, c), k in kinds.items() if k == "nonutf8")
    first_row = (unreadable or bad)[0][0]
    first_cols = {c for r, c in (unreadable or bad) if r == first_row}
    err = io.StringIO()
    old = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = "http://127.0.0.1:9/api"  # refused before Prefect is needed
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["publish", str(spec), "--server"])  # the server path, asked (issue 42)
    finally:
        os.environ.pop("PREFECT_API_URL") if old is None else os.environ.update(PREFECT_API_URL=old)
    text = err.getvalue()
    assert code == 1 and text.count("\n") == 1 and text.startswith("privpub: error: "), text
    assert any(f"row {first_row}, column '{c}'" in text for c in first_cols), (text, bad, unreadable)
    assert not any(p in text for p in frame.pid) and "yyyy" not in text and SECRET not in text
    assert sorted(p.name for p in folder.iterdir()) == [
        "census.csv",
        "privpub.duckdb",
        "privpub.duckdb.lock",
        "spec.toml",
    ]  # the attempt's audit row only


def test_only_transient_failures_are_retried():
    from prefect.states import Failed

    from privpub.flows.publish import transient
    from privpub.schemas.errors import InputError, SpecError, StateBusy

    def retried(exc):
        return transient(None, None, Failed(data=exc))

    assert retried(OSError(5, "Input/output error")) and retried(TimeoutError())
    for exc in (
        FileNotFoundError(2, "gone"),
        IsADirectoryError(21, "dir"),
        PermissionError(13, "no"),
        InputError("bad"),
        SpecError("bad"),
        StateBusy("busy"),
        ValueError("x"),
    ):
        assert not retried(exc), exc


def test_a_failure_after_the_commit_is_a_warning(prefect_server, tmp_path):
    """Something fails after the commit (here: an injected error where the artifacts are made):
    the command prints the release id, one warning line, exits 0; the release is whole, and the
    flow run ends Completed (the release exists)."""
    spec = _write(tmp_path, good_frame())
    res = run(["publish", str(spec)], {"PREFECT_API_URL": prefect_server, "PRIVPUB_FAIL_AT": "published"})
    assert res.returncode == 0, res.stderr
    release_id = res.stdout.splitlines()[0].strip()
    assert release_id.startswith("census-0001-") and "privpub: error" not in res.stderr
    assert f"release {release_id} is committed, but a step after the commit failed" in res.stderr
    assert (tmp_path / "releases" / release_id / "report.html").is_file()
    with duckdb.connect(str(tmp_path / "privpub.duckdb"), read_only=True) as con:
        assert [r[0] for r in con.execute("SELECT outcome FROM audit_log").fetchall()] == ["committed"]
    from privpub.flows.reverify import reverify

    ok, lines = reverify(tmp_path / "privpub.duckdb", release_id)
    assert ok, lines


def test_trail_exports_every_attempt(prefect_server, tmp_path):
    """`privpub trail`: the compliance export, committed and failed attempts with their trigger."""
    frame = good_frame()
    spec = _write(tmp_path, frame)
    env = {"PREFECT_API_URL": prefect_server}
    release = run(["publish", str(spec), "--quiet", "--as", "steward"], env).stdout.strip()
    _spec(lambda s: s.replace("k = 5", "kk = 5"))(tmp_path, frame)
    assert run(["publish", str(spec), "--as", "steward"], env).returncode == 1
    state = str(tmp_path / "privpub.duckdb")
    csv = run(["trail", "--state", state, "--series", "census"])
    assert csv.returncode == 0, csv.stderr
    rows = pd.read_csv(__import__("io").StringIO(csv.stdout))
    assert rows.outcome.tolist() == ["committed", "failed"] and set(rows.trigger) == {"cli"}
    assert rows.release_id[0] == release and rows.actor.tolist() == ["steward", "steward"]
    assert rows.message[1] == "[technique] kk: unknown key; did you mean k?"
    js = run(["trail", "--state", state, "--format", "json", "--since", "2999-01-01"])
    assert js.returncode == 0 and js.stdout == ""
    assert "not a date" in run(["trail", "--state", state, "--since", "yesterday"]).stderr


def test_figures_are_explained_and_poor_ones_flagged():
    from privpub.tasks.report.figures import LOWER, describe, poor_figures, worst_rows

    assert describe("query_error_1pct")[1] == LOWER and "1% of the rows" in describe("query_error_1pct")[0]
    assert describe("uncertainty_penalty_normalized")[1] == LOWER
    warn = poor_figures({"query_error_1pct": 1.2, "query_error_5pct": 1.0, "suppressed_rows": 60}, rows_in=1000)
    assert len(warn) == 2 and "1% selectivity" in warn[0] and "60 of 1,000" in warn[1]
    assert poor_figures({"query_error_1pct": 0.99, "suppressed_rows": 50}, rows_in=1000) == []
    assert worst_rows({"group": 3, "values": ["a", "b"], "box": {"age": "20-30"}}) == [
        ("group", "3"),
        ("values", "a, b"),
        ("box", "age = 20-30"),
    ]
