"""agents/jobs.py: a job's progress folded from its command's events, the cursor an agent
waits past (moved by what is worth waking it for, not by every candidate), the states a
job ends in and what each answers, and the registry that stops every job at the end.
No SDK: the pure parts are driven by hand, the rest with the stand-in command."""

from __future__ import annotations

import json
import threading
import time
from functools import partial

import pytest

from shrinkgpu.agents import jobs
from shrinkgpu.agents.calls import Answer, Refused, answered
from shrinkgpu.agents.jobs import Job, Progress, Registry, State, advance

from .helpers import FAKE_SAID, alive, fake, gone


def line(**event) -> str:
    return json.dumps(event)


EVENTS = [
    {"event": "stage", "seconds": 0.1, "message": "running the original in a fresh interpreter"},
    {"event": "reducing", "seconds": 5.0, "tokens": 1698, "lines": 234},
    {"event": "pass", "seconds": 5.1, "name": "delete-statements", "level": 0, "units": 40},
    {"event": "tested", "seconds": 5.6, "tests": 12, "accepted": 2},
    {"event": "improved", "seconds": 5.7, "pass": "delete-statements"},
    {"event": "best", "seconds": 5.7, "tokens": 812, "lines": 40, "main": "train.py",
     "files": {"train.py": "import torch\n", "helpers.py": "x = 1\n"}},
]


def test_progress_is_folded_from_the_events():
    progress = Progress()
    for event in EVENTS:
        progress = advance(progress, event)
    assert progress == Progress(phase="running the original in a fresh interpreter", pass_name="delete-statements",
                                start_tokens=1698, best_tokens=812, best_lines=40, best_main="train.py",
                                tested=12, accepted=2)
    assert progress.to_json() == {"phase": "running the original in a fresh interpreter",
                                  "pass": "delete-statements", "start_tokens": 1698, "best_tokens": 812,
                                  "best_lines": 40, "tested": 12, "accepted": 2}
    shown = progress.to_json(text=True)
    assert shown["text"] == "import torch\n"
    assert shown["files"] == {"train.py": "import torch\n", "helpers.py": "x = 1\n"}  # several files: all of them
    assert advance(progress, {"event": "stage", "message": "verifying the result"}).phase == "verifying the result"
    assert "text" not in Progress().to_json(text=True)  # nothing found yet: nothing to show


def started_job(shape=partial(answered, ok=(0, 3))) -> Job:
    return Job("reduce-1", "reduce", shape)


def test_the_cursor_moves_for_what_is_worth_waiting_for():
    job = started_job()
    cursors = []
    for event in EVENTS:
        job.on_line(line(**event))
        cursors.append(job.cursor)
    # stage, reducing and best move it; pass, tested and improved do not
    assert cursors == [1, 2, 2, 2, 2, 3]
    job.on_line("Traceback (most recent call last):")
    assert job.cursor == 3
    job.on_line("shrinkgpu: running the candidate 3 times")  # a command without progress events
    assert job.cursor == 4 and job.progress.phase == "running the candidate 3 times"
    assert [message for _, message in job.said] == [
        "running the original in a fresh interpreter", "reducing 1698 tokens", "12 candidates tested, 2 accepted",
        "delete-statements made the program smaller", "best so far: 812 tokens, 40 lines",
        "running the candidate 3 times"]
    assert [seconds for seconds, _ in job.said][:5] == [0.1, 5.0, 5.6, 5.7, 5.7]


def test_waiting_for_a_change():
    job = started_job()
    job.on_line(line(**EVENTS[0]))
    assert job.wait(0, 10.0) is True  # changed since cursor 0: at once
    begun = time.monotonic()
    assert job.wait(None, 0.3) is False  # nothing new within the wait
    assert 0.25 < time.monotonic() - begun < 5
    threading.Timer(0.3, job.on_line, [line(**EVENTS[1])]).start()
    begun = time.monotonic()
    assert job.wait(job.cursor, 20.0) is True
    assert time.monotonic() - begun < 10
    threading.Timer(0.3, job.on_line, [line(**EVENTS[3])]).start()  # a candidate tested: not a change
    assert job.wait(job.cursor, 1.0) is False


def test_no_wait_is_longer_than_the_limit(monkeypatch):
    monkeypatch.setattr(jobs, "WAIT_LIMIT", 0.3)
    begun = time.monotonic()
    assert started_job().wait(None, 600) is False
    assert time.monotonic() - begun < 5


def test_a_job_that_answers_is_done_with_what_the_waiting_call_answers():
    job = started_job()
    job.on_exit(Answer(0, {"output": "x.min.py", "exit_code": 0}, ""))
    assert job.state is State.DONE and job.outcome() == {"output": "x.min.py", "exit_code": 0}
    view = job.view()
    assert view["result"] == {"output": "x.min.py", "exit_code": 0} and view["state"] == "done"
    assert "error" not in view and "cancelling" not in view
    assert job.wait(None, 10.0) is True  # over: no wait
    assert job.cancel() is False


