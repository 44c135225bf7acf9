"""A process that makes one release and ends keeps the work of a small table in one thread
(tasks/core/threads.py, issue 43 item 4): on two cores the threads' hand-overs of the interpreter
cost the demo more than they saved. Just under FEW_ROWS rows the work runs in the asking thread,
at FEW_ROWS on its threads; a process whose entry did not ask keeps its threads at any size; the
release is the same either way."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from dataclasses import replace

import pytest

from privpub.flows import pipeline
from privpub.schemas.errors import PrivacyRefused
from privpub.state.store import Store
from privpub.tasks.core import threads
from tests.helpers import write_spec
from tests.test_beside import Watching
from tests.test_drivers import _figures, _tables


@pytest.fixture
def one_thread(monkeypatch):
    """This process keeps small work in one thread, as the CLI's entry asks (restored after)."""
    monkeypatch.setattr(threads, "_ONE_THREAD_BELOW", [0])
    threads.keep_small_work_in_one_thread()


def names_on(rows: int) -> set[str]:
    return set(threads.map_on_threads(lambda _: threading.current_thread().name, range(4), 2, rows, "privpub-test"))


def name_beside(rows: int) -> str:
    with threads.beside(rows, "privpub-test") as submit:
        return submit(lambda: threading.current_thread().name).result()


def test_work_just_under_few_rows_runs_in_the_asking_thread(one_thread):
    here = threading.current_thread().name
    assert names_on(threads.FEW_ROWS - 1) == {here}
    assert name_beside(threads.FEW_ROWS - 1) == here


def test_work_of_few_rows_or_more_gets_its_threads(one_thread):
    assert all(name.startswith("privpub-test") for name in names_on(threads.FEW_ROWS))
    assert name_beside(threads.FEW_ROWS).startswith("privpub-test")


def test_without_the_entrys_request_small_work_keeps_its_threads(monkeypatch):
    monkeypatch.setattr(threads, "_ONE_THREAD_BELOW", [0])
    assert all(name.startswith("privpub-test") for name in names_on(1))
    assert name_beside(1).startswith("privpub-test")


@pytest.mark.parametrize("rows", [1, threads.FEW_ROWS])
def test_an_error_beside_is_raised_where_its_result_is_taken(one_thread, rows):
    def broken():
        raise ValueError("broke beside")

    with threads.beside(rows, "privpub-test") as submit:
        future = submit(broken)
        with pytest.raises(ValueError, match="broke beside"):
            future.result()


def test_a_small_publish_starts_no_thread_and_publishes_the_same_release(
    census_dir, tmp_path_factory, one_thread, monkeypatch
):
    """The steps beside the main line and the helpers' pools all run in the main thread; the
    tables and figures equal those of the same publish, with its threads, in another folder."""
    spec = write_spec(census_dir, seed=3)
    other = tmp_path_factory.mktemp("threaded")
    shutil.copy(census_dir / "census.csv", other / "census.csv")
    started: list[str] = []
    real_start = threading.Thread.start

    def noted(thread: threading.Thread) -> None:
        started.append(thread.name)
        real_start(thread)

    with monkeypatch.context() as m:
        m.setattr(threading.Thread, "start", noted)
        driver = Watching()
        one = pipeline.attempt(str(spec), None, None, driver=driver)
    assert started == []
    assert set(driver.threads.values()) == {threading.main_thread().name}
    monkeypatch.setattr(threads, "_ONE_THREAD_BELOW", [0])  # the same publish with its threads
    driver = Watching()
    threaded = pipeline.attempt(str(write_spec(other, seed=3)), None, None, driver=driver)
    assert driver.threads["evaluate"] == "privpub-beside"
    assert _tables(census_dir, one) == _tables(other, threaded)
    assert _figures(census_dir, one) == _figures(other, threaded)


def test_a_small_release_refused_by_verify_leaves_no_staged_file(census_dir, one_thread, monkeypatch):
    """The files staged in the main thread before verify refuses are deleted, as those staged
    beside it are (tests/test_beside.py)."""
    spec = write_spec(census_dir, seed=3)
    failing = pipeline.verify_step

    def refusing(technique, release, spec_, context):
        return [replace(r, passed=False) for r in failing(technique, release, spec_, context)]

    monkeypatch.setattr(pipeline, "verify_step", refusing)
    with pytest.raises(PrivacyRefused):
        pipeline.attempt(str(spec), None, None, driver=Watching())
    assert not (census_dir / "releases" / ".staging").exists()
    assert not list((census_dir / "releases").glob("*"))


def test_an_error_in_a_small_evaluation_fails_the_run_and_discards_the_files(census_dir, one_thread, monkeypatch):
    spec = write_spec(census_dir, seed=3)

    def broken(*args, **kwargs):
        raise ValueError("evaluation broke")

    monkeypatch.setattr(pipeline, "evaluate_step", broken)
    with pytest.raises(ValueError, match="evaluation broke"):
        pipeline.attempt(str(spec), None, None, driver=Watching())
    assert not (census_dir / "releases" / ".staging").exists()
    assert Store(census_dir / "privpub.duckdb").audit_log().outcome.tolist()[-1] == "failed"


# main() as the process's entry; then the rows under which its work keeps to one thread
SCRIPT = """
import sys
from privpub.flows import cli
from privpub.tasks.core import threads
sys.argv = ["privpub", *sys.argv[1:]]
cli.main()
print(threads._ONE_THREAD_BELOW[0])
"""


def one_thread_below(*args: str) -> int:
    ran = subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    return int(ran.stdout.strip().splitlines()[-1])


def test_the_entry_of_a_command_that_makes_a_release_asks_for_it(tmp_path):
    assert one_thread_below("demo", "--dir", str(tmp_path), "--quiet") == threads.FEW_ROWS
    assert one_thread_below("history", "--state", str(tmp_path / "privpub.duckdb")) == 0
