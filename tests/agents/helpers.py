"""The stand-in command of the agents' tests (tests/data/agents/fake_shrinkgpu.py) and
what its run says."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil

FAKE = Path(__file__).resolve().parents[1] / "data" / "agents" / "fake_shrinkgpu.py"
# What the stand-in says before it answers (or waits), as the server's notifications word it.
FAKE_SAID = ["running the original in a fresh interpreter", "reducing 30 tokens", "3 candidates tested, 1 accepted",
             "best so far: 12 tokens, 2 lines", "running the candidate 3 times"]


def fake(mode: str, out: Path, *argv: str) -> list[str]:
    return [sys.executable, str(FAKE), mode, str(out), *argv]


def gone(pids, within: float = 10.0) -> bool:
    """Whether every process in ``pids`` is gone (or a zombie) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not [p for p in pids if alive(p)]:
            return True
        time.sleep(0.1)
    return False


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
