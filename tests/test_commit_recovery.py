"""Between a release's COMMIT and its files' rename into place (issue 41, item 2): whatever fails
or is killed there, the release stands, the user is told the truth, the next writer moves the
files, and no later publish of any series fails for it (state/store.py, its docstring).

Each failure point is driven through a fresh `privpub` process (failpoints of
state/failpoints.py), then another series is published and every release verified. The kill at
"after-commit" (before the owner's lock is released) is test_hardening's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from privpub.state.store import Store, published_sha256
from tests.helpers import census_spec_toml, child_pythonpath
from tests.test_hardening import good_frame
from tests.test_store import _commit

ROOT = Path(__file__).resolve().parents[1]
PRIVPUB = [sys.executable, "-m", "privpub.flows.cli"]

# main's commit before issue 41 (no name rule; a rename failing after the COMMIT raised): run in
# a child to make the state its bug left (a committed row, its files stuck in .staging)
OLD_PRIVPUB = textwrap.dedent(
    """
    import contextlib, os, sys
    import privpub.schemas.spec as spec
    import privpub.state.store as store
    from privpub.state.permissions import as_published

    if hasattr(spec, "name_problem"):
        spec.name_problem = lambda name: None
    if hasattr(store, "_release_folder"):
        store._release_folder = lambda *args: None

    def make_visible(staged, release_id):
        staged.release_owner()
        (staged.path / ".owner").unlink(missing_ok=True)
        as_published(staged.path)
        os.rename(staged.path, staged.output_dir / release_id)
        with contextlib.suppress(OSError):
            (staged.output_dir / store.STAGING).rmdir()

    def roll_forward(staged, out, release_id):  # the recovery's, as it was
        (staged / ".owner").unlink(missing_ok=True)
        as_published(staged)
        os.rename(staged, out / release_id)

    store._make_visible = make_visible
    if hasattr(store, "_roll_forward"):
        store._roll_forward = roll_forward
        store._placed = lambda out, release_id: (out / release_id).exists()
    from privpub.flows.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


def _env(folder: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "PRIVPUB_FAIL", "PRIVPUB_PAUSE"))}
    return {**env, "PYTHONPATH": child_pythonpath(ROOT), "PRIVPUB_HOME": str(folder / "home"), **extra}


def _spec(folder: Path, series: str) -> str:
    """A spec file of `series` over the folder's census.csv (TOML escapes: a NUL as \\u0000)."""
    name = series.replace("\0", "\\u0000")
    path = folder / f"spec-{len(list(folder.glob('spec-*.toml')))}.toml"
    path.write_text(census_spec_toml(seed=11).replace('name = "census"', f'name = "{name}"'))
    return path.name


