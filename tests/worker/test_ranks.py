"""worker/ranks.py: a job as torchrun's ranks, and the first error across them, with a
fake executor underneath (the real ranks run in tests/features/test_distributed.py)."""

from __future__ import annotations

import json
import time
from concurrent.futures import Future
from pathlib import Path

from fakes import bug, passes, signature
from shrinkgpu.families import Family
from shrinkgpu.launch import Launch
from shrinkgpu.worker import Executor, Isolation, Job, Observation, PreloadReport, RunRequest, RunStatus, Watch
from shrinkgpu.worker.group import combine
from shrinkgpu.worker.ranks import Ranks
from shrinkgpu.worker.sandbox import RunDir

OWN = signature("IndexError", "Target 6 is out of bounds.")
PEER = signature("RuntimeError", "[pair.cc:553] Connection closed by peer [127.0.0.1]:45963. This is typically caused "
                 "by a remote worker crashing.", op="torch.distributed.all_reduce")


def at(sig, when: float, **kw) -> Observation:
    import dataclasses

    return dataclasses.replace(bug(sig, **kw), failed_at=when)


def test_the_first_error_is_the_earliest_rank_that_failed_on_its_own():
    ended = [10.0, 10.0]
    obs = combine([at(PEER, 1.0), at(OWN, 2.0)], ended, set(), None, 2)
    # the peer's closed connection came first by the clock, but it is what rank 0 says
    # because rank 1 failed: never the first error while rank 1 has its own
    assert obs.signature is OWN and obs.rank == 1 and obs.world_size == 2
    obs = combine([at(OWN, 3.0), at(OWN, 2.0)], ended, set(), None, 2)
    assert obs.rank == 1  # the earlier of two own errors


def test_a_peers_consequence_is_the_first_error_when_it_is_all_there_is():
    # a rank left the collective early and exited cleanly: the other's closed connection is the bug
    obs = combine([passes(), at(PEER, 5.0)], [4.0, 5.0], set(), None, 2)
    assert obs.signature is PEER and obs.rank == 1


def test_a_rank_killed_by_a_signal_is_timed_by_when_its_run_ended():
    abort = Observation(None, 6, False, 1.0, RunStatus.SIGNAL,
                        signature("signal.SIGABRT", "killed by signal 6 (SIGABRT): gloo::EnforceNotMet", op=None))
    obs = combine([abort, at(PEER, 9.5)], [9.0, 9.6], set(), None, 2)
    assert obs.rank == 0 and obs.signature.type == "signal.SIGABRT"


def test_a_run_lost_to_the_infrastructure_is_the_jobs_and_a_stopped_rank_says_nothing():
    lost = Observation.infrastructure("the supervisor process exited")
    assert combine([lost, at(OWN, 1.0)], [1.0, 1.0], set(), None, 2).infra_error
    stopped = Observation.infrastructure("the run was cancelled")
    obs = combine([stopped, at(OWN, 1.0)], [2.0, 1.0], {0}, None, 2)
    assert obs.signature is OWN and obs.rank == 1


def test_ranks_that_all_pass_are_a_pass():
    obs = combine([passes(), passes()], [1.0, 1.0], set(), None, 2)
    assert obs.signature is None and obs.rank is None and not obs.failed


class Waiting(Executor):
    """Each rank's run waits until it is cancelled, or ends as ``ends(rank)`` says."""

    isolation = Isolation.FORK

    def __init__(self, ends):
        self.ends = ends
        self.jobs: list[Job] = []
        self.futures: list[Future] = []

    def start(self, preload=()):
        return PreloadReport((), (), 0.0, Isolation.FORK)

    def submit(self, job: Job) -> Future:
        self.jobs.append(job)
        future: Future = Future()
        end = self.ends(int(job.env["RANK"]), job)
        if end is not None:
            future.set_result(end)
        self.futures.append(future)
        return future

    def cancel(self, future: Future) -> None:
        if not future.done():
            future.set_result(Observation.infrastructure("the run was cancelled"))

    @property
    def alive(self):
        return True

    def close(self):
        pass


def job_in(tmp_path: Path) -> Job:
    run = RunDir(path=tmp_path / "run", root=tmp_path / "run" / "root")
    run.root.mkdir(parents=True)
    request = RunRequest(script=str(run.root / "t.py"), argv=("t.py",), cwd=str(run.root),
                         observation=str(run.observation), crash_log=str(run.crash_log), roots=(str(run.root),),
                         watch=Watch(keep_raised=str(tmp_path / "raised")))
    return Job(request=request, run=run, timeout=60.0, stdin=tmp_path / "stdin", env={"TMPDIR": "/t"})


