"""reducer/pool.py: the plan of the workers and the pool the search runs in, with a fake
executor: each test hands the phase the values it takes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fakes import NEEDLE, SCRIPT, Log, bug, config, fails_with_needle, passes, signature
from shrinkgpu.families import Family
from shrinkgpu.reducer import plan_jobs, pool, run_threads
from shrinkgpu.reducer.pool import FLAKY_LANES, Measured, candidate_timeout, open_pool, pin_variable_for, plan_workers
from shrinkgpu.signature import Target
from shrinkgpu.worker import Capacity, Executors, Isolation


def test_more_jobs_than_cores_cap_each_candidates_threads(script, contexts, monkeypatch):
    monkeypatch.setattr(pool, "usable_cpus", lambda: 2)
    ctx = contexts(config(script, jobs=4))
    plan = plan_workers(ctx, bug(environment={"threads": {"torch": 2}}))
    assert (plan.jobs, plan.threads) == (4, 1)
    assert ctx.talk.notes == ["4 candidates at once on 2 CPU cores: each runs with 1 thread(s) where python "
                              "would use 2 (-j 1 keeps 2)"]


def test_an_out_of_memory_error_gets_one_candidate_per_gpu(script, contexts):
    oom = signature("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB", op=None)
    assert oom.family is Family.OUT_OF_MEMORY
    ctx = contexts(config(script, keep_error=None, family=Family.OUT_OF_MEMORY, gpus=("0", "1"), jobs=4))
    plan = plan_workers(ctx, bug(oom))
    assert (plan.jobs, plan.gpus) == (2, ("0", "1"))


def opened(ctx, behaviour_first=None, attempts=None, **measured):
    first = behaviour_first or bug()
    plan = plan_workers(ctx, first)
    files = {"train.py": SCRIPT}
    return open_pool(ctx, first, attempts or (first,), Target(first.signature), files,
                     Measured(files, "the original", first.wall), plan)


def test_a_flaky_original_is_measured_and_candidates_get_fork_servers_of_their_own_seeds(script, contexts):
    count = []

    def seven_in_ten(text, job):
        count.append(1)
        return bug() if NEEDLE in text and len(count) % 10 not in (1, 4, 7) else passes()

    ctx = contexts(config(script), seven_in_ten)
    opened_pool = opened(ctx)
    try:
        assert (opened_pool.rate.reproduced, opened_pool.rate.runs) == (7, 10)
        assert opened_pool.runner.lanes == FLAKY_LANES
    finally:
        opened_pool.close()


def test_forked_runs_that_fail_differently_send_every_candidate_to_fresh_interpreters(script, contexts):
    log = Log()

    def differs_when_forked(text, job):
        forked = log.jobs[-1][0] is Isolation.FORK
        return bug(signature("RuntimeError", "something else", op=None)) if forked else fails_with_needle(text, job)

    ctx = contexts(config(script), differs_when_forked, log)
    opened_pool = opened(ctx)
    opened_pool.close()
    assert opened_pool.runner.isolation is Isolation.FRESH
    assert opened_pool.calibration.walls == (0.01,)  # the original's own run: nothing forked is measured
    assert opened_pool.fresh_because.startswith("the original failed differently in a forked worker")


def test_the_calibration_sets_the_limits_every_later_run_reads(script, contexts):
    ctx = contexts(config(script))
    opened_pool = opened(ctx)
    opened_pool.close()
    assert len(opened_pool.calibration.walls) == pool.CALIBRATION_RUNS
    assert ctx.limits.timeout == opened_pool.calibration.timeout == 5.0  # the floor, for runs of 10 ms
    assert ctx.limits.fresh_timeout == opened_pool.calibration.fresh_timeout


def test_candidates_that_start_with_the_compile_caches_get_the_limit_of_the_runs_that_had_them():
    cold, warm = 39.6, [6.1, 6.3]
    assert candidate_timeout([cold, *warm], warm=True) == pytest.approx(6.3 * 10 + 1 + cold)
    assert candidate_timeout([cold, *warm], warm=False) == 397.0  # nothing copied: each compiles anew
    assert candidate_timeout([cold], warm=True) == 397.0  # no warm run measured


def test_a_compile_failure_is_run_once_eagerly_and_the_contrast_says_whether_it_passes(script, contexts):
    graph_break = signature("torch._dynamo.exc.Unsupported", "Data-dependent branching", op=None)
    assert graph_break.family is Family.COMPILE

    def passes_eagerly(text, job):
        return passes() if job.request.watch.eager else bug(graph_break)

    ctx = contexts(config(script, keep_error="Data-dependent"), passes_eagerly)
    opened_pool = opened(ctx, bug(graph_break))
    opened_pool.close()
    assert opened_pool.contrast is not None and opened_pool.contrast.passes and opened_pool.contrast.watch.eager
    assert [j.request.watch.eager for _, j in ctx.executors.log.jobs].count(True) == 1


def test_an_error_that_is_not_the_compilers_asks_for_no_contrast(script, contexts):
    ctx = contexts(config(script))
    opened_pool = opened(ctx)
    opened_pool.close()
    assert opened_pool.contrast is None
    assert not any(j.request.watch.eager for _, j in ctx.executors.log.jobs)
    assert Path(ctx.sandbox.session).is_dir()


def test_candidates_are_pinned_with_the_users_visibility_variable_or_the_backends():
    assert pin_variable_for({"HIP_VISIBLE_DEVICES": "1"}, {}) == "HIP_VISIBLE_DEVICES"
    assert pin_variable_for({}, {"hip": "6.2"}) == "HIP_VISIBLE_DEVICES"
    assert pin_variable_for({}, {"cuda": "12.8"}) == "CUDA_VISIBLE_DEVICES"


# -- jobs x threads <= cores ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("jobs", "gpus", "cores", "per_run", "planned"),
    [
        (None, 0, 2, 2, (1, None)),  # python uses both cores: one candidate at a time
        (None, 0, 16, 8, (2, None)),
        (None, 0, 8, 1, (8, None)),  # OMP_NUM_THREADS=1 in the user's environment
        (2, 0, 2, 2, (2, 1)),  # asked for two: each gets one core's worth
        (3, 0, 16, 8, (3, 5)),
        (None, 4, 16, 8, (4, 4)),  # one per GPU, the cores shared out
        (None, 1, 16, 8, (1, None)),
        (64, 0, 16, 8, (64, 1)),
    ],
)
def test_jobs_times_threads_never_exceeds_the_cores(jobs, gpus, cores, per_run, planned):
    got = plan_jobs(jobs, gpus, cores, per_run)
    assert got == planned
    n, cap = got
    assert n * (cap or per_run) <= max(cores, n)


@pytest.mark.parametrize(
    ("jobs", "cores", "per_run", "ranks", "planned"),
    [
        (None, 2, 5, 5, (1, None)),  # 5 ranks of one thread on 2 cores: as torchrun runs them, never more
        (None, 2, 10, 5, (1, 1)),  # 5 ranks of 2 threads on 2 cores: one each
        (None, 16, 8, 2, (2, None)),  # 2 ranks of 4 threads: two candidates fit
        (4, 16, 8, 2, (4, 2)),  # asked for 4: 16 cores / (4 x 2 ranks)
        (2, 2, 2, 2, (2, None)),  # 2 ranks of one thread, twice: at least one each
    ],
)
def test_a_candidates_ranks_share_its_cores(jobs, cores, per_run, ranks, planned):
    # The cap is each process's: a candidate of 5 ranks capped to 2 threads a rank would
    # run 10 threads where the user's torchrun ran 5.
    assert plan_jobs(jobs, 0, cores, per_run, ranks) == planned


def test_threads_per_run_come_from_the_fresh_runs_report():
    assert run_threads({"threads": {"torch": 4, "torch_interop": 4, "blas": 8}}) == 8
    assert run_threads({"threads": {"torch": 2}}) == 2
    assert run_threads({}) == 1


def test_every_gpu_the_machine_shows_gets_a_worker_when_none_are_named(script, contexts, monkeypatch):
    # `--gpus all`, or no --gpus: the GPUs found (here through the user's own visibility
    # variable), one candidate on each at once, each pinned with that variable
    monkeypatch.setattr(pool, "usable_cpus", lambda: 16)
    ctx = contexts(config(script, gpus=None, env={"CUDA_VISIBLE_DEVICES": "2,5,7"}))
    plan = plan_workers(ctx, bug())
    assert (plan.gpus, plan.jobs, plan.pin_variable) == (("2", "5", "7"), 3, "CUDA_VISIBLE_DEVICES")
    assert plan.first_device == {"CUDA_VISIBLE_DEVICES": "2"}


def test_candidates_that_run_elsewhere_get_threads_from_the_workers_cores(script, contexts, monkeypatch):
    # (a Ray cluster's factory says how many CPUs its workers hold: 8 workers x 1 CPU)
    monkeypatch.setattr(pool, "usable_cpus", lambda: 2)

    class Elsewhere(Executors):
        def __call__(self, isolation, settings):
            raise AssertionError("no executor is made while planning")

        def capacity(self):
            return Capacity(cores=8, workers=8)

    ctx = dataclasses.replace(contexts(config(script, jobs=8)), executors=Elsewhere())
    plan = plan_workers(ctx, bug(environment={"threads": {"torch": 4}}))
    assert (plan.jobs, plan.threads, plan.cores) == (8, 1, 8)
    assert ctx.talk.notes == ["8 candidates at once on 8 CPU cores of the workers: each runs with 1 thread(s) "
                              "where python would use 4 (-j 2 keeps 4)"]