def _privpub(folder: Path, *args: str, old: bool = False, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", OLD_PRIVPUB] if old else PRIVPUB
    return subprocess.run(
        [*command, *args], cwd=folder, env=_env(folder, **env), capture_output=True, text=True, timeout=240
    )


def _folder(tmp_path: Path) -> Path:
    good_frame().to_csv(tmp_path / "census.csv", index=False)
    return tmp_path


def _rows(folder: Path) -> list[tuple[str, str]]:
    with duckdb.connect(str(folder / "privpub.duckdb"), read_only=True) as con:
        return con.execute("SELECT release_id, series FROM release_rows ORDER BY created_at").fetchall()


def _outcomes(folder: Path) -> list[str]:
    with duckdb.connect(str(folder / "privpub.duckdb"), read_only=True) as con:
        return [r[0] for r in con.execute("SELECT outcome FROM audit_log ORDER BY id").fetchall()]


def _all_verify(folder: Path, release_ids) -> None:
    for rid in release_ids:
        done = _privpub(folder, "verify", rid)
        assert done.returncode == 0, (rid, done.stdout, done.stderr)
        assert (folder / "releases" / rid / "report.html").is_file()


def _next_publish_repairs(folder: Path, killed: str) -> None:
    """Another series publishes (exit 0, one id on stdout); the earlier release's files are in
    place; nothing is left staged; every release verifies."""
    done = _privpub(folder, "publish", _spec(folder, "other"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "error" not in done.stderr and done.stdout.strip().startswith("other-0001-"), done.stdout
    assert (folder / "releases" / killed / "table.parquet").is_file()
    assert not (folder / "releases" / ".staging").exists()
    ids = [rid for rid, _ in _rows(folder)]
    assert ids[0] == killed and len(ids) == 2
    _all_verify(folder, ids)


@pytest.mark.parametrize("stage", ["after-commit", "rename"])
def test_a_failure_between_commit_and_rename_is_told_truthfully_and_repaired(tmp_path, stage):
    """The rename fails (or anything after the COMMIT): before, the CLI said "internal error ...
    nothing was published" (exit 1) of a committed release. Now: its id, one warning saying it is
    committed and where its files wait, exit 0, one audit row; the next writer moves them."""
    folder = _folder(tmp_path)
    done = _privpub(folder, "publish", _spec(folder, "census"), "--quiet", PRIVPUB_FAIL_AT=stage)
    assert done.returncode == 0, done.stderr
    rid = done.stdout.strip()
    assert rid.startswith("census-0001-") and "nothing was published" not in done.stderr
    assert f"warning: release {rid} is committed, but its files could not be moved" in done.stderr
    assert "each privpub command that writes this state tries again" in done.stderr
    assert [r for r, _ in _rows(folder)] == [rid] and _outcomes(folder) == ["committed"]
    assert not (folder / "releases" / rid).exists()  # waiting in .staging, as the warning says
    assert len(list((folder / "releases" / ".staging").iterdir())) == 1
    _next_publish_repairs(folder, rid)


@pytest.mark.parametrize("stage", ["rename", "renamed"])
def test_a_kill_just_before_or_after_the_rename_leaves_a_usable_state(tmp_path, stage):
    folder = _folder(tmp_path)
    flag = tmp_path / "paused.flag"
    proc = subprocess.Popen(
        [*PRIVPUB, "publish", _spec(folder, "census"), "--quiet"],
        cwd=folder,
        env=_env(folder, PRIVPUB_PAUSE_AT=stage, PRIVPUB_PAUSE_FLAG=str(flag)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    while proc.poll() is None and not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert flag.exists(), f"publish ended before reaching {stage}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    [(rid, _)] = _rows(folder)  # committed before the kill
    assert (folder / "releases" / rid).is_dir() == (stage == "renamed")
    _next_publish_repairs(folder, rid)


def test_a_state_left_by_a_slash_in_a_series_name_is_repaired(tmp_path):
    """The tester's reproducer on the code before issue 41: `name = "a/b"` committed its row,
    the rename failed, and every later publish to the state, of any series, failed with
    `internal error (FileNotFoundError)`. The next writer now moves the files into
    <dir>/a/b-0001-... (under the output folder), and the release verifies."""
    folder = _folder(tmp_path)
    old = _privpub(folder, "publish", _spec(folder, "a/b"), "--quiet", old=True)
    assert old.returncode == 1 and "FileNotFoundError" in old.stderr, old.stderr  # the bug, reproduced
    [(poisoned, _)] = _rows(folder)
    assert poisoned.startswith("a/b-0001-") and (folder / "releases" / ".staging").is_dir()
    done = _privpub(folder, "publish", _spec(folder, "census"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert (folder / "releases" / poisoned / "table.parquet").is_file()
    assert not (folder / "releases" / ".staging").exists()
    _all_verify(folder, [rid for rid, _ in _rows(folder)])
    assert _privpub(folder, "history").returncode == 0


@pytest.mark.parametrize("series", ["cen\0sus", "c" * 1000], ids=["a NUL", "1,000 characters"])
def test_a_state_left_by_an_unplaceable_series_name_no_longer_stops_publishing(tmp_path, series):
    """A name no folder can carry (a NUL, 1,000 characters): its committed files cannot be moved
    anywhere its id names, so they stay in .staging, said in one warning line by each writer,
    and every other series publishes and verifies."""
    folder = _folder(tmp_path)
    old = _privpub(folder, "publish", _spec(folder, series), "--quiet", old=True)
    assert old.returncode == 1, old.stderr
    [(poisoned, _)] = _rows(folder)
    for spec in (_spec(folder, "census"), _spec(folder, "other")):
        done = _privpub(folder, "publish", spec, "--quiet")
        assert done.returncode == 0, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "warning: release " in lines[0] and "is committed" in lines[0], lines
        assert "\0" not in done.stderr and len(lines[0]) < 600
    assert len(list((folder / "releases" / ".staging").iterdir())) == 1  # the poisoned one only
    placed = [rid for rid, _ in _rows(folder) if rid != poisoned]
    assert [r.split("-")[0] for r in placed] == ["census", "other"]
    _all_verify(folder, placed)


def test_the_store_places_the_files_its_failed_rename_left(tmp_path, monkeypatch, capsys):
    """In process: Store.commit_release whose rename fails returns the committed id (no
    exception after the COMMIT), a recovery that fails too stops no writer, and the first
    writer that can moves the files, whose fingerprint is the one committed."""
    store, out = Store(tmp_path / "state.duckdb"), tmp_path / "out"
    monkeypatch.setenv("PRIVPUB_FAIL_AT", "rename")
    rid, created = _commit(store, out, key="a", series="a")
    assert created and not (out / rid).exists() and "is committed" in capsys.readouterr().err
    rid2, _ = _commit(store, out, key="b", series="b", token_table=pa.table({"x": [4]}))  # its recovery fails
    assert store.history().release_id.tolist() == [rid, rid2]
    assert len(list((out / ".staging").iterdir())) == 2
    monkeypatch.delenv("PRIVPUB_FAIL_AT")
    with store.write():
        pass
    assert sorted(p.name for p in out.iterdir()) == sorted([rid, rid2])
    for r in (rid, rid2):
        [committed] = store.release(r)["tables"].sha256
        assert published_sha256(out / r / "table.parquet") == committed
