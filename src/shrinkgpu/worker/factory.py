"""How a reduction gets its executors: an ``ExecutorFactory`` makes the executor of an
isolation for a runner's settings, and says what its candidates run on
(``Capacity``), which the thread pools are sized to (reducer/pool.py).

``LocalExecutors`` is this machine's (``default_executor``): a fork server or fresh
interpreters, each wrapped by torchrun's ranks when the script is launched that way.
``RayCluster`` (worker/ray_actors.py) is another; a test's fake is a third.  A plain
function ``(isolation, settings) -> Executor`` becomes one with ``Executors.of``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Callable

from shrinkgpu.worker.executors import Executor, ExecutorSettings, ForkServer, FreshInterpreters, Isolation
from shrinkgpu.worker.ranks import Ranks, Torchrun


@dataclass(frozen=True)
class Capacity:
    """What an executor's candidates run on: the cores their workers hold in all, and
    how many workers take candidates (None: this machine's cores; one worker per
    candidate in flight)."""

    cores: int | None = None
    workers: int | None = None


class Executors(abc.ABC):
    """An executor factory: ``factory(isolation, settings) -> Executor``."""

    @abc.abstractmethod
    def __call__(self, isolation: Isolation, settings: ExecutorSettings) -> Executor:
        """The executor that runs ``isolation``'s jobs with ``settings``."""

    def capacity(self) -> Capacity:
        """What the candidates run on: this machine, unless the factory says otherwise."""
        return Capacity()

    @staticmethod
    def of(make: Callable[[Isolation, ExecutorSettings], Executor]) -> "Executors":
        """A plain function as a factory of this machine's capacity."""
        return make if isinstance(make, Executors) else _Plain(make)


class _Plain(Executors):
    def __init__(self, make: Callable[[Isolation, ExecutorSettings], Executor]):
        self.make = make

    def __call__(self, isolation: Isolation, settings: ExecutorSettings) -> Executor:
        return self.make(isolation, settings)


# What every layer above takes: a factory (a plain function is made one with ``Executors.of``).
ExecutorFactory = Executors


class LocalExecutors(Executors):
    """This machine's executor for ``isolation``: for a script launched as torchrun's
    ranks, each job's ranks through it (worker/ranks.py)."""

    def __call__(self, isolation: Isolation, settings: ExecutorSettings) -> Executor:
        if not settings.launch.ranks:
            return ForkServer(settings) if isolation is Isolation.FORK else FreshInterpreters(settings)
        # forked ranks for the candidates; a fresh run is what the user runs: torchrun itself
        return Ranks(ForkServer(settings), settings.launch) if isolation is Isolation.FORK else Torchrun(settings)


default_executor = LocalExecutors()
