"""agents/calls.py: a tool's command line and environment, its answer, and the child
process: read to its end with its progress lines, interrupted as Ctrl-C would (and
killed with its process group when it does not stop), swept of what it left in its
group, and stopping itself when the server that started it dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from conftest import ROOT
from shrinkgpu.agents.calls import (
    PARENT_VAR,
    Answer,
    Child,
    Refused,
    answered,
    command,
    environment,
    event_of,
    options,
    parse_answer,
    progress_message,
)

from .helpers import FAKE_SAID, alive, fake, gone


def test_the_command_line_of_a_tool():
    argv = command("reduce", options(keep_error="out of bounds", max_time=30, max_tests=None, progress_json=True,
                                     no_cache=False), ["train.py"], ["--epochs", "3"])
    assert argv == [sys.executable, "-m", "shrinkgpu", "reduce", "--keep-error", "out of bounds", "--max-time", "30",
                    "--progress-json", "--json", "train.py", "--", "--epochs", "3"]
    assert command("run", [], ["t.py"])[-2:] == ["--json", "t.py"]  # no script arguments: no ``--``
    # a launch command instead of a script: everything after ``--``
    assert command("run", options(nproc_per_node=2), [], ["torchrun", "--nproc-per-node=2", "t.py"])[3:] == \
        ["run", "--nproc-per-node", "2", "--json", "--", "torchrun", "--nproc-per-node=2", "t.py"]


def test_the_environment_is_the_servers_with_the_changes_over_it():
    base = {"PATH": "/bin", "HOME": "/home/u", "CUDA_VISIBLE_DEVICES": "0"}
    assert environment({"CUDA_VISIBLE_DEVICES": "1", "HOME": None, "SEED": "3"}, base) == \
        {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "1", "SEED": "3"}
    assert environment(None, base) == base


def test_progress_events_in_words():
    assert progress_message({"event": "stage", "message": "running the original"}) == "running the original"
    assert progress_message({"event": "best", "tokens": 120, "lines": 9}) == "best so far: 120 tokens, 9 lines"
    assert progress_message({"event": "tested", "tests": 40, "accepted": 3}) == "40 candidates tested, 3 accepted"
    assert progress_message({"event": "improved", "pass": "delete-statements"}) == \
        "delete-statements made the program smaller"
    assert progress_message({"event": "pass", "name": "slice"}) is None
    assert event_of('{"event": "pass", "name": "slice"}') == {"event": "pass", "name": "slice"}
    assert event_of('{"tokens": 3}') is None and event_of("shrinkgpu: running") is None


def test_the_answer_is_the_json_the_command_printed():
    assert parse_answer(0, '{\n  "failed": true\n}\n', "").data == {"failed": True}
    missing = parse_answer(1, "", "Traceback ...\nImportError: no torch")
    assert missing.data["error"] == "shrinkgpu printed no JSON: ImportError: no torch"
    assert Answer(2, {"error": "bad option"}, "").error == "bad option"
    assert answered(Answer(3, {"same_bug": False}, ""), (0, 3)) == {"same_bug": False}
    with pytest.raises(Refused, match="^shrinkgpu exited with 2: no such file$"):
        answered(Answer(2, {"error": "no such file"}, ""), (0, 3))


class Heard:
    """What a child said: its lines, and its answer once over."""

    def __init__(self):
        self.lines: list[str] = []
        self.answers: list[Answer] = []

    def start(self, argv, **kw) -> Child:
        return Child(argv, on_line=self.lines.append, on_exit=self.answers.append, **kw)


def test_a_child_says_its_progress_and_answers(tmp_path):
    heard = Heard()
    child = heard.start(fake("end", tmp_path, "a", "b"), env={**os.environ, "SHRINKGPU_TEST_VAR": "7"})
    assert child.wait(60)
    [answer] = heard.answers
    assert answer.exit_code == 0
    assert answer.data["argv"] == ["a", "b"] and answer.data["output"] == str(tmp_path / "x.min.py")
    # the server's pid, for stop_with_parent; and the variables it was given
    assert answer.data["env"] == {"SHRINKGPU_TEST_VAR": "7", "SHRINKGPU_TEST_GONE": None,
                                  "SHRINKGPU_MCP_PARENT": str(os.getpid())}
    said = [progress_message(e) for e in map(event_of, heard.lines) if e is not None]
    assert [s for s in said if s] == FAKE_SAID[:4]
    assert answer.tail == "a line that is not progress\nshrinkgpu: running the candidate 3 times"
    assert not alive(child.pid)


def test_an_interrupted_child_writes_its_partial_result(tmp_path):
    heard = Heard()
    child = heard.start(fake("wait", tmp_path))
    deadline = time.monotonic() + 60
    while not any(line.startswith("shrinkgpu:") for line in heard.lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    begun = time.monotonic()
    child.interrupt()
    assert child.wait(30)
    assert time.monotonic() - begun < 10
    [answer] = heard.answers
    assert answer.exit_code == 130 and answer.data["stop_reason"] == "interrupted"
    assert (tmp_path / "x.min.py").read_text() == "# partial\nx = 1\n"


def test_a_child_that_ignores_the_interrupt_is_killed_with_its_group_after_the_grace(tmp_path):
    heard = Heard()
    child = heard.start(fake("stubborn", tmp_path))
    deadline = time.monotonic() + 60
    while not heard.lines[4:] and time.monotonic() < deadline:  # past its progress: the grandchild is next
        time.sleep(0.05)
    time.sleep(0.5)
    grandchildren = [p.pid for p in psutil.Process(child.pid).children()]
    assert len(grandchildren) == 1
    child.interrupt(grace=1.0)
    assert child.wait(30)
    [answer] = heard.answers
    assert answer.exit_code == -signal.SIGKILL
    assert gone(grandchildren)
    assert answer.data["error"] == "shrinkgpu printed no JSON: shrinkgpu: running the candidate 3 times"


def test_what_a_child_leaves_in_its_group_goes_with_it(tmp_path):
    # (a leader that exits while something it started runs on in its group)
    script = tmp_path / "leaves.py"
    script.write_text("import subprocess, sys\n"
                      "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
                      "print('{\"grandchild\": %d}' % p.pid)\n")
    heard = Heard()
    child = heard.start([sys.executable, str(script)])
    assert child.wait(60)
    grandchild = heard.answers[0].data["grandchild"]
    assert gone([grandchild])


# The server's pid is handed down as the server's variable is (not read by the child with
# getppid: under load the server can be killed before the child asks, and a child that
# took its new parent for the server would wait out its sleep).
# The server ignores SIGINT, as one started in the background by a non-interactive shell
# does, and its children inherit that across exec (the full suite's workers had it so).
PARENT = """\
import os, signal, subprocess, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid())])
print(child.pid, flush=True)
child.wait()
"""
STOPPING = """\
import sys, time
try:
    from shrinkgpu.agents.calls import stop_with_parent
    stop_with_parent(sys.argv[1])
    time.sleep(120)
