"""Start-up cost (issue 43, item 4): each command imports what it needs and nothing heavier.

Each command runs in a fresh interpreter that writes, at exit, the top-level packages it loaded;
the test names those the command must not load. No timing: a module list does not depend on the
machine's load, and an import added at the top of a module that drags one back fails here.
The light `history` prints DuckDB's rows itself: its text is checked against pandas' on the same
rows (random tables through DuckDB, and a real state)."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from helpers import child_pythonpath

from privpub.flows.api import verify
from privpub.flows.cli_state import text_table
from privpub.state.store import Store

ROOT = Path(__file__).resolve().parents[1]

# the CLI run as `privpub` would run it, its loaded packages written to argv[1] at exit
PROBE = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["privpub", *sys.argv[2:]]
try:
    runpy.run_module("privpub.flows.cli", run_name="__main__")
except SystemExit as exit:
    code = exit.code
else:
    code = 0
with open(out, "w") as f:
    json.dump(sorted(sys.modules), f)
sys.exit(code)
"""

HEAVY = {"prefect", "pandas", "pandera", "scipy", "pydantic", "dask", "distributed", "matplotlib", "hypothesis"}
# what no command below may load (no Prefect server configured, no [risk] population)
NEVER = {"prefect", "scipy", "dask", "distributed", "matplotlib"}


