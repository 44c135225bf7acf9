"""`privpub audit ...` over the state database: decisions persist and are logged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import duckdb
import numpy as np
import pandas as pd
import pytest

from privpub.flows.audit import init_audit
from privpub.schemas.errors import SpecError
from privpub.schemas.spec import load_spec
from privpub.tasks.audit import nested
from tests.helpers import child_pythonpath
from tests.test_cli import ROOT, run

# ten patients, two of each value (the multiset is public; who holds which is the secret)
AGES = {f"p{i}": 20 + 5 * i for i in range(10)}
TABLE4 = dict(zip(AGES, ["asthma", "hiv", "cancer", "flu", "flu", "cold", "hiv", "asthma", "cancer", "cold"]))

SPEC = """[dataset]
name = "clinic"
input = "clinic.csv"
person_id = "name"
sensitive = "disease"
qi = [ { name = "age", kind = "numeric" } ]

[audit]
l = 2
budget = 1000  # units of work (solves + solver nodes): ample for ten people, on any machine

[output]
state = "privpub.duckdb"
"""


@pytest.fixture
def clinic(tmp_path):
    pd.DataFrame({"name": list(AGES), "age": list(AGES.values()), "disease": [TABLE4[n] for n in AGES]}).to_csv(
        tmp_path / "clinic.csv", index=False
    )
    (tmp_path / "clinic.toml").write_text(SPEC)
    return tmp_path


def ask(folder, where, api, who="analyst", *extra):
    res = run(["audit", "ask", "--where", where, "--as", who, "--state", str(folder / "privpub.duckdb"), *extra], api)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_init_ask_log_and_restart(prefect_server, clinic):
    """Each ask is a new process: the decisions equal one auditor kept in memory.

    Promise: auditor-survives-restart."""
    res = run(["audit", "init", str(clinic / "clinic.toml")], prefect_server)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["registered"] == "clinic"
    # registering again would forget what was released: refused
    again = run(["audit", "init", str(clinic / "clinic.toml")], prefect_server)
    assert again.returncode == 1 and "already registered" in again.stderr

    # each ask is a new process: the knowledge must come back from the state database and
    # give exactly the decisions of one auditor kept in memory
    from privpub.tasks.audit import Auditor, secret_from_mapping

    people = pd.DataFrame({"name": list(AGES), "age": list(AGES.values())})
    memory = Auditor(people, [TABLE4[n] for n in AGES], 2, secret_from_mapping(TABLE4), id_column="name")
    queries = ["age BETWEEN 20 AND 40", "age BETWEEN 30 AND 50", "age = 30", "age BETWEEN 45 AND 65"]
    got = [ask(clinic, q, prefect_server, "analyst", "--ids") for q in queries]
    want = [memory.ask_where(q) for q in queries]
    assert [g["response"] for g in got] == [w.response for w in want]
    assert got[0]["response"] == "answer" and got[2]["response"].endswith("denial")
    for g, w in zip(got, want):
        if g["response"] == "answer":
            assert g["ids"] == list(w.ids) and g["values"] == sorted(TABLE4[i] for i in g["ids"])
        else:
            assert "ids" not in g and "values" not in g

    log = run(["audit", "log", "--state", str(clinic / "privpub.duckdb")], prefect_server)
    lines = [json.loads(l) for l in log.stdout.splitlines()]
    logged = [l for l in lines if l["action"] == "audit-query"]
    assert [q["response"] for q in logged] == [g["response"] for g in got]
    assert [q["query"] for q in logged] == queries and logged[0]["requester"] == "analyst"
    assert all(q["why"] for q in logged)


def test_batch_runs_as_a_flow(prefect_server, clinic):
    assert run(["audit", "init", str(clinic / "clinic.toml")], prefect_server).returncode == 0
    batch = clinic / "batch.txt"
    batch.write_text(
        '# two concurrent queries\nage BETWEEN 20 AND 40\n{"where": "age BETWEEN 30 AND 50", "as": "bob"}\n'
    )
    res = run(["audit", "batch", str(batch), "--state", str(clinic / "privpub.duckdb"), "--server"], prefect_server)
    assert res.returncode == 0, res.stderr
    out = [json.loads(l) for l in res.stdout.splitlines()]
    assert len(out) == 2 and out[0]["response"] in ("answer", "negative-denial", "positive-denial", "delayed")


def test_bad_predicate_is_one_clear_error(prefect_server, clinic):
    assert run(["audit", "init", str(clinic / "clinic.toml")], prefect_server).returncode == 0
    res = run(["audit", "ask", "--where", "age BETWEEN", "--state", str(clinic / "privpub.duckdb")], prefect_server)
    assert res.returncode == 1 and "privpub: error: bad predicate" in res.stderr


HOSTILE = [
    "age BETWEEN",
    "diagnosis IS NOT NULL",
    "name IN (SELECT name FROM read_csv('clinic.csv'))",
    "disease = 'hiv'",
    "age = 1; DROP TABLE population",
    "name = 'p1' AND age = 'p3'",
]


def test_refused_predicates_are_logged_with_one_line(prefect_server, clinic):
    """Every request leaves its audit row, refused ones included; each refusal is one line that
    quotes no cell of the table."""
    assert run(["audit", "init", str(clinic / "clinic.toml")], prefect_server).returncode == 0
    state = str(clinic / "privpub.duckdb")
    for where in HOSTILE:
        res = run(["audit", "ask", "--where", where, "--as", "mallory", "--state", state], prefect_server)
        errors = [l for l in res.stderr.splitlines() if l.startswith("privpub: error:")]
        assert res.returncode == 1 and len(errors) == 1 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert not any(v in res.stderr for v in TABLE4.values()) or "disease" in where
    log = [json.loads(l) for l in run(["audit", "log", "--state", state], prefect_server).stdout.splitlines()]
    refused = [e for e in log if e["response"] == "refused"]
    assert [e["query"] for e in refused] == HOSTILE and all(e["requester"] == "mallory" for e in refused)
    batch = clinic / "batch.txt"
    batch.write_text("age > 30\nage BETWEEN\n")
    res = run(["audit", "batch", str(batch), "--state", state], prefect_server)
    assert res.returncode == 1 and "batch refused, nothing decided: query 2: bad predicate" in res.stderr
    log = [json.loads(l) for l in run(["audit", "log", "--state", state], prefect_server).stdout.splitlines()]
    assert [e["response"] for e in log][-1] == "refused" and len(log) == len(HOSTILE) + 1 + 1


def test_ask_does_not_import_prefect(clinic):
    """One `privpub audit ask` is a fresh process per query: it decides and commits without
    importing Prefect (only `audit batch` runs a flow)."""
    init_audit(load_spec(clinic / "clinic.toml"), "steward")
    code = (
        "import sys\n"
        "from flows.cli import main\n"
        "status = main(sys.argv[1:])\n"
        "print(status, sorted({m.split('.')[0] for m in sys.modules} & {'prefect', 'dask', 'distributed'}))"
    )
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "audit",
            "ask",
            "--where",
            "age BETWEEN 20 AND 40",
            "--state",
            str(clinic / "privpub.duckdb"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": child_pythonpath(ROOT)},
        timeout=120,
    )
    response, modules = res.stdout.strip().splitlines()
    assert json.loads(response)["response"] == "answer", res.stderr
    assert modules == "0 []", res.stderr


def test_log_summary_counts_budget_denials_apart(prefect_server, clinic, monkeypatch):
    """`audit log --summary`: per table, how the queries ended; a denial by the auditor's own
    budget is counted apart from the exact negative denials, refusals are counted but are not
    decisions. A decision given one unit of work is budget-denied."""
    monkeypatch.setattr(nested, "ENABLED", False)  # the solver routes' budget: the nested path has none
    init_audit(load_spec(clinic / "clinic.toml"), "steward")
    state = str(clinic / "privpub.duckdb")
    from privpub.flows.audit import ask as ask_in_process

    for where in ["age BETWEEN 20 AND 40", "age = 30", "age BETWEEN"]:
        try:
            ask_in_process(state, where, "analyst")
        except SpecError:
            pass  # the bad predicate: refused and logged
    # a second table whose budget cannot fit one decision
    (clinic / "tight.toml").write_text(
        SPEC.replace('name = "clinic"', 'name = "tight"').replace("budget = 1000", "budget = 1")
    )
    init_audit(load_spec(clinic / "tight.toml"), "steward")
    ask_in_process(state, "age < 60", "analyst", table="tight")  # 17 units of work, more than 1

    res = run(["audit", "log", "--summary", "--state", state], prefect_server)
    assert res.returncode == 0, res.stderr
    got = {t["table"]: t for t in map(json.loads, res.stdout.splitlines())}
    clinic_row, tight = got["clinic"], got["tight"]
    assert clinic_row["decisions"] == 2 and clinic_row["refused"] == 1 and clinic_row["budget-denied"] == 0
    assert clinic_row["answer"] + clinic_row["negative-denial"] + clinic_row["positive-denial"] == 2
    assert sum(clinic_row["shares"].values()) == 1.0 and "refused" not in clinic_row["shares"]
    assert tight["decisions"] == 1 and tight["budget-denied"] == 1 and tight["negative-denial"] == 0
    assert tight["shares"]["budget-denied"] == 1.0


def test_batch_without_a_server_is_decided_in_process_without_prefect(clinic, tmp_path):
    """No Prefect server configured: the batch is decided in the CLI's process, as publish is
    (flows/run.py); no Prefect import, no temporary server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PYTHONPATH=child_pythonpath(ROOT), PRIVPUB_HOME=str(tmp_path / "none"), PREFECT_HOME=str(tmp_path / "prefect")
    )
    init = [sys.executable, "-m", "privpub.flows.cli", "audit", "init", str(clinic / "clinic.toml")]
    assert subprocess.run(init, env=env, capture_output=True, text=True, timeout=120).returncode == 0
    batch = clinic / "batch.txt"
    batch.write_text('age BETWEEN 20 AND 40\n{"where": "age BETWEEN 30 AND 50", "as": "bob"}\n')
    code = (
        "import sys; from privpub.flows.cli import main\n"
        f"code = main(['audit', 'batch', {str(batch)!r}, '--state', {str(clinic / 'privpub.duckdb')!r}])\n"
        "print('prefect' in sys.modules, file=sys.stderr); sys.exit(code)"
    )
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = [json.loads(l) for l in res.stdout.splitlines()]
    assert len(out) == 2 and all(
        o["response"] in ("answer", "negative-denial", "positive-denial", "delayed") for o in out
    )
    assert res.stderr.strip().splitlines()[-1] == "False"


