"""Isolation: running a program as the user's script would run, one process per run.

``Runner`` prepares each run (``Sandbox``: a copy of the user's directory) as a ``Job``
holding the typed ``RunRequest`` the probe reads, and an ``Executor`` runs it: a fork
server or fresh interpreters today (worker/executors.py), one class per way to run;
actors of a Ray cluster (worker/ray_actors.py, which imports Ray only when a
``RayCluster`` is made).
Every message between the processes is a type of ``worker/protocol.py``.
"""

from shrinkgpu.worker.devices import usable_cpus
from shrinkgpu.worker.executors import (
    Dropped,
    Executor,
    ExecutorSettings,
    ForkServer,
    ForkUnavailable,
    FreshInterpreters,
    Isolation,
    Job,
    Placement,
    PreloadReport,
)
from shrinkgpu.worker.factory import Capacity, ExecutorFactory, Executors, LocalExecutors, default_executor
from shrinkgpu.worker.observation import Observation
from shrinkgpu.worker.protocol import Capture, ProbeReport, RunRequest, RunStatus, StateAt, Watch
from shrinkgpu.worker.ray_actors import RayCluster, RayExecutor, RayOptions, RayUnavailable
from shrinkgpu.worker.runner import Runner, ScriptSpec, cache_bytes, compile_caches, preload_candidates
from shrinkgpu.worker.sandbox import Sandbox, SandboxError, sweep_stale_sessions

__all__ = [
    "Capacity",
    "Capture",
    "Executor",
    "Executors",
    "LocalExecutors",
    "ExecutorFactory",
    "ExecutorSettings",
    "ForkServer",
    "ForkUnavailable",
    "FreshInterpreters",
    "Isolation",
    "Job",
    "Observation",
    "Placement",
    "Dropped",
    "PreloadReport",
    "ProbeReport",
    "RayCluster",
    "RayExecutor",
    "RayOptions",
    "RayUnavailable",
    "RunRequest",
    "RunStatus",
    "Runner",
    "Sandbox",
    "SandboxError",
    "ScriptSpec",
    "StateAt",
    "Watch",
    "cache_bytes",
    "compile_caches",
    "default_executor",
    "preload_candidates",
    "sweep_stale_sessions",
    "usable_cpus",
]