def _probe(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """`privpub args` in a fresh interpreter with no Prefect API anywhere; its loaded packages."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "PRIVPUB_STATE"))}
    env.update(
        PYTHONPATH=child_pythonpath(ROOT),
        PRIVPUB_HOME=str(tmp_path / "no-service"),
        PREFECT_HOME=str(tmp_path / "prefect"),
    )
    out = tmp_path / "modules.json"
    out.unlink(missing_ok=True)
    res = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args], capture_output=True, text=True, env=env, timeout=300
    )
    return res, {m.split(".")[0] for m in _modules(out)}


def _modules(out: Path) -> set[str]:
    """Every module the probed command loaded (PROBE writes them at exit)."""
    return set(json.loads(out.read_text()))


@pytest.fixture(scope="module")
def demo_state(tmp_path_factory) -> tuple[Path, set[str]]:
    """A state with one release of the demo, and the packages the demo's publish loaded."""
    tmp = tmp_path_factory.mktemp("demo")
    res, loaded = _probe(tmp, "demo", "--dir", str(tmp / "demo"), "--rows", "400", "--quiet")
    assert res.returncode == 0, res.stderr
    return tmp / "demo" / "privpub.duckdb", loaded


def test_the_probe_sees_an_import(tmp_path):
    """The probe would see a heavy package if a light command loaded one: a release's `verify`
    loads pandas (its technique's verifier reads the published tables)."""
    state = tmp_path / "none.duckdb"
    _, loaded = _probe(tmp_path, "verify", "census-0001-000000", "--state", str(state))
    assert "pandas" in loaded and "duckdb" in loaded


@pytest.mark.parametrize(
    "args",
    [["--help"], ["history", "--help"], ["history", "--no-such-flag"], ["trail", "--format", "xml"], []],
    ids=["help", "history-help", "unknown-flag", "bad-choice", "no-command"],
)
def test_help_and_argument_errors_load_nothing_heavy(tmp_path, args):
    res, loaded = _probe(tmp_path, *args)
    assert res.returncode in (0, 2), res.stderr
    assert loaded & (HEAVY | {"duckdb", "pyarrow", "numpy"}) == set(), (args, loaded)


def test_history_loads_duckdb_but_no_pandas_pydantic_or_prefect(tmp_path, demo_state):
    state, _ = demo_state
    res, loaded = _probe(tmp_path, "history", "--state", str(state))
    assert res.returncode == 0, res.stderr
    assert "duckdb" in loaded
    assert loaded & HEAVY == set(), loaded
    # nor Arrow and numpy (issue 43: the store and the pseudonyms import them where they use them)
    assert loaded & {"pyarrow", "numpy"} == set(), loaded
    assert res.stdout == _pandas_history(state), (res.stdout, _pandas_history(state))


def test_history_of_a_missing_state_loads_nothing_heavy(tmp_path):
    """The error path too: its one line comes without pandas."""
    res, loaded = _probe(tmp_path, "history", "--state", str(tmp_path / "none.duckdb"))
    assert res.returncode == 1 and "privpub: error: no state file at" in res.stderr, (res.stdout, res.stderr)
    assert loaded & (HEAVY | {"pyarrow", "numpy"}) == set(), loaded


def test_trail_loads_no_prefect_pandera_pydantic_or_scipy(tmp_path, demo_state):
    state, _ = demo_state
    res, loaded = _probe(tmp_path, "trail", "--state", str(state))
    assert res.returncode == 0 and res.stdout.startswith("logged_at,actor,action,outcome"), res.stderr
    assert loaded & (NEVER | {"pandera", "pydantic"}) == set(), loaded


@pytest.mark.parametrize("history", [False, True])
def test_verify_loads_no_prefect_or_scipy(tmp_path, demo_state, history):
    state, _ = demo_state
    release = str(Store(state).history_rows()[1][0][0])
    res, loaded = _probe(tmp_path, "verify", *(["--history"] if history else [release]), "--state", str(state))
    assert res.returncode == 0, res.stdout + res.stderr
    assert loaded & NEVER == set(), loaded


def test_verify_history_alone_loads_no_technique_pandera_or_pydantic(tmp_path, demo_state):
    """`verify --history` checks chains and manifests: no technique, pandera, pydantic; its lines
    are those of `privpub.verify(history=True)`, which also re-reads every file the manifests list."""
    state, _ = demo_state
    res, loaded = _probe(tmp_path, "verify", "--history", "--state", str(state))
    assert res.returncode == 0, res.stdout + res.stderr
    assert loaded & (NEVER | {"pandera", "pydantic"}) == set(), loaded
    lines = res.stdout.splitlines()
    assert lines[0] == f"history of {state}" and lines[1].startswith("PASS history: chains intact"), lines
    expected = verify(None, state, actor="cli", history=True).attrs["lines"]
    assert lines == _one_audit_row_less(expected)


def _one_audit_row_less(lines: list[str]) -> list[str]:
    """The API's lines as the CLI's run, one audit row earlier, saw them: the CLI's own row is the
    one more the API's run counts."""
    return [re.sub(r"(\d+) audit rows", lambda m: f"{int(m[1]) - 1} audit rows", l) for l in lines]


def test_a_publish_without_population_loads_no_scipy_and_no_prefect(demo_state):
    """The demo's publish (no server, no [risk] population) runs without Prefect and scipy."""
    _, loaded = demo_state
    assert {"pandas", "pandera", "duckdb", "pyarrow"} <= loaded
    assert loaded & NEVER == set(), loaded


# what a release made in this process (publish, demo) never uses: the Prefect server's and the
# report server's HTTP modules, and the other commands' modules (issue 43: loaded where used)
NOT_FOR_A_RELEASE = {
    "privpub.flows.service",
    "privpub.flows.server",
    "privpub.flows.recorded",
    "privpub.flows.report_server",
    "privpub.flows.explore",
    "privpub.flows.init",
    "privpub.flows.optimize",
    "urllib.request",
    "http.server",
}


def test_a_release_loads_no_other_commands_or_http_modules(tmp_path):
    res, _ = _probe(tmp_path, "demo", "--dir", str(tmp_path / "demo"), "--rows", "300", "--quiet")
    assert res.returncode == 0, res.stderr
    loaded = _modules(tmp_path / "modules.json")
    assert "privpub.flows.pipeline" in loaded  # the probe saw the release's own modules
    assert loaded & NOT_FOR_A_RELEASE == set(), loaded & NOT_FOR_A_RELEASE


def test_a_release_in_memory_loads_no_cluster_series_check(tmp_path):
    """The series check of rows kept in parts on a cluster (tasks/compose/parted.py) is imported
    only by such a release; a publish in this process, the demo, never loads it."""
    res, _ = _probe(tmp_path, "demo", "--dir", str(tmp_path / "demo"), "--rows", "300", "--quiet")
    assert res.returncode == 0, res.stderr
    loaded = _modules(tmp_path / "modules.json")
    assert "privpub.tasks.compose.check" in loaded  # the in-memory series check ran
    assert "privpub.tasks.compose.parted" not in loaded


# --- the light history's text is pandas' ------------------------------------------------------


def _pandas_history(state: Path, series: str | None = None) -> str:
    """What `privpub history` printed before it stopped loading pandas (flows/cli_state.py)."""
    frame = Store(state).history(series)
    frame = frame.assign(created_at=frame.created_at.astype(str).str.slice(0, 19))
    return frame.to_string(index=False) + "\n"


TEXTS = [
    "a",
    "census-0001-99f489",
    "",
    " lead",
    "trail ",
    "a\tb",
    "c\rd",
    "e\nf",
    "\\n",
    "é",
    "None",
    "NaN",
    "-1",
    "日本",
]


def _random_table(rng: random.Random) -> tuple[str, list[str]]:
    """A SELECT of 1-4 rows over VARCHAR (some or all NULL), INTEGER and UBIGINT columns."""
    n = rng.randint(1, 4)
    columns, kinds = [], []
    for j in range(rng.randint(1, 6)):
        kind = rng.choice(["VARCHAR", "VARCHAR_NULLS", "VARCHAR_NULL", "INTEGER", "UBIGINT"])
        kinds.append(kind)
        columns.append(rng.choice(["a", "seq", "release_id", "x" * rng.randint(1, 25)]) + str(j))
    rows = []
    for _ in range(n):
        cells = []
        for kind in kinds:
            if kind == "VARCHAR_NULL" or (kind == "VARCHAR_NULLS" and rng.random() < 0.4):
                cells.append("NULL::VARCHAR")
            elif kind.startswith("VARCHAR"):
                cells.append("'" + rng.choice(TEXTS).replace("'", "''") + "'")
            elif kind == "INTEGER":
                cells.append(f"{rng.choice([0, 1, 7, 999, -5, 2**31 - 1])}::INTEGER")
            else:
                cells.append(f"{rng.choice([0, 3, 2**63 + 5, 2**64 - 1, 2206511546486150212])}::UBIGINT")
        rows.append("(" + ", ".join(cells) + ")")
    return "SELECT * FROM (VALUES " + ", ".join(rows) + ") t(" + ", ".join(f'"{c}"' for c in columns) + ")", columns


@pytest.mark.parametrize("seed", range(8))
def test_text_table_writes_what_pandas_writes(seed):
    """Random tables through DuckDB: the rows written by text_table, the frame by pandas."""
    rng = random.Random(seed)
    with duckdb.connect() as con:
        for _ in range(50):
            sql, columns = _random_table(rng)
            want = con.execute(sql).df().to_string(index=False)
            assert text_table(columns, con.execute(sql).fetchall()) == want, sql


@pytest.mark.parametrize(
    "rows",
    [[(1, "a"), (None, "b")], [(1.5, "a")], [(True, "a")], [("a", 1), (2, "b")]],
    ids=["null-number", "float", "bool", "mixed"],
)
def test_text_table_declines_what_it_does_not_write_as_pandas(rows):
    """A NULL number (pandas: a float column), a float, a bool, a mixed column: pandas writes it."""
    assert text_table(["x", "y"], rows) is None


def test_history_of_a_series_is_pandas_text(tmp_path, demo_state):
    state, _ = demo_state
    res, _ = _probe(tmp_path, "history", "--state", str(state), "--series", "census")
    assert res.returncode == 0 and res.stdout == _pandas_history(state, "census"), res.stdout
    res, _ = _probe(tmp_path, "history", "--state", str(state), "--series", "other")
    assert res.stdout == "no releases yet\n"
