"""supervisor.py with real processes: timeouts and crashes, no process outlives its
run, preloading that drops what would make forking unsafe, the child forked ahead of
need, and closing.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from shrinkgpu.signature import Family
from shrinkgpu.worker import Isolation, Runner, ScriptSpec
from worker.helpers import ENV, run, script


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids, timeout: float = 2.0) -> list[int]:
    """Poll until every pid has ended (or is a zombie); return those still alive."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if not gone(p)]
        if alive:
            time.sleep(0.05)
    return [p for p in alive if not gone(p)]


def read_pids(path: Path, count: int, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pids = [int(x) for x in path.read_text().split()]
        except (FileNotFoundError, ValueError):
            pids = []
        if len(pids) == count:
            return pids
        time.sleep(0.02)
    raise AssertionError(f"{path} never held {count} pids")


def kill_quietly(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if not gone(p.pid)}


@pytest.fixture(scope="module")
def plain_runner(tmp_path_factory):
    """A fork server without torch, for process-tree tests (starts in ~0.1 s)."""
    root = tmp_path_factory.mktemp("plain")
    (root / "s.py").write_text("pass\n")
    spec = ScriptSpec(script=root / "s.py", cwd=root, env=ENV)
    with Runner(spec, capture_ops=False) as runner:
        runner.start()
        yield runner


@pytest.fixture(scope="module")
def libdir(tmp_path_factory) -> Path:
    lib = tmp_path_factory.mktemp("lib")
    (lib / "threadmod.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(100,), daemon=True).start()\n"
    )
    (lib / "envmod.py").write_text("import os\nos.environ['ENVMOD_WAS_HERE'] = '1'\n")
    return lib


@pytest.fixture(scope="module")
def preload_runner(tmp_path_factory, libdir):
    """A fork server asked to preload a module that starts a thread at import time."""
    root = tmp_path_factory.mktemp("preload")
    (root / "s.py").write_text("pass\n")
    spec = ScriptSpec(script=root / "s.py", cwd=root, env={**ENV, "PYTHONPATH": str(libdir)})
    with Runner(spec, capture_ops=False) as runner:
        runner.start(["threadmod", "envmod", "json"])
        yield runner


# -- timeouts and crashes --------------------------------------------------------
def test_timeout_kills_the_script_and_its_whole_process_group(fork_runner, tmp_path):
    pids = tmp_path / "pids"
    obs = run(
        fork_runner,
        f"""\
        import os, subprocess, time
        child = subprocess.Popen(["sleep", "1000"])
        open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(1000)
        """,
        timeout=1.0,
    )
    assert obs.timed_out and obs.status == "timeout"
    assert (obs.exit_code, obs.signal, obs.signature) == (None, signal.SIGKILL, None)
    assert 1.0 <= obs.wall < 2.5
    assert obs.describe().startswith("timed out after")
    assert wait_gone(read_pids(pids, 2)) == []


def test_a_run_killed_after_its_error_left_the_script_still_says_which_error_it_reached(fork_runner):
    # (the script's exit handler stands for what comes after the error: the probe saving
    # the data objects of a long first run, the user's own atexit)
    obs = run(fork_runner, "import atexit, time\natexit.register(time.sleep, 1000)\n"
                           "raise IndexError('Target 4 is out of bounds.')\n", timeout=3.0, collect_modules=True)
    assert obs.timed_out and obs.signature is None
    assert obs.raised_before_timeout.headline == "IndexError: Target 4 is out of bounds."


def test_sigsegv_is_a_crash_with_a_signal_signature(fork_runner):
    obs = run(fork_runner, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert (obs.status, obs.signal, obs.exit_code, obs.timed_out) == ("signal", 11, None, False)
    assert obs.signature.type == "signal.SIGSEGV"
    assert obs.signature.family is Family.CRASH
    assert obs.signature.op is None and obs.failed


def test_os_exit_leaves_no_report_and_no_signature(fork_runner):
    obs = run(fork_runner, "import os\nprint('bye', flush=True)\nos._exit(7)\n")
    assert (obs.status, obs.exit_code, obs.signal, obs.signature) == ("no-report", 7, None, None)
    assert obs.stdout == "bye\n" and not obs.failed


# -- processes that try to outlive their run ---------------------------------------------
NEW_SESSION = """\
import subprocess
p = subprocess.Popen(["sleep", "1000"], start_new_session=True)
open({pids!r}, "w").write(str(p.pid))
{end}
"""
DOUBLE_FORK = """\
import os, time
first = os.fork()
if first == 0:
    os.setsid()
    daemon = os.fork()
    if daemon == 0:
        os.execvp("sleep", ["sleep", "1000"])
    open({pids!r}, "w").write(str(daemon))
    os._exit(0)
os.waitpid(first, 0)
{end}
"""


@pytest.mark.parametrize(
    "template, end",
    [(NEW_SESSION, "pass"), (NEW_SESSION, "raise SystemExit(3)"), (DOUBLE_FORK, "pass"), (DOUBLE_FORK, "1 / 0")],
    ids=["new-session-exits", "new-session-fails", "double-fork-exits", "double-fork-fails"],
)
def test_a_daemon_that_escaped_the_process_group_is_killed_after_the_run(plain_runner, tmp_path, template, end):
    pids = tmp_path / "pids"
    obs = run(plain_runner, template.format(pids=str(pids), end=end))
    assert obs.infra_error is None and not obs.timed_out
    daemon = read_pids(pids, 1)
    try:
        assert wait_gone(daemon) == []
    finally:
        kill_quietly(daemon)


def test_a_daemon_with_children_of_its_own_is_killed_after_the_run(plain_runner, tmp_path):
    pids = tmp_path / "pids"
    text = f"""\
        import os, subprocess, time
        first = os.fork()
        if first == 0:
            os.setsid()
            if os.fork() == 0:
                worker = subprocess.Popen(["sleep", "1000"])
                open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{worker.pid}}")
                worker.wait()
                os._exit(0)
            os._exit(0)
        os.waitpid(first, 0)
        while not os.path.exists({str(pids)!r}) or len(open({str(pids)!r}).read().split()) < 2:
            time.sleep(0.01)
        """
    obs = run(plain_runner, text)
    assert obs.status == "ok"
    escaped = read_pids(pids, 2)
    try:
        assert wait_gone(escaped) == []
    finally:
        kill_quietly(escaped)


def test_close_ends_the_supervisor_a_running_candidate_its_children_and_the_temp_dirs(tmp_path):
    before = descendants()
    (tmp_path / "s.py").write_text("pass\n")
    pids = tmp_path / "pids"
    spec = ScriptSpec(script=tmp_path / "s.py", cwd=tmp_path, env=ENV)
    runner = Runner(spec, capture_ops=False)
    runner.start()
    # The supervisor is the direct child; it also keeps a child forked ahead of need.
    (supervisor,) = {p.pid for p in psutil.Process().children()} - before
    future = runner.submit(
        script(
            f"""\
            import os, subprocess, time
            child = subprocess.Popen(["sleep", "1000"])
            daemon = subprocess.Popen(["sleep", "1000"], start_new_session=True)
            open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}} {{daemon.pid}} {{os.getcwd()}}")
            time.sleep(1000)
            """
        ),
        timeout=60,
    )
    deadline = time.monotonic() + 5
    while len(pids.read_text().split() if pids.exists() else ()) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    *started, cwd = pids.read_text().split()
    started = [int(p) for p in started]
    session = Path(cwd).parent.parent
    assert session.exists() and {supervisor, *started} <= descendants()
    runner.close()
    try:
        assert future.done()
        assert wait_gone([supervisor, *started]) == []
        assert not session.exists()
        deadline = time.monotonic() + 2
        while descendants() - before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert descendants() - before == set()
    finally:
        kill_quietly(started)


def test_a_run_cut_short_by_close_is_not_reported_as_a_crash(tmp_path):
    (tmp_path / "s.py").write_text("pass\n")
    spec = ScriptSpec(script=tmp_path / "s.py", cwd=tmp_path, env=ENV)
    with Runner(spec, capture_ops=False) as runner:
        runner.start()
        future = runner.submit(script("import time\ntime.sleep(1000)\n"), timeout=60)
        time.sleep(0.3)
    obs = future.result(timeout=10)
    assert not obs.failed
    assert obs.infra_error is not None


def test_preload_drops_a_module_that_starts_a_thread_and_still_forks(preload_runner):
    report = preload_runner.preload_report
    assert [d.module for d in report.dropped] == ["threadmod"]
    assert "thread" in report.dropped[0].reason
    assert report.modules == ("envmod", "json")
    assert report.isolation is Isolation.FORK and preload_runner.isolation is Isolation.FORK
    obs = run(
        preload_runner,
        "import os, sys\n"
        "print(len(os.listdir('/proc/self/task')), 'threadmod' in sys.modules, 'envmod' in sys.modules)\n",
    )
    assert obs.stdout == "1 False True\n"
    # The module is still there for the script itself to import.
    obs = run(preload_runner, "import threadmod, threading\nprint(threading.active_count())\n")
    assert obs.stdout == "2\n"


@pytest.mark.parametrize("mode", [Isolation.FORK, Isolation.FRESH])
def test_environment_changes_made_by_preloaded_modules_do_not_reach_the_script(preload_runner, mode):
    obs = run(preload_runner, "import os\nprint(os.environ.get('ENVMOD_WAS_HERE'))\n", isolation=mode)
    assert obs.stdout == "None\n"


# -- the child forked ahead of need -----------------------------------------------------
def waiting_children(supervisor: int, timeout: float = 5.0) -> list[int]:
    """The supervisor's children once exactly one of them is left (the standby)."""
    deadline = time.monotonic() + timeout
    while True:
        kids = [c.pid for c in psutil.Process(supervisor).children() if not gone(c.pid)]
        if len(kids) == 1 or time.monotonic() > deadline:
            return kids
        time.sleep(0.02)


def test_a_candidate_runs_in_the_child_forked_ahead_and_another_takes_its_place(tmp_path):
    (tmp_path / "s.py").write_text("pass\n")
    spec = ScriptSpec(script=tmp_path / "s.py", cwd=tmp_path, env=ENV)
    before = {p.pid for p in psutil.Process().children()}
    with Runner(spec, capture_ops=False) as runner:
        runner.start()
        (supervisor,) = {p.pid for p in psutil.Process().children()} - before
        text = "import os, random\nprint(os.getpid(), os.getsid(0), os.environ.get('PIN'), random.random())\n"
        seen = []
        for pin in ("0", "1"):
            (standby,) = waiting_children(supervisor)
            obs = runner.run(script(text), timeout=30, env={"PIN": pin})
            pid, sid, got, draw = obs.stdout.split()
            # The waiting child is the one that ran, as its own session, with this
            # run's environment and a random stream of its own.
            assert int(pid) == standby and int(sid) == standby and got == pin
            seen.append(draw)
        assert seen[0] != seen[1]
        (standby,) = waiting_children(supervisor)
        os.kill(standby, signal.SIGKILL)  # a standby that dies waiting is replaced
        assert wait_gone([standby]) == []
        obs = runner.run(script("print('still here')\n"), timeout=30)
        assert obs.status == "ok" and obs.stdout == "still here\n"
        (standby,) = waiting_children(supervisor)
    assert wait_gone([supervisor, standby]) == []  # closing ends the waiting child too


def test_a_run_that_ends_normally_takes_what_it_started_with_it(fork_runner, tmp_path):
    # The verdict goes out as soon as the child says it is done, before the kernel has
    # torn it down; what it left running in its group is killed then, not later.
    pids = tmp_path / "pids"
    obs = run(
        fork_runner,
        f"""\
        import atexit, subprocess, sys
        child = subprocess.Popen(["sleep", "1000"])
        open({str(pids)!r}, "w").write(str(child.pid))
        atexit.register(print, "atexit ran")
        sys.exit(4)
        """,
    )
    assert (obs.status, obs.exit_code, obs.signal) == ("exit", 4, None)
    assert obs.stdout == "atexit ran\n"
    assert wait_gone(read_pids(pids, 1)) == []
