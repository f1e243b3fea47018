"""Isolation: running a program as the user's script would run, one process per run."""

from shrinkgpu.worker.observation import Observation
from shrinkgpu.worker.runner import Isolation, PreloadReport, Runner, ScriptSpec, preload_candidates

__all__ = ["Isolation", "Observation", "PreloadReport", "Runner", "ScriptSpec", "preload_candidates"]