def test_each_rank_runs_with_its_environment_its_files_and_one_port(tmp_path):
    inner = Waiting(lambda rank, job: passes())
    ranks = Ranks(inner, Launch(nproc=2, ranks=True))
    ranks.submit(job_in(tmp_path)).result(timeout=10)
    r0, r1 = inner.jobs
    assert (r0.env["RANK"], r1.env["RANK"]) == ("0", "1") and r0.env["MASTER_PORT"] == r1.env["MASTER_PORT"]
    assert r0.env["TMPDIR"] == "/t" and r1.env["WORLD_SIZE"] == "2"
    assert r0.run.path != r1.run.path and r0.run.root == r1.run.root  # own output, one copy of the files
    assert r1.request.watch.keep_raised == str(tmp_path / "raised") + ".rank1"
    assert r0.request.watch.collectives == str(r0.run.path / "collectives.json")


def test_a_failed_rank_gives_the_others_their_grace_then_they_are_stopped(tmp_path):
    inner = Waiting(lambda rank, job: at(OWN, time.time()) if rank == 1 else None)
    ranks = Ranks(inner, Launch(nproc=2, ranks=True), grace=0.3)
    started = time.monotonic()
    obs = ranks.submit(job_in(tmp_path)).result(timeout=10)
    assert obs.signature is OWN and obs.rank == 1
    assert 0.3 <= time.monotonic() - started < 5
    assert inner.futures[0].result().infra_error == "the run was cancelled"


def test_ranks_that_wait_in_collectives_not_all_reach_hang_and_are_stopped(tmp_path):
    def waits(rank, job):
        where = ("torch.distributed.all_reduce", "evaluate") if rank == 0 else ("torch.distributed.barrier", "main")
        Path(job.request.watch.collectives).write_text(json.dumps(
            {"in": where[0], "seq": 3, "since": time.time(), "frames": [["train.py", 40 + rank, where[1]]]}))
        return None  # never ends on its own

    inner = Waiting(waits)
    obs = Ranks(inner, Launch(nproc=2, ranks=True, hang_after=0.5)).submit(job_in(tmp_path)).result(timeout=10)
    assert obs.status is RunStatus.HANG and obs.signature.family is Family.HANG
    assert obs.signature.message == ("rank 0 waits in torch.distributed.all_reduce (in evaluate); rank 1 waits in "
                                     "torch.distributed.barrier (in main): a collective not every rank reaches")
    assert obs.signature.op.name == "torch.distributed.all_reduce" and obs.signature.frame.file == "train.py"
    assert all(f.result().infra_error == "the run was cancelled" for f in inner.futures)


def test_ranks_in_the_same_collective_are_slow_not_stuck(tmp_path):
    def same(rank, job):
        Path(job.request.watch.collectives).write_text(json.dumps(
            {"in": "torch.distributed.all_reduce", "seq": 3, "since": time.time(), "frames": []}))
        return None

    inner = Waiting(same)
    future = Ranks(inner, Launch(nproc=2, ranks=True, hang_after=0.3)).submit(job_in(tmp_path))
    time.sleep(1.0)
    assert not future.done()
    for f in inner.futures:
        f.set_result(passes())
    assert future.result(timeout=5).status is RunStatus.OK


def test_a_peer_that_went_away_is_one_fact_whichever_way_tcp_ended_it():
    from shrinkgpu.signature import normalize_message

    closed = normalize_message("[/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:45963. This is "
                               "typically caused by a remote worker crashing.")
    reset = normalize_message("[/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:21398: Connection reset by "
                              "peer. This is typically caused by a remote worker hanging.")
    assert closed == reset == "gloo: the connection to a peer ended"


def test_a_rank_that_died_without_a_report_takes_the_programs_facts_from_a_peers():
    abort = Observation(None, 6, False, 1.0, RunStatus.SIGNAL,
                        signature("signal.SIGABRT", "killed by signal 6 (SIGABRT): gloo::EnforceNotMet", op=None))
    peer = at(PEER, 9.5, modules=(("metrics", "/r/metrics.py", "metrics.py"),), reads=("data.csv",))
    obs = combine([abort, peer], [9.0, 9.6], set(), None, 2)
    assert obs.rank == 0 and obs.signature.type == "signal.SIGABRT"
    assert obs.modules == (("metrics", "/r/metrics.py", "metrics.py"),) and obs.reads == ("data.csv",)
