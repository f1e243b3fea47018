"""--max-time bounds the whole command (issue 58): for each phase that can be long, a
reduction whose limit falls inside it ends within the limit and the grace
(``limits.GRACE``), and a note names what was not done and what it needs.

The runs are the fake executor's (tests/fakes.py) on a ``FakeClock``: each run lasts
its observation's ``wall``, one longer than its time limit comes back timed out at the
limit, and the reduction reads the same clock.  So a reduction of a two-minute original
under a five-minute limit is checked in milliseconds, to the second.  Two tests at the
end run real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import shrinkgpu.reducer.session as session_module
from fakes import NEEDLE, SCRIPT, FakeClock, FakeExecutor, Log, NoCollectEnv, bug, config, executors, passes, signature
from shrinkgpu.launch import Launch
from shrinkgpu.limits import GRACE
from shrinkgpu.reducer import NotReproduced, Reduction
from shrinkgpu.worker import Isolation

# A long original: a training loop that took its time (95% of the samples) before a
# failure after it.
LONG = textwrap.dedent("""\
    import torch

    for step in range(100000):
        train_step(step)
    explode(3)
    """)
AFTER_THE_LOOP = textwrap.dedent("""\
    import torch

    for epoch in range(100000):
        torch.save(train(epoch), "checkpoints/best.pt")
    model = torch.load("checkpoints/best.pt")
    explode(model)
    """)
HOT = (("train.py", 3, 0.95),)


@pytest.fixture(autouse=True)
def no_collect_env(monkeypatch):
    monkeypatch.setattr(session_module, "CollectEnv", NoCollectEnv)


def reduced(cfg, behaviour=None, *, make=None, log=None, events=None):
    """(the result or the exception that ended the command, its seconds on the clock,
    its notes, the log of its runs)."""
    clock, log = FakeClock(), log if log is not None else Log()
    make = make(clock, log) if make is not None else executors(behaviour, log, clock=clock)
    reduction = Reduction(cfg, events.append if events is not None else None, executors=make, clock=clock)
    try:
        outcome = reduction.run()
    except NotReproduced as exc:
        outcome = exc
    return outcome, clock.now - reduction.limits.started, reduction.talk.notes, log


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(text)
    return path


def test_a_first_run_longer_than_the_limit_is_stopped_at_it_and_said_at_once(tmp_path):
    events = []
    outcome, seconds, _notes, log = reduced(config(write(tmp_path, SCRIPT), max_time=60),
                                            lambda text, job: bug(wall=100.0), events=events)
    assert isinstance(outcome, NotReproduced)
    assert str(outcome).startswith("the original did not finish within 60s (--max-time)")
    assert seconds == 60.0 and len(log.jobs) == 1 and log.jobs[0][1].timeout == 60.0
    stages = [e.message for e in events if type(e).__name__ == "Stage"]
    assert stages[0] == "running the original in a fresh interpreter (--max-time 1:00 bounds this run too)"


def test_a_first_run_stopped_after_its_error_still_writes_the_report_of_that_error(tmp_path):
    script = write(tmp_path, SCRIPT)
    # the error leaves the script at 30 s; the probe saves the data objects until 100 s
    result, seconds, notes, log = reduced(config(script, max_time=60, write=True),
                                          lambda text, job: bug(wall=100.0, error_at=30.0, startup=1.6))
    assert seconds <= 60.0 + GRACE and len(log.jobs) == 1  # no run after the first
    assert result.signature.headline == "IndexError: Target 4 is out of bounds."
    assert result.files == {"train.py": SCRIPT} and result.stopped == "time limit reached"
    assert ("--max-time ended the original's first run after 60s, after its first error (IndexError: Target 4 is "
            "out of bounds.) while it saved what the search needs: nothing after it was run") in notes
    assert any(n.startswith("--max-time 60 s ended the reduction before ") and "the search (its workers started" in n
               for n in notes)
    assert (tmp_path / "train.min.md").is_file() and (tmp_path / "train.min.json").is_file()
    assert json.loads((tmp_path / "train.min.json").read_text())["original"]["seconds"] == 60.0
    assert script.read_text() == SCRIPT


def long_original(text, job, *, cut=5.0, kept=None, loops=()):
    """A 100 s original (its import of torch 1.6 s: a long run); ``cut``: the seconds a
    start without its loop runs (failing otherwise); ``kept``: the run that keeps the
    files it writes; ``loops``: the iterations around the failure."""
    written = job.request.watch.written
    if written is not None:  # as the probe copies them
        (Path(written) / "checkpoints").mkdir(parents=True)
        (Path(written) / "checkpoints" / "best.pt").write_bytes(b"weights")
        return bug(wall=kept or 100.0, written={"files": ["checkpoints/best.pt"], "files_bytes": 7})
    if "range(100000)" in text:
        return bug(wall=100.0, loop_time=HOT, startup=1.6, loops=loops)
    return bug(signature("RuntimeError", "something else", op=None), wall=cut)


def test_the_starts_that_do_not_fit_are_not_tried_and_say_what_they_take(tmp_path):
    cfg = config(write(tmp_path, LONG), max_time=200, write=True, extract=False)
    result, seconds, notes, log = reduced(cfg, lambda text, job: long_original(text, job, cut=90.0,
                                                                               loops=(("train.py", 3, 7),)))
    assert seconds <= 200.0 + GRACE
    # 100 s left: no state (its run and the replay's check take 170 s); the cut is
    # checked (70 s, the most a start worth taking may run), then nothing fits
    assert ("no state was saved to start candidates at the failing step: the run that saves the state at iteration "
            "7 of `for step in range(100000):` (train.py), and the check of the replay was not tried: 100 s left of "
            "--max-time, it takes 170 s") in notes
    assert ("the original with the loops that took its time cut does not fail the same way (timed out after "
            "70.0s)") in notes
    assert ("the start from the original with the loops that took its time cut to their first iteration was not "
            "tried: 30 s left of --max-time, it takes 70 s") in notes
    assert [job.timeout for _, job in log.jobs] == [200.0, 70.0]
    assert result.files == {"train.py": LONG}


def test_the_run_that_keeps_the_files_the_loops_wrote_is_not_started_without_the_time_it_and_its_check_take(
        tmp_path):
    cfg = config(write(tmp_path, AFTER_THE_LOOP), max_time=250, write=True, extract=False)
    _result, seconds, notes, log = reduced(cfg, long_original)
    assert seconds <= 250.0 + GRACE
    assert ("the start from the original with the loops that took its time cut and the files they wrote put back "
            "(the run that keeps the files, then its check) was not tried: 140 s left of --max-time, it takes "
            "170 s") in notes
    assert not any(job.request.watch.written for _, job in log.jobs)


def test_the_check_after_the_files_were_kept_is_not_started_when_their_run_took_the_time(tmp_path):
    cfg = config(write(tmp_path, AFTER_THE_LOOP), max_time=300, write=True, extract=False)
    _result, seconds, notes, log = reduced(cfg, lambda text, job: long_original(text, job, kept=130.0))
    assert seconds <= 300.0 + GRACE
    assert [job.timeout for _, job in log.jobs if job.request.watch.written] == [190.0]
    assert ("the check of the start from the original with the loops that took its time cut and the files they "
            "wrote put back was not tried: 60 s left of --max-time, it takes 70 s") in notes


def by_ranks(walls: dict[int, tuple[float, object]]):
    """Executors whose runs last and end as ``walls[ranks]`` says (0: plain python)."""
    def make(clock, log):
        def executor(isolation, settings):
            ranks = settings.launch.nproc if settings.launch.ranks else 0
            wall, sig = walls[ranks]
            behaviour = lambda text, job: bug(sig, wall=wall, startup=1.6) if sig else passes(wall=wall)  # noqa: E731
            return FakeExecutor(isolation, settings, behaviour, log, None, clock)
        return executor
    return make


def test_a_rank_check_that_does_not_fit_is_not_tried_and_candidates_keep_the_users_ranks(tmp_path):
    peerless = signature("RuntimeError", "a collective needs two ranks", op=None)
    cfg = config(write(tmp_path, SCRIPT), max_time=100, launch=Launch(nproc=4, ranks=True))
    result, seconds, notes, log = reduced(cfg, make=by_ranks({4: (50.0, signature()), 1: (40.0, peerless),
                                                              2: (50.0, signature())}))
    # (the user's 4 ranks: 50 s, the first error; 1 rank: another error in 40 s)
    assert seconds <= 100.0 + GRACE
    assert ("the check of the original with 2 ranks was not tried: 10 s left of --max-time, it takes 50 s: "
            "candidates keep 4 ranks") in notes
    assert [job.timeout for _, job in log.jobs][:2] == [100.0, 50.0]


def fresh_runs_of_the_result_take(log: Log, seconds: float):
    """The script: 2 s a fresh run (1.6 s of it torch's import), 10 ms forked; a fresh run
    of anything smaller than the script (the result) takes ``seconds``."""
    def behaviour(text, job):
        fresh = log.jobs[-1][0] is Isolation.FRESH
        if NEEDLE not in text:
            return passes()
        if fresh and text != SCRIPT:
            return bug(wall=seconds)
        return bug(wall=2.0 if fresh else 0.01, startup=1.6)
    return behaviour


def test_a_fresh_check_of_the_result_stopped_by_the_limit_leaves_it_unchecked_and_partial(tmp_path):
    log = Log()
    cfg = config(write(tmp_path, SCRIPT), max_time=20, ablate=False)
    result, seconds, notes, _ = reduced(cfg, fresh_runs_of_the_result_take(log, 100.0), log=log)
    assert seconds <= 20.0 + GRACE
    assert result.verified == (0, 0) and result.files == {"train.py": NEEDLE + "\n"}
    [said] = [n for n in notes if n.startswith("the check of the result in a fresh interpreter was stopped by "
                                                "--max-time after")]
    assert said.endswith(": the result is written marked partial, not re-checked in fresh interpreters")


def test_the_run_alone_stopped_by_the_limit_decides_nothing(tmp_path):
    log, runs = Log(), []

    def behaviour(text, job):
        # the result's two fresh checks take 2 s; the third fresh run of it, alone, 100 s
        if log.jobs[-1][0] is Isolation.FRESH and text == NEEDLE + "\n":
            runs.append(text)
            return bug(wall=2.0 if len(runs) <= 2 else 100.0)
        return fresh_runs_of_the_result_take(log, 2.0)(text, job)

    result, seconds, notes, _ = reduced(config(write(tmp_path, SCRIPT), max_time=30, ablate=False), behaviour,
                                        log=log)
    assert seconds <= 30.0 + GRACE and result.verified == (2, 2) and len(runs) == 3
    assert any(n.startswith("the run alone in an empty directory was stopped by --max-time after ") for n in notes)
    assert result.alone == {"artifact": "result", "file": "train.min.py", "checked": False, "result_needs": []}


COMPILED = """\
import torch


def gate(x):
    return x


fn = torch.compile(gate, fullgraph=True)
explode(3)
"""
GRAPH_BREAK = signature("torch._dynamo.exc.Unsupported", "Data-dependent branching", op=None)


def test_the_comparisons_the_limit_stops_are_left_out_and_said(tmp_path):
    log = Log()

    def behaviour(text, job):
        fresh = log.jobs[-1][0] is Isolation.FRESH
        if "torch.compile" not in text or NEEDLE not in text:
            return passes(wall=2.0 if fresh else 0.01)
        if "backend=" in text:  # the comparisons with another backend: long
            return bug(GRAPH_BREAK, wall=100.0)
        return bug(GRAPH_BREAK, wall=2.0 if fresh else 0.01, startup=1.6)

    cfg = config(write(tmp_path, COMPILED), max_time=20, keep_error="Data-dependent", jobs=1)
    result, seconds, notes, _ = reduced(cfg, behaviour, log=log)
    assert seconds <= 20.0 + GRACE
    assert result.verified[0] > 0 and result.ablation is not None
    assert [o.change for o in result.ablation.outcomes] == ["torch.compile off"]
    assert ('the run with one change at a time (backend="eager") was stopped by --max-time: it and the comparisons '
            'after it are left out') in notes


def test_a_limit_shorter_than_the_kept_first_run_is_refused_before_anything_runs(tmp_path):
    from shrinkgpu.reducer import ReduceError

    script = write(tmp_path, SCRIPT)
    (tmp_path / "train.min.json").write_text(json.dumps({"original": {"seconds": 662.0}}))
    clock = FakeClock()
    with pytest.raises(ReduceError) as refused:
        Reduction(config(script, max_time=300, resume=True), executors=executors(lambda text, job: bug(), clock=clock),
                  clock=clock).run()
    assert refused.value.exit_code == 2
    assert str(refused.value).startswith("--max-time 300 is shorter than one run of the original (662s, from its "
                                         "last reduction's case file, train.min.json)")


# -- real processes ------------------------------------------------------------------------------
SLEEPS_THEN_FAILS = """\
import time

import torch
import torch.nn.functional as F

time.sleep({sleep})
F.cross_entropy(torch.randn(3, 4), torch.tensor([0, 2, 4]))
"""


def shrinkgpu(tmp_path: Path, max_time: float, sleep: float) -> tuple[subprocess.CompletedProcess, float]:
    (tmp_path / "train.py").write_text(SLEEPS_THEN_FAILS.format(sleep=sleep))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "shrinkgpu", "reduce", "train.py", "-k", "out of bounds",
                           "--max-time", str(max_time), "--json", "-q"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONHASHSEED": "0"})
    return done, time.monotonic() - started


@pytest.mark.slow
def test_a_real_first_run_past_the_limit_ends_the_command_at_it(tmp_path):
    done, seconds = shrinkgpu(tmp_path, max_time=5, sleep=60)
    # (a generous margin: the command's own start and a loaded machine)
    assert done.returncode == 3 and seconds < 5 + GRACE + 10, (done.stdout, done.stderr)
    assert "did not finish within" in json.loads(done.stdout)["error"]


@pytest.mark.slow
def test_a_real_reduction_whose_limit_falls_before_the_search_writes_the_extracted_call(tmp_path):
    done, seconds = shrinkgpu(tmp_path, max_time=20, sleep=6)
    summary = json.loads(done.stdout)
    assert done.returncode == 0, summary
    assert seconds < 20 + GRACE + 10
    assert (tmp_path / "train.extracted.py").is_file() and summary["stop_reason"] == "time limit reached"
    assert any(n.startswith("--max-time 20 s ended the reduction before ") for n in summary["notes"]), summary["notes"]
    assert not list(tmp_path.glob("*.pt")) or summary["extracted"]["data"]
