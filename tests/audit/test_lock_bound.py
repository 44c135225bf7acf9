"""Issue 41, item 3: an auditor decision holds no lock while it runs, records only on the history
it was made on, is bounded by a per-request ceiling of work as well as the budget, and a
predicate's length and nesting are bounded with one logged line (never a RecursionError)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from privpub.flows import audit as audit_flow
from privpub.flows.audit import init_audit
from privpub.schemas.errors import SpecError, StaleHistory
from privpub.schemas.spec import load_spec
from privpub.state.store import Store
from privpub.tasks.audit import Auditor, ask_batch, nested, select_ids
from privpub.tasks.audit.query import MAX_CHARS, MAX_NESTING, MAX_TOKENS
from tests.audit.test_golden import Q1, Q2, T12, Spy, population
from tests.helpers import census_spec_toml, child_pythonpath
from tests.test_audit_cli import clinic  # noqa: F401  (the fixture)
from tests.test_hardening import good_frame

ROOT = Path(__file__).resolve().parents[2]
PRIVPUB = [sys.executable, "-m", "privpub.flows.cli"]
FIVE = ["Alice", "Bob", "Clark", "Diana", "Ellen"]
# on the census table below, after QUICK, a decision of tens of thousands of solver units
QUICK = ["age < 30", "age BETWEEN 30 AND 50", "sex = 'female'"]
SLOW = "age BETWEEN 25 AND 34 AND sex = 'male' OR age = 45"


def env(folder: Path, wait: str = "10") -> dict:
    out = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    out.update(PYTHONPATH=child_pythonpath(ROOT), PRIVPUB_HOME=str(folder / "no-service"), PRIVPUB_LOCK_WAIT=wait)
    return out


def cli(folder: Path, *args: str, wait: str = "10") -> subprocess.CompletedProcess:
    return subprocess.run(
        [*PRIVPUB, *args], cwd=folder, env=env(folder, wait), capture_output=True, text=True, timeout=300
    )


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time (how far into its work it is, whatever the load)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def audit_queries(state: Path) -> list[tuple[str, dict]]:
    with duckdb.connect(str(state), read_only=True) as con:
        rows = con.execute("SELECT outcome, detail FROM audit_log WHERE action = 'audit-query' ORDER BY id").fetchall()
    return [(outcome, json.loads(detail)) for outcome, detail in rows]


@pytest.fixture
def census_state(tmp_path):
    """A 300-person census table registered with the auditor (budget 1,000,000, the issue's) and
    also a publishable spec of the same state."""
    good_frame(300).to_csv(tmp_path / "census.csv", index=False)
    spec = census_spec_toml(seed=11).replace(
        "[output]", "[audit]\nl = 2\nbudget = 1000000\nrequest_budget = 1000000\n\n[output]"
    )
    (tmp_path / "spec.toml").write_text(spec)
    init_audit(load_spec(tmp_path / "spec.toml"), "steward")
    for where in QUICK:  # each decided in well under a second
        audit_flow.ask(tmp_path / "privpub.duckdb", where, "analyst")
    return tmp_path


def test_a_publish_history_and_a_reader_proceed_while_a_slow_decision_runs(census_state):
    """The issue's case: a decision of minutes held the writers' lock, so a publish gave up,
    `history` and `trail` failed and a reader met DuckDB's lock. Now the decision holds nothing:
    each of them completes (waiting at most 10 s for a lock) while it still runs."""
    folder, state = census_state, census_state / "privpub.duckdb"
    before = audit_queries(state)
    asking = subprocess.Popen(
        [*PRIVPUB, "audit", "ask", "--where", SLOW, "--as", "analyst"],
        cwd=folder,
        env=env(folder),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # well into its solver work: start-up, reading the table and selecting take under 3 s of CPU
        deadline = time.monotonic() + 120
        while cpu_seconds(asking.pid) < 5 and asking.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert asking.poll() is None, asking.communicate()
        published = cli(folder, "publish", "spec.toml", "--quiet")
        assert published.returncode == 0, published.stderr
        history = cli(folder, "history", "--state", "privpub.duckdb")
        assert history.returncode == 0 and "census" in history.stdout, history.stderr
        trail = cli(folder, "trail", "--state", "privpub.duckdb")
        assert trail.returncode == 0, trail.stderr
        with duckdb.connect(str(state), read_only=True) as con:  # no "Conflicting lock"
            assert con.execute("SELECT count(*) FROM release_rows").fetchone()[0] == 1
        assert asking.poll() is None  # all of it happened while the decision ran
    finally:
        os.killpg(asking.pid, signal.SIGKILL)  # the process this test started, by its id
        asking.communicate()
    assert audit_queries(state) == before  # the killed decision recorded nothing


def test_a_decision_made_on_a_history_that_changed_is_made_again(clinic, monkeypatch):  # noqa: F811
    """While a decision runs another request records its own; the first is not recorded on the
    stale history but made again on the new one: the knowledge is exactly that of deciding the
    two one after the other."""
    monkeypatch.setenv("PRIVPUB_LOCK_WAIT", "2")  # a decision holding the lock: busy, not a wait
    init_audit(load_spec(clinic / "clinic.toml"), "steward")
    state = clinic / "privpub.duckdb"
    registered = Store(state).audit_table("clinic")["knowledge"]
    ask, calls = Auditor.ask, []

    def ask_while_another_records(self, ids, query_id=None):
        calls.append(sorted(ids))
        if len(calls) == 1:  # the first attempt: another analyst's query is recorded meanwhile
            audit_flow.ask(state, "age >= 50", "bob")
        return ask(self, ids, query_id)

    monkeypatch.setattr(Auditor, "ask", ask_while_another_records)
    out = audit_flow.ask(state, "age < 40", "alice")
    assert len(calls) == 3  # alice's first attempt, bob's, alice's again
    assert calls[0] == calls[2] != calls[1]
    logged = audit_queries(state)
    assert [d["query"] for _, d in logged] == ["age >= 50", "age < 40"]
    assert [d["query_id"] for _, d in logged] == ["q1", "q2"] and out["query_id"] == "q2"
    monkeypatch.setattr(Auditor, "ask", ask)
    _, replay = audit_flow.open_session({**Store(state).audit_table("clinic"), "knowledge": registered})
    for where in ("age >= 50", "age < 40"):  # one after the other, on one auditor
        replay.ask_where(where)
    assert Store(state).audit_table("clinic")["knowledge"]["knowledge"] == replay.to_state()["knowledge"]


def test_a_request_whose_history_keeps_changing_is_refused_in_one_logged_line(clinic, monkeypatch):  # noqa: F811
    """Another setting recorded during every attempt: after ATTEMPTS the request is refused (a
    StaleHistory line), nothing decided, and the refusal is in the audit log."""
    monkeypatch.setenv("PRIVPUB_LOCK_WAIT", "2")
    init_audit(load_spec(clinic / "clinic.toml"), "steward")
    state = clinic / "privpub.duckdb"
    ask, budgets = Auditor.ask, iter(range(500, 600))

    def ask_while_the_budget_changes(self, ids, query_id=None):
        audit_flow.set_budget(state, "clinic", str(next(budgets)), "steward")
        return ask(self, ids, query_id)

    monkeypatch.setattr(Auditor, "ask", ask_while_the_budget_changes)
    with pytest.raises(StaleHistory, match=f"changed {audit_flow.ATTEMPTS} times") as raised:
        audit_flow.ask(state, "age < 40", "alice")
    assert "\n" not in str(raised.value)
    (row,) = audit_queries(state)
    assert row[0] == "refused" and row[1]["query"] == "age < 40" and "changed 3 times" in row[1]["why"]
    assert Store(state).audit_table("clinic")["knowledge"]["counter"] == 0  # nothing decided


# --- the request ceiling -------------------------------------------------------------------------
def test_the_request_ceiling_denies_without_reading_the_secret_just_outside_and_not_inside(monkeypatch):
    """FIVE needs 9 units of work: a ceiling of 9 decides it as no ceiling does; 8 denies it
    (budget_hit, the reason names the request's ceiling, not the budget) before any read."""
    monkeypatch.setattr(nested, "ENABLED", False)  # the solver routes: the nested path has no work
    free = Auditor(population(T12), list(T12.values()), 2, Spy(T12), budget=100)
    expected = free.ask(FIVE)
    assert expected.work == 9 and not expected.budget_hit
    inside = Auditor(population(T12), list(T12.values()), 2, Spy(T12), budget=100, request_budget=9).ask(FIVE)
    assert (inside.response, inside.work, inside.budget_hit) == (expected.response, 9, False)
    spy = Spy(T12)
    outside = Auditor(population(T12), list(T12.values()), 2, spy, budget=100, request_budget=8).ask(FIVE)
    assert outside.response == "negative-denial" and outside.budget_hit and spy.reads == []
    assert "request budget of 8 work units" in outside.reason and "--request-budget" in outside.reason
    by_budget = Auditor(population(T12), list(T12.values()), 2, Spy(T12), budget=8, request_budget=100).ask(FIVE)
    assert by_budget.budget_hit and "work budget of 8 units" in by_budget.reason


def test_the_ceiling_is_per_request_and_shared_by_a_batch(monkeypatch):
    """Each ask gets a fresh ceiling (four asks of 15 units in all decide as without one under a
    ceiling of 9); a batch's checks share one: 6 units in all, so 6 decides all three and 5
    denies the last by the ceiling."""
    monkeypatch.setattr(nested, "ENABLED", False)
    free = Auditor(population(T12), list(T12.values()), 2, Spy(T12), budget=100)
    capped = Auditor(population(T12), list(T12.values()), 2, Spy(T12), budget=100, request_budget=9)
    for q in (FIVE, Q2, Q1, FIVE):
        a, b = free.ask(q), capped.ask(q)
        assert (a.response, a.work) == (b.response, b.work) and not b.budget_hit
    for ceiling, last in ((6, ("answer", False)), (5, ("negative-denial", True))):
        spy = Spy(T12)
        auditor = Auditor(population(T12), list(T12.values()), 2, spy, budget=100, request_budget=ceiling)
        decisions = ask_batch(auditor, [("a", Q2), ("b", Q1), ("c", FIVE)])
        assert [d.response for d in decisions[:2]] == ["answer", "answer"]
        assert (decisions[2].response, decisions[2].budget_hit) == last
        assert len(spy.reads) == 2 + (not last[1])  # the denied one was never read


def test_request_budget_is_strict_stored_and_set_with_a_logged_row(clinic, capsys, monkeypatch):  # noqa: F811
    """`[audit] request_budget`: a positive whole number or refused with one line; stored at
    registration (default DEFAULT_REQUEST_BUDGET when absent), it denies a request over it, and
    `privpub audit set TABLE --request-budget N` changes it with an audit-set row."""
    monkeypatch.setattr(nested, "ENABLED", False)
    from privpub.flows.cli import main

    spec = (clinic / "clinic.toml").read_text()
    for bad in ("0", "-1", "2.5", '"7"', "true"):
        (clinic / "bad.toml").write_text(spec.replace("budget = 1000", f"budget = 1000\nrequest_budget = {bad}"))
        with pytest.raises(SpecError, match=r"^\[audit\] request_budget must be a positive whole number"):
            init_audit(load_spec(clinic / "bad.toml"), "steward")
    (clinic / "tight.toml").write_text(spec.replace("budget = 1000", "budget = 1000\nrequest_budget = 1"))
    init_audit(load_spec(clinic / "tight.toml"), "steward")
    state = str(clinic / "privpub.duckdb")
    assert Store(state).audit_table("clinic")["knowledge"]["request_budget"] == 1
    denied = audit_flow.ask(state, "age < 60", "analyst")  # needs 17 units
    assert denied["budget_hit"] and "request budget of 1 work units" in denied["reason"]
    capsys.readouterr()
    for bad in ("0", "x", "1.5"):
        assert main(["audit", "set", "clinic", "--request-budget", bad, "--state", state]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("privpub: error: --request-budget")
    assert main(["audit", "set", "clinic", "--request-budget", "17", "--state", state]) == 0
    assert json.loads(capsys.readouterr().out) == {"table": "clinic", "request_budget": 17, "was": 1}
    answered = audit_flow.ask(state, "age < 60", "analyst")
    assert answered["response"] == "answer" and "budget_hit" not in answered
    log = Store(state).audit_log()
    assert [json.loads(d) for d in log[log.action == "audit-set"].detail] == [{"request_budget": 17, "was": 1}]


# --- bounded predicates --------------------------------------------------------------------------
def nest(n: int) -> str:
    return "(" * n + "age > 30" + ")" * n


def nots(n: int) -> str:
    return "NOT " * n + "age > 30"


SHAPES = [
    (nest, "parentheses"),
    (nots, "NOTs"),
    (lambda n: "NOT (" * (n // 2) + "NOT " * (n % 2) + "age > 30" + ")" * (n // 2), "NOT before each parenthesis"),
    (lambda n: "age > " + "- " * n + "1", "signs"),
]


@pytest.mark.parametrize(("shape", "what"), SHAPES)
def test_nesting_is_bounded_just_inside_and_just_outside(shape, what):
    """MAX_NESTING levels select, one more is refused with one line; never a RecursionError, even
    from a deep caller's stack."""
    frame = population(T12)

    def deep(k: int, predicate: str):  # 300 frames of caller already on the stack
        return deep(k - 1, predicate) if k else select_ids(frame, predicate, "name")

    deep(300, shape(MAX_NESTING))
    with pytest.raises(ValueError, match=f"nests {MAX_NESTING + 1} levels deep") as raised:
        deep(300, shape(MAX_NESTING + 1))
    assert "\n" not in str(raised.value) and f"at most {MAX_NESTING}" in str(raised.value)


def test_length_and_tokens_are_bounded_just_inside_and_just_outside():
    frame = population(T12).assign(city="x")
    text = "city = '" + "x" * (MAX_CHARS - len("city = ''")) + "'"
    assert len(text) == MAX_CHARS and select_ids(frame, text, "name") == []
    with pytest.raises(ValueError, match=f"{MAX_CHARS + 1} characters long; at most {MAX_CHARS}"):
        select_ids(frame, text[:-1] + "x'", "name")
    # "age IN (" + n values and n - 1 commas + ")": 2n + 3 tokens; a sign before age adds one
    inside = "-age IN (" + ", ".join(["1"] * ((MAX_TOKENS - 4) // 2)) + ")"
    assert select_ids(frame, inside, "name") == []
    with pytest.raises(ValueError, match=f"has {MAX_TOKENS + 1} tokens; at most {MAX_TOKENS}"):
        select_ids(frame, "age IN (" + ", ".join(["1"] * ((MAX_TOKENS - 2) // 2)) + ")", "name")


@pytest.mark.parametrize(
    ("predicate", "line"),
    [
        (nest(60), "nests 60 levels deep"),
        (nots(100), "nests 100 levels deep"),
        (" OR ".join(f"age = {i}" for i in range(5000)), "characters long; at most"),
    ],
    ids=["60 parentheses", "100 NOTs", "a very long predicate"],
)
def test_the_issues_predicates_are_refused_in_one_line_and_logged(clinic, predicate, line):  # noqa: F811
    """The CLI: exit 1, one line, no traceback; an audit-query row `refused` saying why."""
    init_audit(load_spec(clinic / "clinic.toml"), "steward")
    done = cli(clinic, "audit", "ask", "--where", predicate, "--as", "analyst")
    err = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(err) == 1 and err[0].startswith("privpub: error: bad predicate")
    assert line in err[0] and "Traceback" not in done.stderr and not done.stdout
    ((outcome, detail),) = audit_queries(clinic / "privpub.duckdb")
    assert outcome == "refused" and line in detail["why"]
    assert len(detail["query"]) <= MAX_CHARS + 40  # a long one is kept cut at the bound


# --- issue 42: a free predicate without a grid is decided or refused within about 1 s of CPU -----
def test_a_free_predicate_without_a_grid_is_refused_within_the_default_request_budget(tmp_path):
    """SLOW on the census table, no grid, every limit at its default: denied (before any read)
    after at most DEFAULT_REQUEST_BUDGET units of work (counted, never timed: about 1 s of CPU,
    program.UNITS_PER_CPU_SECOND), its reason naming the budget and what it means; with the check's
    budget raised out of the way, the request budget denies it at that count, and says so."""
    from privpub.tasks.audit.auditor import DEFAULT_BUDGET, DEFAULT_REQUEST_BUDGET
    from privpub.tasks.audit.program import UNITS_PER_CPU_SECOND

    assert DEFAULT_BUDGET <= DEFAULT_REQUEST_BUDGET <= 1.1 * UNITS_PER_CPU_SECOND  # ~1 s, the check inside it
    from privpub.tasks.demo_data import census

    frame = census(300, seed=4)
    frame.to_csv(tmp_path / "census.csv", index=False)
    (tmp_path / "spec.toml").write_text(census_spec_toml(seed=11).replace("[output]", "[audit]\nl = 2\n\n[output]"))
    init_audit(load_spec(tmp_path / "spec.toml"), "steward")
    state = tmp_path / "privpub.duckdb"
    for where in QUICK:
        audit_flow.ask(state, where, "analyst")
    denied = audit_flow.ask(state, SLOW, "analyst")
    work = audit_queries(state)[-1][1]["work"]
    assert denied["budget_hit"] and denied["response"] == "negative-denial" and "ids" not in denied
    assert 0 < work <= DEFAULT_BUDGET + 1  # the check's budget (a MILP's last node may pass it by one)
    assert denied["reason"].startswith(f"the work budget of {DEFAULT_BUDGET} units")
    assert (
        f"refused, deciding this predicate would take more than {DEFAULT_BUDGET} work units (~1 s of CPU)"
        in denied["reason"]
    )
    audit_flow.set_budget(state, "census", "1000000", "steward")  # only the request budget is left
    capped = audit_flow.ask(state, SLOW, "analyst")
    work = audit_queries(state)[-1][1]["work"]
    assert capped["budget_hit"] and DEFAULT_BUDGET < work <= DEFAULT_REQUEST_BUDGET + 1
    assert capped["reason"].startswith(
        f"refused: deciding this predicate would take more than the request budget of {DEFAULT_REQUEST_BUDGET} "
        "work units (~1 s of CPU"
    )
    assert capped["reason"].endswith("`privpub audit set TABLE --request-budget N` raises it")


def test_the_default_request_budget_is_about_a_second_unless_the_budget_was_raised(clinic):  # noqa: F811
    """Without `request_budget`: DEFAULT_REQUEST_BUDGET (~1 s of CPU) with the default budget and
    any budget up to it; a budget raised above it (the clinic spec's 1000) is the ceiling too, so an
    explicit budget is never voided by a default ceiling below it."""
    from privpub.tasks.audit.auditor import DEFAULT_BUDGET, DEFAULT_REQUEST_BUDGET

    spec = (clinic / "clinic.toml").read_text()
    for line, want in (
        ("budget = 1000", 1000),
        ("", DEFAULT_REQUEST_BUDGET),
        (f"budget = {DEFAULT_REQUEST_BUDGET}", DEFAULT_REQUEST_BUDGET),
        (f"budget = {DEFAULT_REQUEST_BUDGET + 1}", DEFAULT_REQUEST_BUDGET + 1),
        ("budget = 1000\nrequest_budget = 50", 50),
    ):
        (clinic / "other.toml").write_text(spec.replace("budget = 1000", line))
        assert audit_flow.audit_settings(load_spec(clinic / "other.toml"))["request_budget"] == want, line
    assert DEFAULT_BUDGET < DEFAULT_REQUEST_BUDGET
