"""worker/group.py: the one hang rule, and a script's own processes read as one run (the
processes themselves run in tests/worker/probe/test_children.py)."""

from __future__ import annotations

import dataclasses

from fakes import bug, passes, signature
from shrinkgpu.worker import Observation
from shrinkgpu.worker.group import HangRule, stuck, with_children

BARRIER = {"in": "torch.distributed.barrier", "seq": 3, "frames": [["train.py", 40, "main"]]}
ALL_REDUCE = {"in": "torch.distributed.all_reduce", "seq": 5, "frames": [["train.py", 31, "evaluate"]]}
OWN = signature("IndexError", "Target 4 is out of bounds.")
PEER = signature("RuntimeError", "[pair.cc:553] Connection closed by peer [127.0.0.1]:45963. This is typically caused "
                 "by a remote worker crashing.", op="torch.distributed.all_reduce")
WRAPPER = signature("torch.multiprocessing.spawn.ProcessRaisedException",
                    "\n\n-- Process 1 terminated with the following error:\nTraceback ...\nIndexError: Target 4 is "
                    "out of bounds.", op="torch.multiprocessing.spawn.spawn")
SPAWNED = ({"index": 0, "launcher": "mp.spawn", "method": "spawn"},
           {"index": 1, "launcher": "mp.spawn", "method": "spawn"})


# -- one hang rule ------------------------------------------------------------------------------
def test_ranks_in_different_collectives_are_stuck_and_in_the_same_one_are_slow():
    assert stuck([(0, ALL_REDUCE), (1, BARRIER)], ended=0) == [(0, ALL_REDUCE), (1, BARRIER)]
    assert stuck([(0, BARRIER), (1, BARRIER)], ended=0) is None


def test_a_peer_that_ended_while_the_others_wait_in_a_collective_is_a_hang():
    # rank 1 left (its early stop, a clean exit): rank 0 waits for it in a barrier forever,
    # whether or not every waiting rank is in the same collective
    assert stuck([(0, BARRIER)], ended=1) == [(0, BARRIER)]
    assert stuck([(0, BARRIER), (2, BARRIER)], ended=1) == [(0, BARRIER), (2, BARRIER)]


def test_a_rank_that_is_still_working_is_never_taken_for_a_hang():
    assert stuck([(0, ALL_REDUCE), (1, None)], ended=0) is None
    assert stuck([(0, BARRIER), (1, None)], ended=1) is None
    assert stuck([], ended=2) is None  # every rank ended: over, not stuck


def test_the_rule_holds_only_when_nothing_moved_for_its_time():
    rule = HangRule(after=20.0)
    waits = [(0, ALL_REDUCE), (1, BARRIER)]
    assert rule.check(waits, 0, now=100.0) is None
    assert rule.check(waits, 0, now=119.0) is None
    moved = [(0, dict(ALL_REDUCE, seq=6)), (1, BARRIER)]  # rank 0 went on to its next collective
    assert rule.check(moved, 0, now=119.5) is None
    assert rule.check(moved, 0, now=139.0) is None
    assert rule.check(moved, 0, now=139.6) == moved
    assert rule.check([(0, ALL_REDUCE), (1, None)], 0, now=200.0) is None  # rank 1 left its barrier


# -- a script's own processes ---------------------------------------------------------------------
def parent(sig=WRAPPER, **kw) -> Observation:
    return dataclasses.replace(bug(sig, wall=7.0, modules=(("torch", "/t/torch/__init__.py", None),), **kw),
                               children=SPAWNED)


def child(sig, at: float, **kw) -> Observation:
    return dataclasses.replace(bug(sig, **kw), failed_at=at)


def test_the_first_error_is_the_childs_not_the_parents_wrapper_of_it():
    obs = with_children(parent(), {0: child(PEER, 1.0), 1: child(OWN, 2.0, modules=(("gloo", None, None),))})
    # rank 0's closed connection came first by the clock, but it is what rank 1's failure
    # made of it; the parent's ProcessRaisedException only quotes rank 1's traceback
    assert obs.signature is OWN and (obs.rank, obs.world_size, obs.launcher) == (1, 2, "mp.spawn")
    assert obs.wall == 7.0  # the run's, the parent's
    assert [m[0] for m in obs.modules] == ["torch", "gloo"]  # what a fork server preloads: both's


def test_a_parent_that_failed_on_its_own_before_any_child_keeps_its_error():
    early = dataclasses.replace(parent(signature("ValueError", "bad --world-size")), failed_at=0.5)
    obs = with_children(early, {1: child(OWN, 2.0)})
    assert obs.signature.type == "ValueError" and obs.rank is None and obs.world_size == 2


def test_children_that_all_passed_leave_the_parents_observation():
    obs = with_children(dataclasses.replace(passes(), children=SPAWNED), {0: passes(), 1: passes()})
    assert obs.signature is None and obs.world_size == 2 and obs.launcher == "mp.spawn"


def test_a_hang_names_each_waiting_child_and_the_one_that_ended():
    stopped = dataclasses.replace(Observation(None, 9, False, 30.0, bug().status, None), children=())
    obs = with_children(stopped, {}, hang=[(0, ALL_REDUCE)])
    assert obs.signature.type == "Hang" and obs.world_size == 1
    obs = with_children(stopped, {1: passes()}, hang=[(0, ALL_REDUCE)])
    assert obs.signature.message == ("rank 0 waits in torch.distributed.all_reduce (in evaluate); rank 1 ended: a "
                                     "collective not every rank reaches")
    assert (obs.rank, obs.world_size) == (0, 2)
