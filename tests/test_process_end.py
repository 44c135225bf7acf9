"""The `privpub` console script ends its process as soon as the command has returned
(flows/cli.py `console_script` -> `end_process`, issue 43 item 4): exit handlers run and output is
flushed, the interpreter's teardown is skipped; while a thread still runs, or a state file is
still open, the ordinary exit does its work as before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import privpub
from privpub.testing import planted_census

# a library's exit handler, os._exit marked when taken, then the console script
SCRIPT = """
import atexit, os, sys, threading, time
from pathlib import Path
marks, case = Path(sys.argv[1]), sys.argv[2]
atexit.register(lambda: (marks / "exit-handler").write_text("ran"))
real_exit = os._exit
def marked_exit(code):
    (marks / "no-teardown").write_text(str(code))
    real_exit(code)
os._exit = marked_exit
if case == "open-state":
    from privpub.state import attached
    held = attached.attach(Path(sys.argv[3]), read_only=True)
from privpub.flows import cli
if case == "thread":  # a thread still running when the command returns
    def late():
        time.sleep(0.2)
        (marks / "thread").write_text("ran")
    command_only = cli.main
    def main_then_thread():
        code = command_only()
        threading.Thread(target=late).start()
        return code
    cli.main = main_then_thread
sys.argv = ["privpub", *sys.argv[4:]]
cli.console_script() if case != "main" else sys.exit(cli.main())
"""


def run(tmp_path: Path, case: str, state: Path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    marks = tmp_path / f"marks-{case}"
    marks.mkdir()
    ran = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(marks), case, str(state), *args], capture_output=True, text=True
    )
    return ran, {p.name for p in marks.iterdir()}


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("end")
    planted_census(300, seed=2).to_csv(folder / "census.csv", index=False)
    (folder / "spec.toml").write_text(
        '[dataset]\nname = "census"\ninput = "census.csv"\nperson_id = "pid"\nsensitive = "occupation"\n'
        'qi = [{ name = "age", kind = "numeric" }, { name = "sex", kind = "categorical" }]\n'
        '[technique]\nname = "generalization"\nk = 5\n[output]\nseed = 1\n'
    )
    privpub.publish(str(folder / "spec.toml"))
    return folder / "privpub.duckdb"


def test_the_process_ends_without_teardown_after_its_exit_handlers_and_output(tmp_path, state):
    ran, marks = run(tmp_path, "plain", state, "history", "--state", str(state))
    assert ran.returncode == 0, ran.stderr
    assert "census-0001" in ran.stdout  # printed, and flushed before the end
    assert marks == {"exit-handler", "no-teardown"}  # the handler ran, then os._exit
    with duckdb.connect(str(state)) as con:  # the state closed: another process may write it
        assert con.execute("SELECT count(*) FROM release_rows").fetchone() == (1,)


def test_the_exit_status_of_a_failed_command_is_kept(tmp_path):
    absent = tmp_path / "absent" / "privpub.duckdb"
    ran, marks = run(tmp_path, "plain", absent, "history", "--state", str(absent))
    assert ran.returncode == 1 and "privpub: error:" in ran.stderr
    assert marks == {"exit-handler", "no-teardown"}


def test_a_thread_still_running_gets_the_ordinary_exit(tmp_path, state):
    ran, marks = run(tmp_path, "thread", state, "history", "--state", str(state))
    assert ran.returncode == 0, ran.stderr
    assert marks == {"exit-handler", "thread"}  # waited for, then the ordinary exit


def test_a_state_file_still_open_gets_the_ordinary_exit(tmp_path, state):
    ran, marks = run(tmp_path, "open-state", state, "history", "--state", str(state))
    assert ran.returncode == 0, ran.stderr
    assert marks == {"exit-handler"}  # the ordinary exit


def closed_pipe(tmp_path: Path, state: Path, case: str) -> tuple[int | None, bytes]:
    """The command run with nobody reading its stdout; its status and stderr."""
    marks = tmp_path / f"marks-{case}"
    marks.mkdir()
    reader = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(marks), case, str(state), "history", "--state", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout is not None
    reader.stdout.close()  # nobody reads: the command's output cannot be written
    _, err = reader.communicate()
    return reader.returncode, err


@pytest.mark.parametrize("case", ["plain", "main"])
def test_a_reader_that_went_away_ends_the_command_quietly(tmp_path, state, case):
    """`privpub history | head -0`: no "internal error (BrokenPipeError)" line, the status a Unix
    tool ends with when its reader has gone (128 + SIGPIPE), through the console script or `main`."""
    status, err = closed_pipe(tmp_path, state, case)
    assert (status, err) == (141, b"")


def test_a_broken_pipe_of_the_commands_own_is_still_an_error(monkeypatch, capsys):
    """A BrokenPipeError while stdout and stderr still have their reader (a pipe to another
    process of the command's) is an internal error, said in one line as any other."""
    from privpub.flows import cli

    def broken(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "load_lazily", lambda target: broken)
    assert cli.main(["history"]) == 1
    assert "privpub: error: internal error (BrokenPipeError)" in capsys.readouterr().err