except KeyboardInterrupt:
    open(MARKER, "w").write("interrupted")
"""


def test_a_child_stops_as_ctrl_c_when_its_server_is_killed(tmp_path):
    """SIGKILL leaves the server no time to stop its jobs: each stops itself."""
    marker = tmp_path / "marker"
    code = STOPPING.replace("MARKER", repr(str(marker)))
    server = subprocess.Popen([sys.executable, "-c", PARENT, code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    child = int(server.stdout.readline())
    time.sleep(1.0)  # (its imports, and the prctl)
    server.kill()
    server.wait()
    assert gone([child], within=30)
    assert marker.read_text() == "interrupted"


def test_the_cli_takes_the_servers_variable_out_before_the_script_runs(tmp_path):
    script = tmp_path / "env.py"
    script.write_text(f"import os\nraise RuntimeError(repr(os.environ.get({PARENT_VAR!r})))\n")
    ran = subprocess.run([sys.executable, "-m", "shrinkgpu", "run", "--json", str(script)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, PARENT_VAR: str(os.getpid())})
    data = json.loads(ran.stdout)
    assert data["signature"]["headline"] == "RuntimeError: None", data


def test_the_package_needs_no_sdk_for_its_children():
    code = textwrap.dedent("""\
        import sys
        import shrinkgpu.agents.calls, shrinkgpu.agents.jobs
        loaded = [m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "anyio", "pydantic"))]
        print(loaded)
        sys.exit(1 if loaded else 0)
    """)
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
