"""Steps beside the main line (issue 43, flows/beside.py): under the plain driver the evaluation
and the published files run on threads of their own; the release is the one the
steps make one after the other (tests/test_drivers.py pins its bytes), and a refused or failed
run leaves no thread running and no staged file behind."""

from __future__ import annotations

import shutil
import threading
from dataclasses import replace

import pandas as pd
import pytest

from privpub.flows import pipeline
from privpub.flows.beside import done_now
from privpub.schemas.errors import PrivacyRefused
from privpub.state.store import Store
from tests.helpers import write_spec
from tests.test_drivers import _figures, _tables  # the release's files and figures, as compared there


class Watching(pipeline.Driver):
    """The plain driver, noting the thread each step ran on."""

    def __init__(self):
        super().__init__(None)
        self.threads: dict[str, str] = {}

    def run(self, name, fn, *args):
        self.threads[name] = threading.current_thread().name
        return super().run(name, fn, *args)


class OneAfterTheOther(Watching):
    overlaps = False

    def beside(self, name, fn, *args):
        return done_now(lambda: self.run(name, fn, *args))


def _beside_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == "privpub-beside"]


def test_the_evaluation_and_files_run_beside_and_the_release_is_the_same(census_dir):
    """The two steps run off the main thread; the release published one step after the other
    (a driver that does not overlap) has the same files and figures."""
    spec = write_spec(census_dir, seed=3)
    beside = Watching()
    first = pipeline.attempt(str(spec), None, None, driver=beside)
    main = threading.main_thread().name
    assert {beside.threads[s] for s in ("evaluate", "stage-files")} == {"privpub-beside"}
    assert {beside.threads[s] for s in ("partition", "anonymize", "verify", "risk", "commit")} == {main}
    one_by_one = OneAfterTheOther()
    second = pipeline.attempt(str(spec), None, None, driver=one_by_one, new_release=True, allow_repeat=True)
    assert set(one_by_one.threads.values()) == {main}
    assert _tables(census_dir, first) == _tables(census_dir, second)
    assert _figures(census_dir, first) == _figures(census_dir, second)
    assert not _beside_threads()


def test_a_release_refused_by_verify_leaves_no_thread_and_no_staged_file(census_dir):
    """The verifier made to fail while the evaluation and the files are under way beside it: the
    run is refused once both have ended, and the staged files are deleted."""
    spec = write_spec(census_dir, seed=3)
    failing = pipeline.verify_step

    def refusing(technique, release, spec_, context):
        results = failing(technique, release, spec_, context)
        return [replace(r, passed=False) for r in results]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline, "verify_step", refusing)
        with pytest.raises(PrivacyRefused):
            pipeline.attempt(str(spec), None, None, driver=Watching())
    assert not _beside_threads()
    assert not (census_dir / "releases" / ".staging").exists()
    assert not list((census_dir / "releases").glob("*"))  # no release folder either


def test_an_error_beside_is_raised_and_the_staged_files_discarded(census_dir):
    """An error in the evaluation (on its thread) fails the run with that error; the files staged
    beside it are deleted and no thread is left."""
    spec = write_spec(census_dir, seed=3)

    def broken(*args):
        raise ValueError("evaluation broke")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline, "evaluate_step", broken)
        with pytest.raises(ValueError, match="evaluation broke"):
            pipeline.attempt(str(spec), None, None, driver=Watching())
    assert not _beside_threads()
    assert not (census_dir / "releases" / ".staging").exists()
    rows = Store(census_dir / "privpub.duckdb").audit_log()
    assert rows.outcome.tolist()[-1] == "failed"


def test_the_input_figures_are_computed_beside_the_partition(census_dir):
    """The workload and the input's risk figures read the input only: drawn beside the partition
    (the release equals the one-by-one driver's: the first test of this file)."""
    spec = write_spec(census_dir, seed=3)
    beside = Watching()
    pipeline.attempt(str(spec), None, None, driver=beside)
    assert beside.threads["input-figures"] == "privpub-beside"
    assert beside.threads["partition"] == threading.main_thread().name
    assert not _beside_threads()


def test_an_error_in_the_input_figures_fails_the_run_and_leaves_no_thread(census_dir):
    spec = write_spec(census_dir, seed=3)

    def broken(*args):
        raise ValueError("input figures broke")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline, "input_figures", broken)
        with pytest.raises(ValueError, match="input figures broke"):
            pipeline.attempt(str(spec), None, None, driver=Watching())
    assert not _beside_threads()
    assert not (census_dir / "releases" / ".staging").exists()
    assert Store(census_dir / "privpub.duckdb").audit_log().outcome.tolist()[-1] == "failed"


def test_a_failed_partition_waits_for_the_input_figures(census_dir):
    """The partition fails while the input figures are computed beside it: the run fails with
    the partition's error once they have ended."""
    spec = write_spec(census_dir, seed=3)
    started = threading.Event()
    real = pipeline.input_figures

    def slow(*args):
        started.set()
        return real(*args)

    def broken(*args):
        started.wait()
        raise RuntimeError("partition broke")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline, "input_figures", slow)
        mp.setattr(pipeline, "partition_step", broken)
        with pytest.raises(RuntimeError, match="partition broke"):
            pipeline.attempt(str(spec), None, None, driver=Watching())
    assert not _beside_threads()


