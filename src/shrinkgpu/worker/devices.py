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
