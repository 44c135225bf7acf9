"""Series remedies (issue 29, item 5): `privpub series change SPEC` / `privpub.change_series` change
the [series] settings of a series that keeps its history. The summaries are rebuilt from the stored
groups under the new model, the whole series is re-checked, and the change is kept (one
transaction, an audit row) or refused with the state as it was; publish refusals of the series
check name the earlier releases that combine and the remedies. No Prefect server."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import privpub
from privpub.schemas.errors import InputError, PrivacyRefused, SpecError, StaleHistory, StateError
from privpub.state.failpoints import InjectedFailure
from privpub.state.store import Store
from privpub.tasks.compose.change import rebuild_series
from privpub.tasks.compose.check import SeriesCheck, series_settings
from privpub.tasks.core.microdata import Microdata
from privpub.tasks.techniques.registry import get_technique
from tests.helpers import child_pythonpath, table_query
from tests.test_drivers import _without_a_server
from tests.test_series_composition import PERMANENT, TRANSIENT, frame_and_groups, publish_groups, series_cases, spec_of

ROOT = Path(__file__).resolve().parents[1]
SECRET_VALUES = ["flu", "cancer", "asthma", "employed", "jobless"]  # none may appear in a message


# --- helpers -----------------------------------------------------------------------------------


def state_tables(path: Path) -> dict[str, str]:
    """A sha256 of every table's rows (in a fixed order), the audit log left out."""
    out = {}
    with duckdb.connect(str(path), read_only=True) as con:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        for name in sorted(set(names) - {"audit_log", "releases"}):
            rows = con.execute(f"{table_query(name)} ORDER BY ALL").fetchall()
            out[name] = hashlib.sha256(repr(rows).encode()).hexdigest()
    return out


def canonical_summaries(store: Store, series: str = "s") -> dict:
    """The stored summaries with set ids replaced by the sets' contents (ids are numbering only),
    and every other composition table as stored."""

    def read(con):
        sid = con.execute("SELECT sid FROM compose_head WHERE series = ?", [series]).fetchone()[0]
        people = con.execute(
            "SELECT p.person, p.pkey, p.vkey, p.cohort, p.release, i.min_t, i.min_tc, "
            "(SELECT list((v.value, s.minc) ORDER BY v.value) FROM compose_sets s JOIN compose_values v "
            "ON v.sid = s.sid AND v.vkey = s.vkey WHERE s.sid = p.sid AND s.set_id = p.set_id) "
            "FROM compose_people p JOIN compose_set_info i ON i.sid = p.sid AND i.set_id = p.set_id "
            "WHERE p.sid = ? ORDER BY p.pkey",
            [sid],
        ).fetchall()
        head = con.execute(
            "SELECT series, sid, release_id, release, next_pkey, next_cohort, transient FROM compose_head WHERE sid = ?",
            [sid],
        ).fetchall()
        values = con.execute("SELECT * FROM compose_values WHERE sid = ? ORDER BY vkey", [sid]).fetchall()
        membership = con.execute("SELECT * FROM compose_membership WHERE sid = ? ORDER BY ALL", [sid]).fetchall()
        orphans = con.execute(  # a set nobody points at
            "SELECT count(*) FROM compose_set_info WHERE sid = ? AND set_id NOT IN "
            "(SELECT set_id FROM compose_people WHERE sid = ?)",
            [sid, sid],
        ).fetchone()[0]
        return {"people": people, "head": head, "values": values, "membership": membership, "orphans": orphans}

    return store.query(read)


def audit_rows(state: Path, action: str = "series-change") -> pd.DataFrame:
    log = Store(state).audit_log()
    return log[log.action == action]


def assert_no_secret(text: str, persons: list[str]) -> None:
    for secret in [*persons, *SECRET_VALUES]:
        assert secret not in text, secret


# --- the rebuild equals a series published with the new settings from the start -------------------


