"""agents/calls.py: a tool's command line, the child process run to its end with its
progress events said in words, and a cancelled call that interrupts the child as Ctrl-C
would and waits for it to write its result."""

from __future__ import annotations

import sys
import time

import pytest

anyio = pytest.importorskip("anyio", reason="the agents extra (pip install 'shrinkgpu[agents]') is not installed")

from shrinkgpu.agents import calls  # noqa: E402
from shrinkgpu.agents.calls import Answer, call, command, options, parse_answer, progress_message  # noqa: E402


def test_the_command_line_of_a_tool():
    argv = command("reduce", options(keep_error="out of bounds", max_time=30, max_tests=None, progress_json=True,
                                     no_cache=False), ["train.py"], ["--epochs", "3"])
    assert argv == [sys.executable, "-m", "shrinkgpu", "reduce", "--keep-error", "out of bounds", "--max-time", "30",
                    "--progress-json", "--json", "train.py", "--", "--epochs", "3"]
    assert command("run", [], ["t.py"])[-2:] == ["--json", "t.py"]  # no script arguments: no ``--``


def test_progress_events_in_words():
    assert progress_message({"event": "stage", "message": "running the original"}) == "running the original"
    assert progress_message({"event": "best", "tokens": 120, "lines": 9}) == "best so far: 120 tokens, 9 lines"
    assert progress_message({"event": "tested", "tests": 40, "accepted": 3}) == "40 candidates tested, 3 accepted"
    assert progress_message({"event": "improved", "pass": "delete-statements"}) == \
        "delete-statements made the program smaller"
    assert progress_message({"event": "pass", "name": "slice"}) is None


def test_the_answer_is_the_json_the_command_printed():
    assert parse_answer(0, '{\n  "failed": true\n}\n', "").data == {"failed": True}
    missing = parse_answer(1, "", "Traceback ...\nImportError: no torch")
    assert missing.data["error"] == "shrinkgpu printed no JSON: ImportError: no torch"
    assert Answer(2, {"error": "bad option"}, "").error == "bad option"


CHILD = """\
import json, signal, sys, time

def stop(*_):
    open(sys.argv[1], "w").write("partial")
    print(json.dumps({"stopped": True}))
    sys.exit(130)

signal.signal(signal.SIGINT, stop)
for k in range(3):
    sys.stderr.write(json.dumps({"event": "best", "seconds": k, "tokens": 100 - k, "lines": 5}) + "\\n")
    sys.stderr.flush()
sys.stderr.write("a line that is not progress\\n")
if sys.argv[2] == "wait":
    time.sleep(60)
print(json.dumps({"done": True}))
"""


def child(tmp_path, mode: str) -> list[str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return [sys.executable, str(script), str(tmp_path / "written"), mode]


def test_a_call_reports_its_progress_and_answers(tmp_path):
    said = []

    async def report(seconds, message):
        said.append((seconds, message))

    answer = anyio.run(lambda: call(child(tmp_path, "end"), report=report))
    assert answer.exit_code == 0 and answer.data == {"done": True}
    assert said == [(0.0, "best so far: 100 tokens, 5 lines"), (1.0, "best so far: 99 tokens, 5 lines"),
                    (2.0, "best so far: 98 tokens, 5 lines")]
    assert answer.tail == "a line that is not progress"


def test_a_cancelled_call_interrupts_the_child_and_waits_for_it(tmp_path):
    started = anyio.Event()

    async def report(seconds, message):
        started.set()

    async def main():
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: call(child(tmp_path, "wait"), report=report))
            await started.wait()
            await anyio.sleep(0.5)
            group.cancel_scope.cancel()

    begun = time.monotonic()
    anyio.run(main)
    assert (tmp_path / "written").read_text() == "partial"  # written before the call gave up
    assert time.monotonic() - begun < 30


def test_a_child_that_ignores_the_interrupt_is_killed_after_the_grace(tmp_path, monkeypatch):
    monkeypatch.setattr(calls, "GRACE", 1.0)
    script = tmp_path / "stubborn.py"
    script.write_text("import signal, sys, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                      "sys.stderr.write('{\"event\": \"stage\", \"seconds\": 0, \"message\": \"up\"}\\n')\n"
                      "sys.stderr.flush()\ntime.sleep(60)\n")
    up = anyio.Event()

    async def report(seconds, message):
        up.set()

    async def main():
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: call([sys.executable, str(script)], report=report))
            await up.wait()
            group.cancel_scope.cancel()

    begun = time.monotonic()
    anyio.run(main)
    assert time.monotonic() - begun < 20