def test_audit_set_changes_the_count_budget_and_is_logged(clinic, capsys, monkeypatch):
    """`privpub audit set TABLE --budget N`: strict (a positive whole number), logged, and the
    next decision runs under it; the knowledge is unchanged."""
    monkeypatch.setattr(nested, "ENABLED", False)  # the solver routes' budget: the nested path has none
    from privpub.flows.audit import ask as ask_in_process
    from privpub.flows.cli import main
    from privpub.state.store import Store

    init_audit(load_spec(clinic / "clinic.toml"), "steward")
    state = str(clinic / "privpub.duckdb")
    capsys.readouterr()
    for bad in ["0", "-3", "1.5", "abc", "true", "", "1e3", "٣"]:
        assert main(["audit", "set", "clinic", "--budget", bad, "--state", state]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("privpub: error: --budget") and "positive whole" in err[0]
    assert main(["audit", "set", "nosuch", "--budget", "5", "--state", state]) == 1
    assert "no table 'nosuch'" in capsys.readouterr().err
    assert main(["audit", "set", "clinic", "--budget", "1", "--as", "steward", "--state", state]) == 0
    assert json.loads(capsys.readouterr().out) == {"table": "clinic", "budget": 1, "was": 1000}
    denied = ask_in_process(state, "age < 60", "analyst")  # needs 17 units of work
    assert denied["response"] == "negative-denial" and "work budget of 1 units" in denied["reason"]
    assert main(["audit", "set", "clinic", "--budget", "1000", "--state", state]) == 0
    capsys.readouterr()
    answered = ask_in_process(state, "age < 60", "analyst", ids=True)
    assert answered["response"] == "answer" and "budget_hit" not in answered
    assert answered["counts"] == dict(Counter(TABLE4[i] for i in answered["ids"]))
    assert sum(answered["counts"].values()) == len(answered["ids"]) == 8
    assert denied["budget_hit"] is True and "ids" not in denied and "counts" not in denied
    log = Store(state).audit_log()
    sets = log[log.action == "audit-set"]
    assert sets.outcome.tolist() == ["set", "set"] and sets.actor.tolist()[0] == "steward"
    assert [json.loads(d) for d in sets.detail] == [{"budget": 1, "was": 1000}, {"budget": 1000, "was": 1}]
    assert main(["audit", "log", "--summary", "--state", state]) == 0
    (row,) = map(json.loads, capsys.readouterr().out.splitlines())
    assert row["decisions"] == 2 and row["budget-denied"] == 1 and row["answer"] == 1  # sets are no decisions


def test_a_wall_clock_time_budget_is_refused_but_an_old_registration_still_opens(clinic):
    """New specs: `[audit] time_budget` is refused with one line pointing at the count budget.
    A table registered before (its stored spec and state carry time_budget) still opens, under the
    default count budget."""
    from privpub.flows.audit import ask as ask_in_process
    from privpub.flows.audit import audit_settings
    from privpub.state.store import Store
    from privpub.tasks.audit import DEFAULT_BUDGET

    old = SPEC.replace("budget = 1000", "time_budget = 0.8")
    (clinic / "old.toml").write_text(old)
    with pytest.raises(SpecError, match=r"^\[audit\] time_budget: removed.*\[audit\] budget$"):
        audit_settings(load_spec(clinic / "old.toml"))
    for bad in ["0", "true", "2.5", '"3"']:
        (clinic / "bad.toml").write_text(SPEC.replace("budget = 1000", f"budget = {bad}"))
        with pytest.raises(SpecError, match=r"^\[audit\] budget must be a positive whole number"):
            audit_settings(load_spec(clinic / "bad.toml"))
    spec = load_spec(clinic / "clinic.toml")
    init_audit(spec, "steward")
    state = spec.state_path
    store = Store(state)
    with store.write() as con:  # rewrite the registration as an older version stored it
        spec_json, knowledge = con.execute("SELECT spec, knowledge FROM audit_tables").fetchone()
        stored, saved = json.loads(spec_json), json.loads(knowledge)
        stored["audit"] = {"l": 2, "time_budget": 0.8}
        saved.update(budget=None, time_budget=0.8)
        con.execute("UPDATE audit_tables SET spec = ?, knowledge = ?", [json.dumps(stored), json.dumps(saved)])
    assert ask_in_process(state, "age BETWEEN 20 AND 40", "analyst")["response"] == "answer"
    with store.read() as con:
        knowledge = json.loads(con.execute("SELECT knowledge FROM audit_tables").fetchone()[0])
    assert knowledge["budget"] == DEFAULT_BUDGET and "time_budget" not in knowledge


@pytest.mark.parametrize(
    ("audit", "message"),
    [
        ('grid = "autoo"', r'^\[audit\] grid must be "auto" or band widths per QI'),
        ("grid = 5", r'^\[audit\] grid must be "auto" or band widths per QI'),
        ("grid = { agee = 5 }", r"^\[audit\] grid agee: unknown key; did you mean age\?"),
        ("grid = { age = 0 }", r"^\[audit\] grid age: the band width must be a positive number"),
        ('grid = { age = "5" }', r"^\[audit\] grid age: the band width must be a positive number"),
        ("grid = { age = true }", r"^\[audit\] grid age: the band width must be a positive number"),
        ("grid = {}", r"^\[audit\] grid: no band width for QI age"),
        ('grid = "auto"\nmin_cell = 0', r"^\[audit\] min_cell must be a positive whole number"),
        ('grid = "auto"\nmin_cell = "3"', r"^\[audit\] min_cell must be a positive whole number"),
        ('grid = "auto"\nmin_cell = 2.0', r"^\[audit\] min_cell must be a positive whole number"),
        ('grid = "auto"\nsnap = "yes"', r"^\[audit\] snap must be true or false"),
        ("grid = { age = 5 }\nmin_cell = 3", r'^\[audit\] min_cell: only with grid = "auto"'),
        ("min_cell = 3", r"^\[audit\] min_cell: only with a grid"),
        ("snap = false", r"^\[audit\] snap: only with a grid"),
        ('grid = "auto"\nmin_cell = 11', r"^\[audit\] grid: the table has 10 people, fewer than min_cell = 11$"),
    ],
)
def test_grid_settings_are_strict(clinic, audit, message):
    """`[audit] grid`, `min_cell`, `snap`: a wrong key or type is refused with one line, before
    anything is registered."""
    (clinic / "grid.toml").write_text(SPEC.replace("budget = 1000", f"budget = 1000\n{audit}"))
    with pytest.raises(SpecError, match=message) as err:
        init_audit(load_spec(clinic / "grid.toml"), "steward")
    assert "\n" not in str(err.value)
    assert not (clinic / "privpub.duckdb").exists()  # nothing registered


# sixty patients over a numeric, a categorical, a date, an ordinal and a hierarchical QI (issue 31)
KINDS_SPEC = """[dataset]
name = "visits"
input = "visits.csv"
person_id = "name"
sensitive = "disease"
qi = [
  { name = "age", kind = "numeric" },
  { name = "region", kind = "categorical" },
  { name = "visit", kind = "date" },
  { name = "sev", kind = "ordinal", order = ["low", "mid", "high", "top"] },
  { name = "area", kind = "categorical", hierarchy = { north = ["n1", "n2"], south = ["s1", "s2", "s3"], all = ["north", "south"] } },
]

[audit]
l = 2
budget = 1000
GRID

[output]
state = "privpub.duckdb"
"""


@pytest.fixture
def visits(tmp_path):
    rng = np.random.default_rng(11)
    n = 60
    days = np.datetime64("2024-01-01") + rng.integers(0, 90, n)
    pd.DataFrame(
        {
            "name": [f"v{i:02d}" for i in range(n)],
            "age": rng.integers(18, 90, n),
            "region": rng.choice(["east", "west", "north", "south", "centre"], n, p=[0.4, 0.3, 0.2, 0.05, 0.05]),
            "visit": [str(d) for d in days],
            "sev": rng.choice(["low", "mid", "high", "top"], n),
            "area": rng.choice(["n1", "n2", "s1", "s2", "s3"], n),
            "disease": rng.choice(["flu", "cold", "asthma", "hiv"], n),
        }
    ).to_csv(tmp_path / "visits.csv", index=False)
    return tmp_path


def visits_spec(folder, grid: str):
    (folder / "visits.toml").write_text(KINDS_SPEC.replace("GRID", grid))
    return load_spec(folder / "visits.toml")


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ("visit = 7.5", r"^\[audit\] grid visit: the band width of a date QI must be a positive whole number of days$"),
        ("visit = 0", r"^\[audit\] grid visit: the band width of a date QI must be a positive whole number of days$"),
        ('visit = "7"', r"^\[audit\] grid visit: the band width of a date QI must be a positive whole number of days$"),
        ("sev = 0", r"^\[audit\] grid sev: the band width of an ordinal QI must be a positive whole number of values$"),
        (
            "sev = true",
            r"^\[audit\] grid sev: the band width of an ordinal QI must be a positive whole number of values",
        ),
        ("region = 1", r"^\[audit\] grid region: a categorical QI without a hierarchy takes level 0"),
        ('region = "auto"', r"^\[audit\] grid region: a categorical QI without a hierarchy takes level 0"),
        (
            "area = 3",
            r"^\[audit\] grid area: the level of a categorical QI's hierarchy must be a whole number from 0 to 2$",
        ),
        (
            "area = -1",
            r"^\[audit\] grid area: the level of a categorical QI's hierarchy must be a whole number from 0 to 2$",
        ),
        (
            "area = 1.0",
            r"^\[audit\] grid area: the level of a categorical QI's hierarchy must be a whole number from 0 to 2$",
        ),
    ],
)
def test_grid_bands_of_every_kind_are_strict(visits, grid, message):
    """A band of the wrong type or outside its kind's domain is refused with one line naming the
    QI, before anything is registered; the entries just inside pass."""
    good = {"age": "age = 10", "region": "region = 0", "visit": "visit = 7", "sev": "sev = 2", "area": "area = 2"}
    good[grid.split(" = ")[0]] = grid
    spec = visits_spec(visits, "grid = { " + ", ".join(good.values()) + " }")
    with pytest.raises(SpecError, match=message) as err:
        init_audit(spec, "steward")
    assert "\n" not in str(err.value)
    assert not (visits / "privpub.duckdb").exists()  # nothing registered
    inside = {"age": "age = 10", "region": "region = 0", "visit": "visit = 1", "sev": "sev = 1", "area": "area = 2"}
    assert init_audit(visits_spec(visits, "grid = { " + ", ".join(inside.values()) + " }"), "steward") == "visits"


