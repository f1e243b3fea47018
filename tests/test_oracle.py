"""oracle.py: candidate programs in, a judgement each out, over a runner of fake
executors: the compile check, the cache, the confirmation runs, the devices."""

from __future__ import annotations

import pytest

from fakes import Log, bug, executors, passes, signature
from shrinkgpu.core import Verdict
from shrinkgpu.limits import Limits
from shrinkgpu.oracle import Oracle, classify, files_key
from shrinkgpu.signature import Signature, Target
from shrinkgpu.worker import Observation, Runner, ScriptSpec

TARGET = Target(signature())


@pytest.fixture
def judged_by(tmp_path):
    """An oracle whose fake script fails with the target's bug when its text says
    ``bug``, with another error for ``other``, and passes otherwise; and the log of the
    jobs it ran."""
    opened = []

    def make(**kw):
        def behaviour(text, job):
            if "bug" in text:
                return bug()
            if "other" in text:
                return bug(signature("KeyError", "'lr'", op=None))
            return passes()

        log = Log()
        (tmp_path / "a.py").write_text("bug\n")
        runner = Runner(ScriptSpec(script=tmp_path / "a.py", cwd=tmp_path), executors=executors(behaviour, log))
        opened.append(runner)
        runner.start()
        return Oracle(runner, TARGET, Limits(timeout=5.0), **kw), log

    yield make
    for runner in opened:
        runner.close()


def test_a_reproduction_is_confirmed_and_other_outcomes_are_not(judged_by):
    oracle, log = judged_by(confirm=1)
    got = oracle.judge([{"a.py": "bug\n"}, {"a.py": "other\n"}, {"a.py": "fine\n"}])
    assert [j.verdict for j in got] == [Verdict.REPRODUCED, Verdict.OTHER_ERROR, Verdict.PASSED]
    assert [j.runs for j in got] == [2, 1, 1]  # the reproduction once more, to be sure
    assert got[0].observation is not None and got[0].observation.signature == signature()
    assert got[1].observation is None and got[2].observation is None
    assert len(log.jobs) == 4 and oracle.stats.runs == 4
    assert oracle.stats.other_errors == {"KeyError": 1}


def test_a_program_that_does_not_compile_is_invalid_and_never_runs(judged_by):
    oracle, log = judged_by()
    [got] = oracle.judge([{"a.py": "bug(\n"}])
    assert got.verdict is Verdict.INVALID and got.runs == 0
    assert log.jobs == [] and oracle.stats.invalid == 1


def test_programs_that_render_alike_run_once(judged_by):
    oracle, log = judged_by(confirm=0)
    first = oracle.judge([{"a.py": "bug\n"}, {"a.py": "bug\n"}])
    again = oracle.judge([{"a.py": "bug\n"}])
    assert [j.verdict for j in first + again] == [Verdict.REPRODUCED] * 3
    assert [j.runs for j in first + again] == [1, 0, 0]
    assert len(log.jobs) == 1 and oracle.stats.cache_hits == 2


def test_a_programs_identity_is_its_files_in_path_order():
    assert (files_key({"b.py": "2", "a.py": "1"}) == (("a.py", "1"), ("b.py", "2"))
            == files_key({"a.py": "1", "b.py": "2"}))


def test_a_run_that_timed_out_or_lost_its_worker_is_never_a_reproduction():
    timed_out = Observation(None, 9, True, 5.0, "exception", signature())
    assert classify(timed_out, TARGET) is Verdict.TIMEOUT
    assert classify(Observation.infrastructure("the supervisor process exited"), TARGET) is Verdict.CRASHED
    assert classify(bug(), TARGET) is Verdict.REPRODUCED
    assert classify(passes(), TARGET) is Verdict.PASSED


def test_a_retry_after_a_lost_supervisor_keeps_the_candidates_device(tmp_path):
    """The runner retries a run its executor died under, on a new executor, with the same
    variables: a candidate never moves to another GPU."""
    from fakes import FakeExecutor, Log, passes
    from shrinkgpu.limits import Limits
    from shrinkgpu.worker import Runner, ScriptSpec

    log, made = Log(), []

    class DiesOnce(FakeExecutor):
        def submit(self, job):
            future = super().submit(job)
            if len(log.jobs) == 1:  # the first run loses its supervisor
                self._alive = False
                future = type(future)()
                future.set_result(Observation.infrastructure("the supervisor process exited"))
            return future

    def make(isolation, settings):
        made.append(DiesOnce(isolation, settings, lambda text, job: passes(), log))
        return made[-1]

    (tmp_path / "a.py").write_text("1\n")
    with Runner(ScriptSpec(script=tmp_path / "a.py", cwd=tmp_path), executors=make) as runner:
        runner.start()
        oracle = Oracle(runner, Target(Signature("IndexError", "x", "x", None, None)), Limits(timeout=5.0),
                        gpus=("3", "5"), pin_variable="HIP_VISIBLE_DEVICES")
        judged = oracle.judge([{"a.py": "1\n"}, {"a.py": "2\n"}])
    assert [j.verdict for j in judged] == [Verdict.PASSED, Verdict.PASSED]
    pins = [dict(job.env).get("HIP_VISIBLE_DEVICES") for _, job in log.jobs]
    assert pins == ["3", "5", "3"]  # the retry of the first, on its device
    assert len(made) == 2  # a new executor for the retry