@st.composite
def settings_pair(draw):
    """Two [series] settings both models fit the drawn series: the values that change (x, y) are
    transient in both; permanent values may be named transient in either (they never change)."""

    def one():
        extra = draw(st.lists(st.sampled_from(PERMANENT), unique=True, max_size=2))
        model = draw(st.sampled_from(["l", "k"]))
        return {"transient": TRANSIENT + extra, **({"l": draw(st.integers(1, 3))} if model == "l" else {})}

    return one(), one()


# Each example publishes its series twice into fresh state files (1-2 s): `make test` draws
# REBUILT_EXAMPLES, `make test-slow` (marker `slow`) REBUILT_FULL_SWEEP. What else checks a change
# in `make test`: the worked re-check at the threshold and one above, the change under warn, the
# stuck series unblocked from Python and the command line, and the model check's sweep below; the
# REMEDIES mutants are killed without the full sweep (docs/testing.md).
REBUILT_EXAMPLES, REBUILT_FULL_SWEEP = 10, 30


@settings(max_examples=REBUILT_EXAMPLES)
@given(case=series_cases(), pair=settings_pair(), k=st.integers(1, 3), batch=st.sampled_from([1, 2, 10**6]))
def test_the_rebuilt_summaries_are_those_of_the_series_published_with_the_new_settings(
    tmp_path_factory, case, pair, k, batch
):
    """A series published under the old settings, then changed, holds the summaries the same
    groups published from the start under the new settings hold; the change is refused exactly
    when one of those releases would have been refused, and then the state is as it was."""
    check_the_rebuild(tmp_path_factory, case, pair, k, batch)


@pytest.mark.slow
@settings(max_examples=REBUILT_FULL_SWEEP)
@given(case=series_cases(), pair=settings_pair(), k=st.integers(1, 3), batch=st.sampled_from([1, 2, 10**6]))
def test_the_rebuilt_summaries_are_those_of_the_series_published_with_the_new_settings_full_sweep(
    tmp_path_factory, case, pair, k, batch
):
    check_the_rebuild(tmp_path_factory, case, pair, k, batch)


def check_the_rebuild(tmp_path_factory, case: list, pair: tuple[dict, dict], k: int, batch: int) -> None:
    old, new = pair
    technique = {"name": "generalization", "k": k}
    changed = Store(tmp_path_factory.mktemp("changed") / "state.duckdb")
    fresh = Store(tmp_path_factory.mktemp("fresh") / "state.duckdb")
    key = os.urandom(32)  # one pseudonym key for both states: their people then compare by name
    for store in (changed, fresh):
        store.key_path.write_bytes(key)
    refused_from_start, fewest = False, None
    for number, release in enumerate(case, start=1):
        publish_groups(changed, spec_of(old, technique), *frame_and_groups(*release), number)
        results, figures, _ = publish_groups(fresh, spec_of(new, technique), *frame_and_groups(*release), number)
        for result in results:
            refused_from_start |= not result.passed
            fewest = result.value if fewest is None else min(fewest, result.value)
    spec = spec_of(new, technique)
    before = state_tables(changed.path)
    settings_new = series_settings(spec, get_technique(spec))
    if refused_from_start:
        with pytest.raises(PrivacyRefused, match="series change refused"):
            rebuild_series(changed, "s", settings_new, "tester", batch)
        assert state_tables(changed.path) == before
        return
    done = rebuild_series(changed, "s", settings_new, "tester", batch)
    assert done.value == fewest and done.below == 0 and done.releases == len(case)
    assert canonical_summaries(changed) == canonical_summaries(fresh)
    assert canonical_summaries(changed)["orphans"] == 0
    # the next release of either series reads the same summaries and figures
    frame, group = frame_and_groups(*case[0])
    got = [publish_groups(s, spec, frame, group, len(case) + 1)[1].tolist() for s in (changed, fresh)]
    assert got[0] == got[1]


