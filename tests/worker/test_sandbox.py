"""sandbox.py: the user's files are never modified, each run starts from them, and what
a killed reduction left behind is swept (its own sessions only).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from shrinkgpu.worker import Sandbox
from worker.helpers import run, snapshot

# -- the user's files are never modified -----------------------------------------------
VANDAL = """\
import os, shutil
with open("data.txt", "r+b") as fh:   # in place, same size: only mtime tells
    fh.write(b"ORIGINAL")
with open("keep.bin", "wb") as fh:     # truncate and rewrite in place
    fh.write(b"gone")
os.remove("old.txt")
open("new.txt", "w").write("made by a candidate")
os.mkdir("outputs")
open("../helper.py", "a").write("VALUE = 0\\n")
shutil.rmtree("../mypkg")
print(open("data.txt").read(), end="")
"""


def test_a_script_that_vandalises_its_cwd_leaves_the_users_directory_byte_identical(
    fork_runner, project, pristine
):
    obs = run(fork_runner, VANDAL)
    assert obs.status == "ok" and obs.stdout == "ORIGINAL data\n"
    assert snapshot(project) == pristine
    # The next run sees the user's files again: the template was repaired.
    obs = run(
        fork_runner,
        """\
        import os, helper
        print(sorted(os.listdir(".")), os.path.isdir("../mypkg"), helper.VALUE)
        print(open("data.txt").read(), end="")
        print(open("keep.bin", "rb").read() == bytes(range(256)) * 4)
        """,
    )
    assert obs.stdout == "['data.txt', 'keep.bin', 'old.txt'] True 41\noriginal data\nTrue\n"


def test_each_run_starts_from_the_users_files_whatever_the_run_before_left(fork_runner, project):
    # Run directories are reset and used again: what a run made (a file, a directory, a
    # cached module, its temporary files), replaced or removed is gone for the next one.
    text = """\
        import os, tempfile
        print(sorted(os.listdir(".")), sorted(os.listdir("..")), os.listdir(tempfile.gettempdir()))
        open("mine.txt", "w").write("x")
        os.mkdir("outputs"); open("outputs/ckpt.pt", "w").write("x")
        os.makedirs("../mypkg/__pycache__", exist_ok=True)
        open(os.path.join(tempfile.gettempdir(), "scratch"), "w").write("x")
        os.remove("data.txt"); open("data.txt", "w").write("replaced")
        os.remove("../helper.py"); os.symlink("/etc/hostname", "../helper.py")
        """
    first, second = (run(fork_runner, text) for _ in range(2))
    assert first.status == second.status == "ok", second.describe()
    assert first.stdout == second.stdout == ("['data.txt', 'keep.bin', 'old.txt'] ['helper.py', 'mypkg', 's.py', "
                                             "'work'] []\n")
    assert run(fork_runner, "print(open('data.txt').read(), end='')").stdout == "original data\n"
    assert not (project / "work" / "mine.txt").exists() and not (project / "work" / "outputs").exists()


def test_a_mode_change_on_a_linked_file_does_not_reach_the_next_run(fork_runner):
    stat_mode = "import os, stat; print(oct(stat.S_IMODE(os.stat('data.txt').st_mode)))"
    try:
        assert run(fork_runner, stat_mode).stdout == "0o644\n"
        run(fork_runner, "import os; os.chmod('data.txt', 0o600)")
        assert run(fork_runner, stat_mode).stdout == "0o644\n"
    finally:
        run(fork_runner, "import os; os.chmod('data.txt', 0o644)")


# -- what a killed reduction left behind ------------------------------------------------
def test_a_session_whose_owner_died_is_swept_and_no_other(tmp_path, monkeypatch):
    import tempfile

    from shrinkgpu.worker import Sandbox, sweep_stale_sessions

    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "s.py").write_text("pass\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    live = Sandbox(tmp_path / "root")  # this process owns it: kept
    dead = Sandbox(tmp_path / "root")
    kept = Sandbox(tmp_path / "root", keep=True)
    kept.close()  # kept on purpose (--keep-temp): kept
    # The owner of ``dead`` is a process that has ended (its pid, another start time).
    ended = subprocess.Popen(["true"])
    ended.wait()
    (dead.session / "owner").write_text(f"{ended.pid} 12.00")
    (dead.template / "big.bin").write_bytes(b"x" * 5000)
    unrelated = tmp_path / "shrinkgpu-notes"
    unrelated.mkdir()
    removed = sweep_stale_sessions(tmp_path)
    assert [p for p, _ in removed] == [dead.session] and removed[0][1] >= 5000
    assert not dead.session.exists()
    assert live.session.exists() and kept.session.exists() and unrelated.exists()
    live.close()
    assert not live.session.exists()


def test_a_live_session_is_not_swept_when_the_clock_is_stepped(tmp_path, monkeypatch):
    # psutil's create_time is the boot's wall-clock time plus the process's ticks: a
    # stepped clock (NTP, a resumed virtual machine) moves it, and a live reduction's
    # session was swept by another's start (its files vanished mid-run)
    import tempfile

    from shrinkgpu.worker import Sandbox, sweep_stale_sessions

    if not sys.platform.startswith("linux"):
        pytest.skip("the start in clock ticks is Linux's")
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "s.py").write_text("pass\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    live = Sandbox(tmp_path / "root")
    stepped = psutil.Process.create_time
    monkeypatch.setattr(psutil.Process, "create_time", lambda self: stepped(self) + 3.0)
    assert sweep_stale_sessions(tmp_path) == []
    assert (live.template).is_dir()
    live.close()


@pytest.fixture(scope="module")
def data_project(tmp_path_factory) -> Path:
    """A script with 64 KiB of data beside it."""
    root = tmp_path_factory.mktemp("forkproject")
    (root / "s.py").write_text("pass\n")
    (root / "data.bin").write_bytes(os.urandom(1 << 16))
    return root


def test_a_virtual_environment_of_any_name_is_not_copied(tmp_path):
    # ``.ci-venv``, ``env``: what makes a directory a virtual environment is its
    # pyvenv.cfg, and copying one (torch included) for every reduction costs gigabytes.
    (tmp_path / "s.py").write_text("pass\n")
    for name in (".ci-venv", "env"):
        (tmp_path / name / "lib").mkdir(parents=True)
        (tmp_path / name / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (tmp_path / name / "lib" / "big.py").write_text("x = 1\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "labels.txt").write_text("1\n")
    sandbox = Sandbox(tmp_path)
    try:
        copied = {p.relative_to(sandbox.template).as_posix() for p in sandbox.template.rglob("*") if p.is_file()}
    finally:
        sandbox.close()
    assert copied == {"s.py", "data/labels.txt"}


def test_files_beside_the_script_are_linked_from_one_copy_never_copied_again(data_project):
    sandbox = Sandbox(data_project)
    try:
        template = sandbox.template / "data.bin"
        inode = template.stat().st_ino
        for _ in range(3):
            run = sandbox.prepare({"s.py": "pass\n"})
            assert (run.root / "data.bin").stat().st_ino == inode  # a link, not a copy
            sandbox.release(run)
        assert template.stat().st_ino == inode  # not copied again after any run
        # A run that writes into the linked file does get the template repaired.
        run = sandbox.prepare({"s.py": "pass\n"})
        with open(run.root / "data.bin", "ab") as fh:
            fh.write(b"vandal")
        sandbox.release(run)
        assert template.read_bytes() == (data_project / "data.bin").read_bytes()
    finally:
        sandbox.close()
    assert not sandbox.session.exists()


def test_a_file_added_after_a_run_is_in_the_reused_directory_of_the_next(data_project, tmp_path):
    # The saved state and a call's arguments are added once the search has run candidates:
    # a run directory reset before that must get them too (a replay found no state file).
    saved = tmp_path / "state.pt"
    saved.write_bytes(b"state")
    sandbox = Sandbox(data_project)
    try:
        run = sandbox.prepare({"s.py": "pass\n"})
        first = run.path
        sandbox.release(run)
        sandbox.add_file("train.min.state.pt", saved)
        sandbox.add_file("train.min.state.files/runs/best.pt", saved)
        run = sandbox.prepare({"s.py": "pass\n"})
        assert run.path == first  # reused, not made again
        assert (run.root / "train.min.state.pt").read_bytes() == b"state"
        assert (run.root / "train.min.state.files" / "runs" / "best.pt").read_bytes() == b"state"
        sandbox.release(run)
    finally:
        sandbox.close()