def test_a_mask_hierarchy_level_above_its_top_is_refused(visits):
    spec = visits_spec(visits, "grid = { age = 10, region = 0, visit = 7, sev = 2, area = 0 }")
    data = spec.model_dump(exclude={"base_dir"})
    # five region names of 4 to 6 letters: masked up to "******", then the root "*": levels 0 to 7
    data["dataset"]["qi"][1]["hierarchy"] = "mask"
    data["audit"]["grid"]["region"] = 8
    from privpub.schemas.spec import spec_from_dict

    with pytest.raises(
        SpecError,
        match=r"^\[audit\] grid region: the level of a categorical QI's hierarchy must be a whole number from 0 to 7$",
    ):
        init_audit(spec_from_dict(data, base_dir=visits), "steward")
    data["audit"]["grid"]["region"] = 7
    assert init_audit(spec_from_dict(data, base_dir=visits), "steward") == "visits"


def test_audit_init_and_ask_snap_every_kind_of_qi(visits, tmp_path):
    """`privpub audit init` over numeric, categorical, date, ordinal and hierarchical QIs with
    `grid = "auto"`, then `privpub audit ask` with an off-grid predicate: the decision is taken
    for the grid-aligned predicate, which selects whole cells of >= min_cell people and is
    decided as it is when asked again."""
    from privpub.flows.audit import _secret_table
    from privpub.tasks.audit import select_ids
    from privpub.tasks.audit.grid import Grid, cell_codes

    spec = visits_spec(visits, 'grid = "auto"\nmin_cell = 5')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PYTHONPATH=child_pythonpath(ROOT), PRIVPUB_HOME=str(tmp_path / "none"), PREFECT_HOME=str(tmp_path / "prefect")
    )
    cli = [sys.executable, "-m", "privpub.flows.cli", "audit"]
    init = subprocess.run(
        [*cli, "init", str(visits / "visits.toml")], env=env, capture_output=True, text=True, timeout=120
    )
    assert init.returncode == 0, init.stderr
    state = str(visits / "privpub.duckdb")

    def ask_cli(where):
        res = subprocess.run(
            [*cli, "ask", "--where", where, "--as", "analyst", "--state", state, "--ids"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    where = "age BETWEEN 31 AND 44 AND region = 'south' AND visit >= '2024-02-10' AND sev < 'high' AND area = 's1'"
    out = ask_cli(where)
    assert out["widened"] > 0 and out["predicate"] != where
    assert out["reason"].startswith(f"decided for the grid-aligned query {out['predicate']} ")
    population = _secret_table(spec)[0]
    asked = set(select_ids(population, where, "name"))
    wide = set(select_ids(population, out["predicate"], "name"))
    assert asked < wide and len(wide) - len(asked) == out["widened"]
    if out["response"] == "answer":
        assert set(out["ids"]) == wide
    with duckdb.connect(state, read_only=True) as con:
        grid = Grid.from_state(json.loads(con.execute("SELECT knowledge FROM audit_tables").fetchone()[0])["grid"])
    assert grid.kinds == {"region": "categorical", "visit": "date", "sev": "ordinal", "area": "categorical"}
    codes = cell_codes(population, grid)
    assert min(Counter(codes.tolist()).values()) >= 5  # every non-empty cell holds min_cell people
    chosen = population.name.isin(wide).to_numpy()
    assert set(codes[chosen]).isdisjoint(codes[~chosen])  # whole grid cells
    again = ask_cli(out["predicate"])
    assert again["predicate"] == out["predicate"] and again["widened"] == 0


def test_a_registered_grid_is_built_from_the_public_qi_table_alone(clinic, monkeypatch):
    """`audit init` with `grid = "auto"`: the grid sees the QI columns only, the secret reader is
    never called, the grid is stored with the knowledge, and responses state the predicate
    decided and how much wider it is."""
    from privpub.flows import audit
    from privpub.flows.audit import ask as ask_in_process
    from privpub.state.store import Store

    seen = []
    real_auto_grid = audit.auto_grid

    def recording(frame, columns, min_cell, qis=None):
        seen.append(list(frame.columns))
        return real_auto_grid(frame, columns, min_cell, qis)

    def no_secret(mapping):
        def read(ids):
            raise AssertionError("the secret was read while building the grid")

        return read

    monkeypatch.setattr(audit, "auto_grid", recording)
    monkeypatch.setattr(audit, "secret_from_mapping", no_secret)
    (clinic / "grid.toml").write_text(SPEC.replace("budget = 1000", 'budget = 1000\ngrid = "auto"\nmin_cell = 3'))
    spec = load_spec(clinic / "grid.toml")
    init_audit(spec, "steward")
    assert seen == [["age"]]  # no id, no sensitive column
    monkeypatch.undo()
    with Store(spec.state_path).read() as con:
        knowledge = json.loads(con.execute("SELECT knowledge FROM audit_tables").fetchone()[0])
    assert knowledge["grid"]["min_cell"] == 3 and knowledge["snap"] is True
    out = ask_in_process(spec.state_path, "age BETWEEN 31 AND 44", "analyst")
    assert out["widened"] > 0 and out["predicate"] != "age BETWEEN 31 AND 44"
    assert out["reason"].startswith(f"decided for the grid-aligned query {out['predicate']} ")
    log = Store(spec.state_path).audit_log()
    detail = json.loads(log[log.action == "audit-query"].detail.iloc[-1])
    assert detail["decided_as"] == out["predicate"] and detail["widened"] == out["widened"]


@pytest.mark.parametrize("value", ['"listed"', '"List"', "true", "1", '["list"]', "{ list = 1 }"])
def test_after_denial_is_strict(clinic, value):
    """`[audit] after_denial`: only "list" or "implicit"; anything else is refused with one line
    naming the key, before anything is registered."""
    (clinic / "policy.toml").write_text(SPEC.replace("budget = 1000", f"budget = 1000\nafter_denial = {value}"))
    with pytest.raises(SpecError, match=r'^\[audit\] after_denial must be "list" or "implicit"$') as err:
        init_audit(load_spec(clinic / "policy.toml"), "steward")
    assert "\n" not in str(err.value)
    assert not (clinic / "privpub.duckdb").exists()


@pytest.mark.parametrize(
    ("line", "stored"),
    [
        ("", "list"),
        ("grid = { age = 10 }", "implicit"),
        ('after_denial = "implicit"', "implicit"),
        ('grid = { age = 10 }\nafter_denial = "list"', "list"),
    ],
)
def test_after_denial_is_stored_with_the_knowledge(clinic, line, stored):
    """The default policy is "list" without a grid (where a positive denial would stall later
    queries) and "implicit" with one (where "list" only denies more, docs/auditing.md); the
    chosen one is stored in the auditor's state and survives a restart (`open_session`)."""
    from privpub.flows.audit import open_session
    from privpub.state.store import Store

    (clinic / "policy.toml").write_text(SPEC.replace("budget = 1000", f"budget = 1000\n{line}"))
    spec = load_spec(clinic / "policy.toml")
    init_audit(spec, "steward")
    session = Store(spec.state_path).audit_table("clinic")
    assert session["knowledge"]["after_denial"] == stored
    _, auditor = open_session(session)
    assert auditor.after_denial == stored


def test_a_predicate_is_evaluated_with_no_lock_held(clinic, monkeypatch):
    """Issue 25, item 3: selecting a predicate's people holds no lock of the state (a writer,
    here another store session, gets in while it runs); deciding then takes the lock. A refused
    predicate is still logged."""
    from privpub.flows import audit as audit_flow
    from privpub.schemas.errors import SpecError
    from privpub.state.store import Store
    from privpub.tasks.audit import Auditor

    init_audit(load_spec(clinic / "clinic.toml"), "steward")
    state = clinic / "privpub.duckdb"
    select, writers = Auditor.select, []

    def select_while_another_writes(self, predicate):
        with Store(state, lock_timeout=0.5).write() as con:  # StateBusy if the ask held the lock
            writers.append(con.execute("SELECT count(*) FROM audit_log").fetchone()[0])
        return select(self, predicate)

    monkeypatch.setattr(Auditor, "select", select_while_another_writes)
    assert audit_flow.ask(state, "age BETWEEN 20 AND 40", "analyst")["response"] in ("answer", "deny")
    with pytest.raises(SpecError, match="not a public column"):
        audit_flow.ask(state, "disease = 'flu'", "analyst")
    assert len(writers) == 2
    outcomes = [
        r[0]
        for r in duckdb.connect(str(state), read_only=True)
        .execute("SELECT action FROM audit_log ORDER BY id")
        .fetchall()
    ]
    assert outcomes.count("audit-query") == 2  # the decision and the refusal, both logged


# -- issue 42 item 6: --table, and ids only when asked -------------------------------------------
def two_tables(clinic):
    (clinic / "ward.toml").write_text(SPEC.replace('name = "clinic"', 'name = "ward"'))
    for name in ("clinic", "ward"):
        init_audit(load_spec(clinic / f"{name}.toml"), "steward")
    return str(clinic / "privpub.duckdb")


def last_target(state):
    from privpub.state.store import Store

    log = Store(state).audit_log()
    return log[log.action == "audit-query"].target.tolist()


def test_with_two_tables_the_message_names_them_and_table_or_spec_chooses(clinic, capsys):
    from privpub.flows.cli import main

    state = two_tables(clinic)
    capsys.readouterr()
    assert main(["audit", "ask", "--where", "age < 40", "--state", state]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "several tables are registered with the auditor (clinic, ward)" in err[0]
    assert "choose one with --table NAME (e.g. --table clinic)" in err[0]
    assert main(["audit", "ask", "--where", "age < 40", "--state", state, "--table", "clinc"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no table 'clinc'" in err[0] and err[0].endswith("the registered tables: clinic, ward")
    assert last_target(state) == []  # nothing decided
    assert main(["audit", "ask", "--where", "age < 40", "--spec", str(clinic / "ward.toml")]) == 0
    assert last_target(state) == ["ward"]  # the spec names its table
    assert main(["audit", "ask", "--where", "age < 40", "--spec", str(clinic / "ward.toml"), "--table", "clinic"]) == 0
    assert last_target(state) == ["ward", "clinic"]  # --table wins
    batch = clinic / "batch.txt"
    batch.write_text("age BETWEEN 20 AND 40\n")
    assert main(["audit", "batch", str(batch), "--state", state]) == 1
    assert "choose one with --table NAME" in capsys.readouterr().err


PERSON = r"\bp\d\b"  # the clinic's person ids p0 .. p9


def test_an_answer_gives_counts_and_lists_ids_only_when_asked(clinic, capsys):
    """The analyst asking for a count gets the count of each value and how many people were
    selected; person ids only with --ids (CLI) / ids=True (Python), never in the log."""
    import re

    from privpub.flows import audit as audit_flow
    from privpub.flows.cli import main
    from privpub.tasks.audit import select_ids

    init_audit(load_spec(clinic / "clinic.toml"), "steward")
    state = str(clinic / "privpub.duckdb")
    where = "age BETWEEN 20 AND 40"
    chosen = select_ids(pd.DataFrame({"name": list(AGES), "age": list(AGES.values())}), where, "name")
    capsys.readouterr()
    assert main(["audit", "ask", "--where", where, "--state", state]) == 0
    printed = capsys.readouterr().out
    out = json.loads(printed)
    assert out["response"] == "answer" and "ids" not in out and not re.search(PERSON, printed), printed
    assert out["selected"] == len(chosen) == sum(out["counts"].values())
    assert out["counts"] == dict(Counter(TABLE4[i] for i in chosen))
    assert main(["audit", "ask", "--where", where, "--state", state, "--ids"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["response"] == "answer" and listed["ids"] == sorted(chosen) and listed["selected"] == len(chosen)
    # Python: the same default, ids=True asks for them
    plain = audit_flow.ask(state, where, "analyst")
    assert plain["response"] == "answer" and "ids" not in plain and plain["selected"] == len(chosen)
    assert audit_flow.ask(state, where, "analyst", ids=True)["ids"] == sorted(chosen)
    queries = [{"where": where}, {"where": "age >= 50"}]
    batch = audit_flow.decide_batch(state, queries, "analyst", None, None)
    assert all("ids" not in r for r in batch) and not re.search(PERSON, json.dumps(batch))
    answered = [r for r in audit_flow.decide_batch(state, queries, "analyst", None, None, ids=True) if "selected" in r]
    assert answered and all(len(r["ids"]) == r["selected"] for r in answered)
    assert main(["audit", "log", "--state", state]) == 0
    assert not re.search(PERSON, capsys.readouterr().out)  # the log keeps counts, never ids


def test_batch_runs_here_unless_asked_for_the_server(prefect_server, clinic):
    """Issue 42: with a Prefect server configured (PREFECT_API_URL), `audit batch` without
    `--server` decides in its own process: no Prefect import, no flow run on the server."""
    init_audit(load_spec(clinic / "clinic.toml"), "steward")
    batch = clinic / "batch.txt"
    batch.write_text("age BETWEEN 20 AND 40\n")
    code = (
        "import sys\n"
        "from flows.cli import main\n"
        "status = main(sys.argv[1:])\n"
        "print(status, sorted({m.split('.')[0] for m in sys.modules} & {'prefect', 'dask', 'distributed'}))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, "audit", "batch", str(batch), "--state", str(clinic / "privpub.duckdb")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": child_pythonpath(ROOT), "PREFECT_API_URL": prefect_server},
        timeout=120,
    )
    response, modules = res.stdout.strip().splitlines()
    assert json.loads(response)["response"] == "answer", res.stderr
    assert modules == "0 []", res.stderr
