"""Which GPUs candidates may be pinned to, found without initialising CUDA here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Mapping

# The variables a user restricts devices with, in the order a ROCm or CUDA runtime reads
# them; whichever is set, its values are the ids a candidate is pinned with.
VISIBILITY_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")


def visible_gpus(env: Mapping[str, str] | None = None, *, nvidia_smi: str | None = None) -> tuple[str, ...]:
    """Device ids to pin candidates with, one per GPU the user's script could see.

    Nothing here initialises CUDA or HIP (torch is not imported: a CUDA context in the
    reducer would be wasted, and the detection must work before any run):

    * a visibility variable the user set wins (``CUDA_VISIBLE_DEVICES``,
      ``HIP_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES``), its values kept as given;
    * NVIDIA: ``nvidia-smi -L``; a GPU split into MIG instances is pinned by the
      instances' UUIDs (its index would hand a candidate every instance);
    * ROCm: the kernel driver's topology (``/sys/class/kfd``), the GPUs in order.
    """
    env = os.environ if env is None else env
    for var in VISIBILITY_VARIABLES:
        value = env.get(var)
        if value is not None:
            return tuple(v.strip() for v in value.split(",") if v.strip() and v.strip() != "-1")
    listed = _nvidia_devices(nvidia_smi or shutil.which("nvidia-smi"))
    if listed:
        return listed
    return _rocm_devices()


_GPU_LINE = re.compile(r"^GPU (?P<index>\d+): .*\(UUID: (?P<uuid>GPU-[^)]+)\)")
_MIG_LINE = re.compile(r"^\s+MIG .*\(UUID: (?P<uuid>MIG-[^)]+)\)")


def parse_nvidia_smi_list(text: str) -> tuple[str, ...]:
    """Ids from ``nvidia-smi -L``: a GPU's index, or its MIG instances' UUIDs."""
    out: list[str] = []
    current: str | None = None
    migs: list[str] = []
    for line in text.splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu is not None:
            if current is not None:
                out += migs or [current]
            current, migs = gpu.group("index"), []
            continue
        mig = _MIG_LINE.match(line)
        if mig is not None and current is not None:
            migs.append(mig.group("uuid"))
    if current is not None:
        out += migs or [current]
    return tuple(out)


def _nvidia_devices(smi: str | None) -> tuple[str, ...]:
    if smi is None:
        return ()
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if out.returncode != 0:
        return ()
    return parse_nvidia_smi_list(out.stdout)


def _rocm_devices(nodes: Path = KFD_NODES) -> tuple[str, ...]:
    """GPU nodes of the kernel driver's topology (CPU nodes have no SIMD units)."""
    count = 0
    try:
        entries = sorted(nodes.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    except OSError:
        return ()
    for node in entries:
        try:
            props = (node / "properties").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        simd = re.search(r"^simd_count (\d+)$", props, re.M)
        if simd is not None and int(simd.group(1)) > 0:
            count += 1
    return tuple(str(i) for i in range(count))


def parse_gpus(text: str) -> tuple[str, ...] | None:
    """``--gpus``: device ids, or None for ``all`` (every GPU ``visible_gpus`` finds)."""
    if text.strip().lower() == "all":
        return None
    ids = tuple(part.strip() for part in text.split(",") if part.strip())
    if not ids:
        raise ValueError("--gpus needs at least one device id, e.g. 0,1, or all")
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
