"""factory.py: which executor a reduction gets for an isolation and a launch, and what a
factory says its candidates run on.  Nothing here starts a process: an executor is
made lazily and only ``start`` forks or execs."""

from __future__ import annotations

import dataclasses

from shrinkgpu.launch import PLAIN
from shrinkgpu.worker.executors import ExecutorSettings, ForkServer, FreshInterpreters, Isolation
from shrinkgpu.worker.factory import Capacity, Executors, LocalExecutors, default_executor
from shrinkgpu.worker.ranks import Ranks, Torchrun

SETTINGS = ExecutorSettings(env={"PATH": "/usr/bin:/bin"})
RANKS = dataclasses.replace(SETTINGS, launch=dataclasses.replace(PLAIN, nproc=2, ranks=True))


def test_a_plain_script_gets_a_fork_server_or_fresh_interpreters_by_its_isolation():
    assert type(default_executor(Isolation.FORK, SETTINGS)) is ForkServer
    assert type(default_executor(Isolation.FRESH, SETTINGS)) is FreshInterpreters


def test_torchruns_ranks_are_forked_ranks_for_candidates_and_torchrun_itself_for_a_fresh_run():
    forked = default_executor(Isolation.FORK, RANKS)
    assert type(forked) is Ranks
    fresh = default_executor(Isolation.FRESH, RANKS)
    # what the user runs: torchrun, not python (a FreshInterpreters of its own kind)
    assert type(fresh) is Torchrun


def test_a_plain_function_becomes_a_factory_of_this_machines_capacity_and_a_factory_stays_itself():
    made = []

    def make(isolation, settings):
        made.append((isolation, settings))
        return FreshInterpreters(settings)

    factory = Executors.of(make)
    assert isinstance(factory, Executors)
    assert factory.capacity() == Capacity(cores=None, workers=None)
    assert type(factory(Isolation.FRESH, SETTINGS)) is FreshInterpreters
    assert made == [(Isolation.FRESH, SETTINGS)]
    assert Executors.of(factory) is factory
    assert Executors.of(default_executor) is default_executor


def test_a_factory_says_what_its_candidates_run_on_when_it_knows():
    class Cluster(LocalExecutors):
        def capacity(self) -> Capacity:
            return Capacity(cores=8, workers=8)

    assert Cluster().capacity() == Capacity(cores=8, workers=8)
    assert LocalExecutors().capacity() == Capacity()