# --- a stuck series unblocked: Python and CLI ---------------------------------------------------------


def months(n: int = 240) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two months of the same people; an employment status, in a second column combined into
    the sensitive value, that changes from one month to the next for some of them."""
    rng = np.random.default_rng(5)
    diagnosis = rng.choice(["flu", "cancer", "asthma"], n)
    status = rng.choice(["employed", "jobless"], n)
    one = pd.DataFrame(
        {
            "pid": [f"person-{i:04d}" for i in range(n)],
            "age": rng.integers(20, 80, n),
            "zip": rng.integers(1000, 1100, n),
            "v": np.where(rng.random(n) < 0.5, diagnosis, status),
        }
    )
    two = one.assign(v=one.v.replace({"employed": "jobless", "jobless": "employed"}))
    return one, two


def month_spec(folder: Path, series: dict | None = None, l: int = 2) -> dict:
    spec = {
        "dataset": {
            "name": "monthly",
            "person_id": "pid",
            "sensitive": "v",
            "qi": [{"name": "age", "kind": "numeric"}, {"name": "zip", "kind": "numeric"}],
        },
        "technique": {"name": "generalization", "k": 5, "l": l},
        "output": {"seed": 7, "dir": str(folder / "releases"), "state": str(folder / "state.duckdb")},
    }
    return {**spec, "series": series} if series else spec


def test_a_series_stuck_on_a_changing_value_is_unblocked_from_python(tmp_path):
    one, two = months()
    persons = one.pid.tolist()
    privpub.publish(one, month_spec(tmp_path))
    with pytest.raises(InputError, match="must be named in \\[series\\] transient.*privpub series change") as err:
        privpub.publish(two, month_spec(tmp_path))
    assert_no_secret(str(err.value), persons)
    changed = month_spec(tmp_path, {"transient": ["employed", "jobless"]})
    with pytest.raises(SpecError, match="a series keeps one list: `privpub series change SPEC`"):
        privpub.publish(two, changed)
    before = Store(tmp_path / "state.duckdb").query(
        lambda con: con.execute("SELECT next_set FROM compose_head").fetchone()[0]
    )

    done = privpub.change_series(changed, actor="steward")
    assert isinstance(done, privpub.SeriesChange)
    assert (done.series, done.model, done.threshold) == ("monthly", "series-composition-l", 2)
    assert (done.releases, done.people, done.value) == (1, 0, None)  # one release: nobody combined yet
    assert (done.transient_before, done.transient_after) == (0, 2)
    assert_no_secret("\n".join(done.lines()) + repr(done), persons)
    head = Store(tmp_path / "state.duckdb").query(
        lambda con: con.execute("SELECT transient, next_set FROM compose_head").fetchone()
    )
    assert json.loads(head[0]) == ["employed", "jobless"] and head[1] > before  # set ids never reused

    release = privpub.publish(two, changed)  # unblocked
    assert release.id.startswith("monthly-0002-")
    assert privpub.verify(release.id, tmp_path / "state.duckdb").attrs["ok"]

    (row,) = audit_rows(tmp_path / "state.duckdb").itertuples()
    assert (row.actor, row.target, row.outcome) == ("steward", "monthly", "changed")
    detail = json.loads(row.detail)
    assert detail["before"] == {"transient": []}
    assert detail["after"] == {
        "transient": ["employed", "jobless"],
        "composition": "refuse",
        "series-composition-l": 2,
    }
    assert (detail["releases"], detail["people"], detail["below"], detail["figure"]) == (1, 0, 0, None)
    assert not any(p in row.detail for p in persons)  # the settings, as the stored spec holds them; no person


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`privpub ARGS` as a user runs it, in a fresh process with no Prefect server anywhere."""
    return _without_a_server(tmp_path, tmp_path, "-m", "privpub.flows.cli", *args)


