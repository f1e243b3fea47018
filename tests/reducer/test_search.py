"""reducer/search.py: the adapter between the core and the oracle, and the rebase, with
a fake executor."""

from __future__ import annotations

from fakes import NEEDLE, SCRIPT, bug, config, passes, signature
from shrinkgpu.core import Verdict
from shrinkgpu.limits import Limits
from shrinkgpu.oracle import Oracle
from shrinkgpu.reducer.facts import RunFacts
from shrinkgpu.reducer.search import Adapter
from shrinkgpu.signature import Target
from shrinkgpu.syntax import Edit, SavedObject
from shrinkgpu.worker import Isolation


def saves_objects(tmp_path):
    pickle = tmp_path / "saved.pkl"
    pickle.write_bytes(b"\x80\x04K\x01.")  # pickle of 1

    def behaviour(text, job):
        if NEEDLE not in text:
            return passes()
        saved = (({"name": "data", "class": "Data", "path": str(pickle), "bytes": 5},)
                 if job.request.watch.save_objects else ())
        return bug(saved_objects=saved)

    return behaviour


def adapter(ctx, facts: RunFacts = RunFacts()):
    runner = ctx.runner(Isolation.FORK)
    runner.start()
    oracle = Oracle(runner, Target(signature()), ctx.limits)
    return Adapter(ctx, oracle, oracle.target, "train.py", facts), runner


def smaller(facts: RunFacts = RunFacts()):
    program = facts.program({"train.py": SCRIPT}, "train.py", None)
    stmt = next(s.id for s in program.stmts if "print" in program.stmt_code(s.id))
    return program.initial().with_edits([Edit("delete", stmt)])


# A data object the program builds, saved by its first run: its file is not in the text.
OBJECTS = RunFacts(saved_objects=(SavedObject("data", "Data", "train.min.data.pkl", 5, "", ()),))


def test_a_rebase_takes_the_facts_of_the_candidates_own_judged_run(script, contexts, tmp_path):
    ctx = contexts(config(script), saves_objects(tmp_path))
    search, runner = adapter(ctx)
    try:
        cand = smaller()
        assert search.test_many([cand]) == [Verdict.REPRODUCED]
        runs = ctx.executors.log.jobs[:]
        rebased = search.rebase(cand)
    finally:
        runner.close()
    assert ctx.executors.log.jobs == runs  # no run more: the judgement had what it needs
    assert rebased.program.facts.stack == (("train.py", 1),)  # its own run's failing lines
    assert not rebased.edits and rebased.files == cand.files
    assert search.trace and search.trace[-1][1] == cand.size


def test_data_objects_the_program_builds_are_saved_again_in_one_run_charged_to_the_budget(script, contexts, tmp_path):
    ctx = contexts(config(script), saves_objects(tmp_path))
    search, runner = adapter(ctx, OBJECTS)
    try:
        cand = smaller(OBJECTS)
        search.test_many([cand])
        before = len(ctx.executors.log.jobs)
        search.rebase(cand)
        after = ctx.executors.log.jobs[before:]
    finally:
        runner.close()
    [(isolation, job)] = after
    assert job.request.watch.save_objects == str(ctx.scratch.objects_again(1))
    assert ctx.limits.charged == 1  # the test the search will not make
    assert [o.file for o in search.facts.saved_objects] == ["train.min.data.pkl"]
    assert set(search.data_files) == {"train.min.data.pkl"}


def test_no_rebase_run_once_the_test_budget_is_spent(script, contexts, tmp_path):
    ctx = contexts(config(script, max_tests=1), saves_objects(tmp_path))
    search, runner = adapter(ctx, OBJECTS)
    try:
        cand = smaller(OBJECTS)
        search.test_many([cand])
        ctx.limits.charge()  # the search spent its one test on it
        before = len(ctx.executors.log.jobs)
        search.rebase(cand)
        assert len(ctx.executors.log.jobs) == before
    finally:
        runner.close()


def test_a_reproducing_candidate_moves_the_search_deadline_at_once(script, contexts):
    ctx = contexts(config(script, max_time=3600, verify_runs=2))
    search, runner = adapter(ctx)
    try:
        ctx.limits.searching(original_wall=100.0, expected_wall=100.0, import_seconds=1.0)
        far = ctx.limits.deadline
        search.test_many([smaller()])  # a run of 10 ms
    finally:
        runner.close()
    # two fresh checks of a result of 10 ms (and the imports) instead of the original's 100 s
    assert ctx.limits.deadline - far > 190


def test_candidates_that_cannot_be_rendered_are_invalid_without_a_run(script, contexts):
    class Broken:
        @property
        def files(self):
            raise ValueError("libcst cannot print this")

    ctx = contexts(config(script))
    search, runner = adapter(ctx)
    try:
        assert search.test_many([Broken()]) == [Verdict.INVALID]
    finally:
        runner.close()
    assert ctx.executors.log.jobs == [] and search.oracle.stats.invalid == 1


def test_limits_are_a_budget_the_core_reads():
    limits = Limits(max_tests=2)
    assert limits.exhausted() is None
    limits.charge(2)
    assert limits.exhausted() == "test budget of 2 used up"


def test_hot_loops_stay_after_a_rebase_only_for_a_long_original_whatever_the_runs_took(script, contexts):
    # a count, not a run time: the same program is rebased alike on an idle and a busy machine
    hot = RunFacts(hot_loops=(("train.py", "for x in data:", 0.9),))
    for keep, wall in ((False, 5.0), (True, 0.01)):
        ctx = contexts(config(script), lambda text, job, wall=wall: bug(wall=wall) if NEEDLE in text else passes())
        runner = ctx.runner(Isolation.FORK)
        runner.start()
        try:
            oracle = Oracle(runner, Target(signature()), ctx.limits)
            search = Adapter(ctx, oracle, oracle.target, "train.py", hot, keep_hot=keep)
            cand = smaller(hot)
            assert search.test_many([cand]) == [Verdict.REPRODUCED]
            assert search.rebase(cand).program.facts.hot_loops == (hot.hot_loops if keep else ())
        finally:
            runner.close()