def test_two_threads_asking_for_a_columns_codes_code_it_once(monkeypatch):
    """verify and the evaluation beside it ask for the same published column at once: coded once,
    the second waits for the first's codes; an error reaches both and nothing is kept."""
    import numpy as np
    import pyarrow as pa

    from privpub.tasks.verify import published

    calls: list[str] = []
    gate = threading.Event()
    real = published._cell_codes

    def slow(column):
        calls.append(threading.current_thread().name)
        gate.wait(5)
        return real(column)

    monkeypatch.setattr(published, "_cell_codes", slow)
    table = pa.table({"x": pa.array([["a"], ["b", "c"], ["a"]])})
    got: dict[str, np.ndarray] = {}
    threads = [
        threading.Thread(target=lambda n=n: got.__setitem__(n, published.column_codes(table, "x")), name=n)
        for n in ("one", "two")
    ]
    for t in threads:
        t.start()
    while not calls:
        threading.Event().wait(0.01)
    gate.set()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert got["one"] is got["two"]
    assert got["one"].tolist() == [0, 1, 0]

    def failing(column):
        calls.append("failing")
        gate.wait(5)
        raise ValueError("cannot code")

    monkeypatch.setattr(published, "_cell_codes", failing)
    gate.clear()
    other = pa.table({"x": pa.array([["a"]])})
    errors: list[BaseException] = []

    def ask():
        try:
            published.column_codes(other, "x")
        except ValueError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    while "failing" not in calls:
        threading.Event().wait(0.01)
    gate.set()
    for t in threads:
        t.join()
    assert len(errors) == 2  # (once or twice: the second may ask after the first failed)
    assert not any(k[0] == id(other) for k in published._CODES) and not published._CODING


def test_a_release_the_commit_recognises_takes_its_evaluation_and_leaves_no_thread(census_dir):
    """The same release committed meanwhile (the run's own early look missed it): the commit
    recognises it while the evaluation still runs beside; the run returns that release."""
    spec = write_spec(census_dir, seed=3)
    first = pipeline.attempt(str(spec), None, None, driver=Watching())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Store, "find_by_key", lambda self, key: None)
        again = pipeline.attempt(str(spec), None, None, driver=Watching(), allow_repeat=True)
    assert again == first
    assert not _beside_threads()
    assert Store(census_dir / "privpub.duckdb").audit_log().outcome.tolist()[-1] == "recognised"


def test_the_series_composition_runs_beside_anonymize_with_the_same_figures(census_dir, tmp_path_factory):
    """Issue 43: the series composition reads the partition and the input only, so it starts
    beside anonymize (which leaves a core idle); a second release of the series gets the
    composition figure the one-by-one driver computes after verify."""
    spec = write_spec(census_dir, seed=3)
    pipeline.attempt(str(spec), None, None, driver=Watching())
    later = pd.read_csv(census_dir / "census.csv")  # the same people a year on
    later["age"] = later["age"] + 1
    later.to_csv(census_dir / "census.csv", index=False)
    copy = tmp_path_factory.mktemp("copy") / "series"
    shutil.copytree(census_dir, copy)
    beside = Watching()
    second = pipeline.attempt(str(spec), None, None, driver=beside)
    assert beside.threads["series-composition"] == "privpub-beside"
    one_by_one = OneAfterTheOther()
    alone = pipeline.attempt(str(write_spec(copy, seed=3)), None, None, driver=one_by_one)
    assert one_by_one.threads["series-composition"] == threading.main_thread().name
    figures = _figures(census_dir, second)
    assert any(name == "series-composition-l" for _, name, *_ in figures)
    assert figures == _figures(copy, alone) and _tables(census_dir, second) == _tables(copy, alone)
    assert not _beside_threads()


@pytest.mark.parametrize("failing", ["anonymize_step", "composition_step"])
def test_a_failure_beside_the_series_composition_fails_the_run_and_leaves_no_thread(census_dir, failing):
    """anonymize fails while the series composition runs beside it (the run fails with
    anonymize's error once the composition has ended), or the composition itself fails (its
    error is the run's, taken after verify): no thread left, nothing staged, the audit row "failed"."""
    spec = write_spec(census_dir, seed=3)
    started, real = threading.Event(), pipeline.composition_step

    def composing(*args):
        started.set()
        if failing == "composition_step":
            raise ValueError(f"{failing} broke")
        return real(*args)

    def anonymizing(*args):
        started.wait()
        raise ValueError(f"{failing} broke")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pipeline, "composition_step", composing)
        if failing == "anonymize_step":
            mp.setattr(pipeline, "anonymize_step", anonymizing)
        with pytest.raises(ValueError, match=f"{failing} broke"):
            pipeline.attempt(str(spec), None, None, driver=Watching())
    assert started.is_set() and not _beside_threads()
    assert not (census_dir / "releases" / ".staging").exists()
    assert Store(census_dir / "privpub.duckdb").audit_log().outcome.tolist()[-1] == "failed"