def test_a_series_stuck_on_a_changing_value_is_unblocked_from_the_command_line(tmp_path):
    one, two = months()
    spec = tmp_path / "spec.toml"

    def write(month: pd.DataFrame, transient: str = "") -> None:
        month.to_csv(tmp_path / "month.csv", index=False)
        spec.write_text(
            '[dataset]\nname = "monthly"\ninput = "month.csv"\nperson_id = "pid"\nsensitive = "v"\n'
            'qi = [{ name = "age", kind = "numeric" }, { name = "zip", kind = "numeric" }]\n'
            '[technique]\nname = "generalization"\nk = 5\nl = 2\n[output]\nseed = 7\n' + transient
        )

    write(one)
    assert cli(tmp_path, "publish", str(spec), "--quiet").returncode == 0
    write(two)
    stuck = cli(tmp_path, "publish", str(spec), "--quiet")
    assert stuck.returncode == 1 and "run `privpub series change SPEC`" in stuck.stderr
    assert_no_secret(stuck.stderr, one.pid.tolist())
    write(two, '[series]\ntransient = ["employed", "jobless"]\n')
    done = cli(tmp_path, "series", "change", str(spec), "--as", "steward")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "series 'monthly' changed: [series] transient 0 -> 2 values; summaries rebuilt from 1 releases",
        "series-composition-l: - (required 2) over 0 people of the series, 0 below",
    ]
    published = cli(tmp_path, "publish", str(spec), "--quiet")
    assert published.returncode == 0 and published.stdout.startswith("monthly-0002-")
    # run again over the two releases (--quiet prints nothing), then refused under a higher l
    assert cli(tmp_path, "series", "change", str(spec), "--quiet").stdout == ""
    last = json.loads(audit_rows(tmp_path / "privpub.duckdb").detail.iloc[-1])
    assert last["releases"] == 2 and last["people"] == len(two) and last["figure"] >= 2
    spec.write_text(spec.read_text().replace("[series]", f"[series]\nl = {last['figure'] + 1}"))
    before = state_tables(tmp_path / "privpub.duckdb")
    refused = cli(tmp_path, "series", "change", str(spec))
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("privpub: error: series change refused: series-composition-l would be ")
    assert "they are in releases #1 (monthly-0001-" in refused.stderr and "#2 (monthly-0002-" in refused.stderr
    assert_no_secret(refused.stderr, one.pid.tolist())
    assert state_tables(tmp_path / "privpub.duckdb") == before
    assert list(audit_rows(tmp_path / "privpub.duckdb").outcome) == ["changed", "changed", "refused"]
    bad = cli(tmp_path, "series", "change", str(tmp_path / "missing.toml"))
    assert bad.returncode == 1 and "spec file not found" in bad.stderr


# --- refused: the state as it was, the releases named, the remedies -------------------------------------


def breach_series(tmp_path: Path) -> Store:
    """Release 1: p0..p3 hold flu, cancer, asthma, flu in one group; release 2 regroups p0 and p1
    with newcomers holding cancer and jobless: p0 and p1 keep {flu, cancer} (2 candidate values)."""
    store = Store(tmp_path / "state.duckdb")
    spec = spec_of({"l": 2})
    one = pd.DataFrame(
        {"pid": ["p0", "p1", "p2", "p3"], "age": [30, 31, 32, 33], "v": ["flu", "cancer", "asthma", "flu"]}
    )
    two = pd.DataFrame(
        {"pid": ["p0", "p1", "p4", "p5"], "age": [30, 31, 40, 41], "v": ["flu", "cancer", "cancer", "jobless"]}
    )
    publish_groups(store, spec, one, np.zeros(4, np.int64), 1)
    publish_groups(store, spec, two, np.zeros(4, np.int64), 2)
    return store


def change_to(store: Store, series: dict, batch: int = 10**6):
    spec = spec_of(series)
    return rebuild_series(store, "s", series_settings(spec, get_technique(spec)), "steward", batch)


