"""Isolation: running a program as the user's script would run, one process per run."""

from shrinkgpu.worker.devices import usable_cpus
from shrinkgpu.worker.observation import Observation
from shrinkgpu.worker.runner import (
    ForkUnavailable,
    Isolation,
    PreloadReport,
    Runner,
    ScriptSpec,
    preload_candidates,
)
from shrinkgpu.worker.sandbox import Sandbox, SandboxError, sweep_stale_sessions

__all__ = [
    "ForkUnavailable",
    "Isolation",
    "Observation",
    "PreloadReport",
    "Runner",
    "Sandbox",
    "SandboxError",
    "sweep_stale_sessions",
    "ScriptSpec",
    "preload_candidates",
    "usable_cpus",
]