def test_a_job_whose_exit_code_is_no_answer_failed_with_the_tool_errors_words():
    job = started_job()
    job.on_exit(Answer(2, {"error": "no such file: t.py", "exit_code": 2}, ""))
    assert job.state is State.FAILED
    assert job.view()["error"] == "shrinkgpu exited with 2: no such file: t.py" and "result" not in job.view()
    with pytest.raises(Refused, match="^shrinkgpu exited with 2: no such file: t.py$"):
        job.outcome()


class Stub:
    def __init__(self):
        self.interrupted = []

    def interrupt(self, grace=None):
        self.interrupted.append(grace)


def test_a_cancelled_job_is_interrupted_and_keeps_its_result():
    job = started_job(partial(answered, ok=(0, 3, 130)))
    job.attach(stub := Stub())
    before = job.cursor
    assert job.cancel() is True
    assert stub.interrupted == [None] and job.cursor == before + 1
    assert job.cancel() is True  # cancelling still
    assert stub.interrupted == [None] and job.cursor == before + 1  # one SIGINT: a second could cut its writing
    assert job.view()["cancelling"] is True and job.view()["state"] == "running"
    job.on_exit(Answer(130, {"output": "x.min.py", "stop_reason": "interrupted"}, ""))
    assert job.state is State.CANCELLED
    assert job.view()["result"] == {"output": "x.min.py", "stop_reason": "interrupted"}
    assert "cancelling" not in job.view()


def test_a_job_that_ended_as_it_was_cancelled_is_done():
    job = started_job()
    job.attach(Stub())
    job.cancel()
    job.on_exit(Answer(0, {"output": "x.min.py"}, ""))
    assert job.state is State.DONE


def test_a_cancelled_command_that_gives_no_answer_says_why():
    job = started_job()  # (130 is no answer of this tool)
    job.attach(Stub())
    job.cancel()
    job.on_exit(Answer(130, {"error": "interrupted"}, ""))
    assert job.state is State.CANCELLED and job.view()["error"] == "shrinkgpu exited with 130: interrupted"


def test_an_answer_that_cannot_be_read_fails_the_job_instead_of_losing_it():
    def shape(answer):
        raise OSError("disk gone")

    job = started_job(shape)
    job.on_exit(Answer(0, {}, ""))
    assert job.state is State.FAILED
    assert job.error == "shrinkgpu answered, but reading its answer failed: OSError('disk gone')"


def test_the_view_counts_seconds_until_the_end():
    now = [100.0]
    job = Job("run-1", "run", partial(answered, ok=(0,)), clock=lambda: now[0])
    now[0] = 112.34
    assert job.view() == {"job": "run-1", "tool": "run", "state": "running", "cursor": 0, "seconds": 12.3,
                          "progress": Progress().to_json()}
    job.on_exit(Answer(0, {"failed": True}, ""))
    now[0] = 500.0
    assert job.view()["seconds"] == 12.3


def test_the_registry_names_its_jobs_and_says_which_it_has(tmp_path):
    registry = Registry()
    first = registry.start("run", fake("end", tmp_path), partial(answered, ok=(0,)))
    second = registry.start("run", fake("end", tmp_path), partial(answered, ok=(0,)))
    assert (first.id, second.id) == ("run-1", "run-2")
    assert registry.get("run-2") is second
    with pytest.raises(Refused, match=r"^no job 'reduce-9' in this server \(its jobs: run-1, run-2\)"):
        registry.get("reduce-9")
    assert first.wait_end(60) and second.wait_end(60)


def test_a_job_runs_its_command_to_its_answer(tmp_path):
    job = Registry().start("reduce", fake("end", tmp_path, "t.py"), partial(answered, ok=(0,)))
    assert job.wait_end(60)
    assert job.state is State.DONE and job.result["argv"] == ["t.py"]
    assert [message for _, message in job.said] == FAKE_SAID
    assert job.progress.best_tokens == 12 and job.view(text=True)["progress"]["text"] == "import torch\nx = 1\n"
    assert not alive(job.child.pid)


def test_a_command_that_cannot_start_is_refused(tmp_path):
    with pytest.raises(Refused, match="^could not start shrinkgpu run: "):
        Registry().start("run", fake("end", tmp_path), partial(answered, ok=(0,)), cwd=str(tmp_path / "missing"))


def test_stopping_the_registry_stops_every_running_job_and_keeps_their_results(tmp_path):
    registry = Registry()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    running = [registry.start("reduce", fake("wait", tmp_path / d), partial(answered, ok=(0, 130))) for d in "ab"]
    done = registry.start("run", fake("end", tmp_path), partial(answered, ok=(0,)))
    assert done.wait_end(60)
    for job in running:
        assert job.wait(0, 60)  # its first stage: the command is up
    stopped = registry.stop_all()
    assert stopped == running  # not the one that was over
    for job, d in zip(running, "ab"):
        assert job.state is State.CANCELLED and job.result["stop_reason"] == "interrupted"
        assert (tmp_path / d / "x.min.py").read_text() == "# partial\nx = 1\n"
    assert gone([job.child.pid for job in running], within=1)
    with pytest.raises(Refused, match="^the server is stopping: no new job$"):
        registry.start("run", fake("end", tmp_path), partial(answered, ok=(0,)))