@pytest.mark.parametrize("batch", [1, 10**6])
def test_the_re_check_passes_at_the_threshold_and_is_refused_one_above(tmp_path, batch):
    store = breach_series(tmp_path)
    before = state_tables(store.path)
    with pytest.raises(PrivacyRefused) as err:  # l = 3: p0 and p1 keep 2 values
        change_to(store, {"l": 3}, batch)
    message = str(err.value)
    assert message.startswith("series change refused: series-composition-l would be 2, required 3: 2 people")
    assert "they are in releases #1 (?: 2 of them), #2 (?: 2 of them)" in message  # no release rows here
    for remedy in ("keep the series' settings", "a lower [series] l", "[series] transient list", "new series name"):
        assert remedy in message
    assert_no_secret(message, ["p0", "p1", "p4", "p5"])
    assert state_tables(store.path) == before  # nothing changed, not even the set ids
    (row,) = audit_rows(store.path).itertuples()
    assert row.outcome == "refused" and json.loads(row.detail)["below"] == 2

    done = change_to(store, {"l": 2}, batch)  # just inside: the fewest is 2
    assert (done.value, done.below, done.people, done.releases) == (2, 0, 4, 2)
    assert list(audit_rows(store.path).outcome) == ["refused", "changed"]


def test_under_warn_the_change_is_made_and_the_breach_recorded(tmp_path):
    store = breach_series(tmp_path)
    done = change_to(store, {"l": 3, "composition": "warn"})
    assert (done.value, done.below) == (2, 2)
    detail = json.loads(audit_rows(store.path).detail.iloc[-1])
    assert (detail["figure"], detail["below"], detail["after"]["composition"]) == (2, 2, "warn")


def test_a_list_the_stored_values_break_is_refused_naming_the_releases(tmp_path):
    """p0 holds x then y: both must stay transient."""
    store = Store(tmp_path / "state.duckdb")
    spec = spec_of({"transient": ["x", "y"]})
    for number, values in enumerate((["flu", "x"], ["flu", "y"], ["flu", "y"]), start=1):
        frame = pd.DataFrame({"pid": ["p1", "p0"], "age": [1, 2], "v": values})
        publish_groups(store, spec, frame, np.zeros(2, np.int64), number)
    before = state_tables(store.path)
    with pytest.raises(SpecError, match=r"changes between releases .* \(1 times, in releases #2\)") as err:
        change_to(store, {"transient": ["x"]})
    assert_no_secret(str(err.value), ["p0", "p1"])
    assert "'y'" not in str(err.value) and state_tables(store.path) == before
    assert list(audit_rows(store.path).outcome) == ["refused"]
    assert change_to(store, {"transient": ["y", "x", "flu"]}).transient_after == 3  # flu never changes


@example(  # p0: x, y, x; p1 keeps a: both of p0's changes touch one transient value only
    case=[
        ([0, 1], [20, 21], ["x", "a"], [False]),
        ([0, 1], [20, 21], ["y", "a"], [True]),
        ([1, 0], [22, 23], ["a", "x"], [False]),
    ],
    transient=["y", "a"],
)
@settings(max_examples=12)  # each example publishes its series into a fresh state file
@given(case=series_cases(), transient=st.lists(st.sampled_from(TRANSIENT + PERMANENT), unique=True, max_size=3))
def test_the_model_check_of_a_change_counts_the_changes_the_new_list_forbids(tmp_path_factory, case, transient):
    """The stored values against a direct count over the published series: under the new list,
    each time a person's value differs from its value in the previous release it is in, and the
    two are not both on the list, is a change the model forbids, counted at the later release.
    The change is refused exactly when there is one, with their number and releases; otherwise
    it is made (threshold k = 1: the re-check passes whatever the groups)."""
    store = Store(tmp_path_factory.mktemp("model") / "state.duckdb")
    spec = spec_of({"transient": TRANSIENT})
    previous: dict[int, str] = {}  # person -> its value in the last release it was in
    forbidden: dict[int, int] = {}  # release -> changes the new list forbids
    for number, release in enumerate(case, start=1):
        publish_groups(store, spec, *frame_and_groups(*release), number)
        present, _, values, _ = release
        for p, v in zip(present, values):
            if p in previous and previous[p] != v and not (previous[p] in transient and v in transient):
                forbidden[number] = forbidden.get(number, 0) + 1
            previous[p] = v
    before = state_tables(store.path)
    if forbidden:
        named = ", ".join(f"#{r}" for r in sorted(forbidden))
        with pytest.raises(SpecError, match=rf"\({sum(forbidden.values())} times, in releases {named}\)"):
            change_to(store, {"transient": transient})
        assert state_tables(store.path) == before
        assert list(audit_rows(store.path).outcome) == ["refused"]
        return
    done = change_to(store, {"transient": transient})
    assert (done.transient_after, done.releases, done.below) == (len(transient), len(case), 0)


