"""Which GPUs candidates may be pinned to, found without initialising CUDA here."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Mapping


def visible_gpus(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Device ids for ``CUDA_VISIBLE_DEVICES``, one per GPU the user's script could see.

    ``CUDA_VISIBLE_DEVICES`` (or ROCm's ``HIP_VISIBLE_DEVICES``) wins when set; otherwise
    ``nvidia-smi`` is asked.  torch is not imported: the reducer's process never needs a
    CUDA context, and importing torch here would cost seconds.
    """
    env = os.environ if env is None else env
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        value = env.get(var)
        if value is not None:
            ids = tuple(v.strip() for v in value.split(",") if v.strip() and v.strip() != "-1")
            return ids
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if out.returncode != 0:
        return ()
    return tuple(line.strip() for line in out.stdout.splitlines() if line.strip().isdigit())


def parse_gpus(text: str) -> tuple[str, ...]:
    ids = tuple(part.strip() for part in text.split(",") if part.strip())
    if not ids:
        raise ValueError("--gpus needs at least one device id, e.g. 0,1")
    return ids


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask, further limited by a cgroup CPU
    quota (a container started with ``--cpus 4`` on a 64-core host sees 64 in
    ``os.cpu_count()`` and gets 4)."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        count = min(count, max(1, int(quota + 0.999)))
    return max(1, count)


def _cgroup_quota() -> float | None:
    """CPUs' worth of time per period a cgroup grants, or None when unlimited/unknown."""
    try:  # cgroup v2: "max 100000" or "400000 100000"
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as fh:
            quota, period = fh.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:  # cgroup v1
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", encoding="ascii") as fh:
            quota_us = int(fh.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us", encoding="ascii") as fh:
            period_us = int(fh.read())
        return None if quota_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None