def test_a_series_without_stored_summaries_or_a_serial_spec_is_refused(tmp_path):
    store = Store(tmp_path / "state.duckdb")
    with store.write():
        pass
    with pytest.raises(StateError, match="no stored composition summaries"):
        change_to(store, {"transient": ["x"]})
    assert list(audit_rows(store.path).outcome) == ["refused"]
    with pytest.raises(SpecError, match="guards its own series"):
        privpub.change_series(spec_of({}, {"name": "serial", "l": 2}), store.path)  # a ReleaseSpec
    assert list(audit_rows(store.path).outcome) == ["refused", "refused"]


# --- a release computed from the summaries read before a change -----------------------------------


def test_a_release_computed_before_a_change_is_refused_at_its_commit(tmp_path):
    store = breach_series(tmp_path)
    spec = spec_of({"l": 2})
    frame = pd.DataFrame({"pid": ["p0", "p1", "p2"], "age": [30, 31, 32], "v": ["flu", "cancer", "asthma"]})
    data = Microdata.from_frame(spec, frame)
    check = SeriesCheck(spec, get_technique(spec))
    check.prepare(store, data)  # the summaries read
    check.check(data, np.zeros(3, np.int64), 1)
    change_to(store, {"l": 2})  # rebuilt meanwhile
    before = state_tables(store.path)
    hook = check.commit_hook()
    with store.write() as con:
        con.execute("BEGIN TRANSACTION")
        with pytest.raises(StaleHistory, match="rebuilt \\(privpub series change\\)"):
            hook(con, "s-0003", 3)
        con.execute("ROLLBACK")
    assert state_tables(store.path) == before


def test_a_publish_whose_series_is_changed_while_it_runs_is_refused_and_runs_again(tmp_path, monkeypatch):
    """Through `privpub.publish`: the series' settings are changed (`privpub.change_series`, which
    takes no series lock) after the publish read its summaries and before its partition. The
    publish then fails at its commit with nothing published, the state is the one the change
    left, and the same publish run again is committed over the rebuilt summaries."""
    from privpub.flows import pipeline

    one, two = months()
    spec = month_spec(tmp_path, {"transient": ["employed", "jobless"]})
    privpub.publish(one, spec)
    state = tmp_path / "state.duckdb"
    made = []

    def change_meanwhile(stage: str) -> None:
        if stage == "partition" and not made:
            made.append((privpub.change_series(spec, actor="steward"), state_tables(state)))

    monkeypatch.setattr(pipeline, "failpoint", change_meanwhile)
    with pytest.raises(StaleHistory, match="were rebuilt \\(privpub series change\\) while this release"):
        privpub.publish(two, spec)
    ((change, after_change),) = made
    assert change.releases == 1 and state_tables(state) == after_change  # the commit wrote nothing
    assert len(Store(state).history()) == 1 and len(list((tmp_path / "releases").iterdir())) == 1

    release = privpub.publish(two, spec)  # run again: read from the rebuilt summaries
    assert release.id.startswith("monthly-0002-") and state_tables(state) != after_change
    assert privpub.verify(release.id, state).attrs["ok"]


# --- a failure or a kill in the middle leaves the series as it was -----------------------------------------


def test_a_failure_inside_the_change_leaves_the_old_state(tmp_path, monkeypatch):
    store = breach_series(tmp_path)
    before, summaries = state_tables(store.path), canonical_summaries(store)
    monkeypatch.setenv("PRIVPUB_FAIL_AT", "series-change")
    with pytest.raises(InjectedFailure):
        change_to(store, {"transient": ["jobless"]})
    assert state_tables(store.path) == before and canonical_summaries(store) == summaries
    (row,) = audit_rows(store.path).itertuples()
    assert row.outcome == "failed" and json.loads(row.detail)["error"] == "InjectedFailure"


def test_a_change_killed_before_its_commit_leaves_the_old_state(tmp_path):
    one, two = months()
    spec = month_spec(tmp_path)
    privpub.publish(one, spec)
    privpub.publish(one, spec, overrides={"output": {"seed": 8}}, allow_repeat=True)  # the same people again
    path = tmp_path / "spec.toml"
    path.write_text(
        '[dataset]\nname = "monthly"\ninput = "<DataFrame>"\nperson_id = "pid"\nsensitive = "v"\n'
        'qi = [{ name = "age", kind = "numeric" }, { name = "zip", kind = "numeric" }]\n'
        '[technique]\nname = "generalization"\nk = 5\nl = 2\n'
        f'[output]\nstate = "{tmp_path / "state.duckdb"}"\n[series]\ntransient = ["employed", "jobless"]\n'
    )
    before = state_tables(tmp_path / "state.duckdb")
    flag = tmp_path / "paused"
    env = {
        **os.environ,
        "PYTHONPATH": child_pythonpath(ROOT),
        "PRIVPUB_PAUSE_AT": "series-change",
        "PRIVPUB_PAUSE_FLAG": str(flag),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "privpub.flows.cli", "series", "change", str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert state_tables(tmp_path / "state.duckdb") == before
    assert audit_rows(tmp_path / "state.duckdb").empty  # the row was in the transaction
    assert privpub.change_series(path).releases == 2  # run again, it is made
    assert privpub.publish(two, month_spec(tmp_path, {"transient": ["employed", "jobless"]})).startswith(
        "monthly-0003-"
    )


# --- the publish refusal says which earlier releases combine and what can be done ----------------------


def test_a_publish_refused_by_the_series_check_names_the_releases_and_the_remedies(tmp_path):
    from privpub.tasks.demo_data import census, census_spec

    pool = census(1500, seed=1).assign(pid=[f"person-{i:05d}" for i in range(1500)])
    spec = census_spec("unused", k=10, l=3, seed=7, output_dir=str(tmp_path / "out"), state=str(tmp_path / "s.duckdb"))
    del spec["dataset"]["input"]
    first = privpub.publish(pool.sample(frac=0.9, random_state=0), spec)
    with pytest.raises(PrivacyRefused) as err:
        privpub.publish(pool.sample(frac=0.9, random_state=1), spec)
    message = str(err.value)
    head, _, note = message.partition("; the ")
    assert head.startswith("release refused, privacy check failed: series-composition-l reached ")
    below = json.loads(Store(tmp_path / "s.duckdb").audit_log().detail.iloc[-1])["series-composition-l"]["worst"]
    assert note.startswith(f"{below['below']} people below 3 were also in earlier releases #1 ({first.id}: ")
    assert f"#1 ({first.id}: {below['below']} of them)" in note  # every one of them returned from #1
    for remedy in ("[series] keep_groups = true", "a lower [series] l", "privpub series change SPEC", "new series"):
        assert remedy in note
    assert "person-" not in message and "occ-" not in message  # no person id, no sensitive value
