"""Scripts launched as torchrun's ranks (issue 46), end to end with real worker processes
and real torch (gloo, on the CPU): the first error across ranks, a hang, a reduction to
the fewest ranks, nothing left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from shrinkgpu.launch import Launch
from shrinkgpu.reducer import ReduceConfig, reduce, run_observed
from shrinkgpu.worker import RunStatus

SHARDED_LABELS = textwrap.dedent("""\
    import os
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    labels = [0, 1, 2, 3, 1, 2, 3, 4]          # one label the 4-class head cannot have
    mine = labels[rank::world]
    for step, y in enumerate(mine):
        logits = torch.randn(1, 4)
        loss = F.cross_entropy(logits, torch.tensor([y]))
        dist.all_reduce(loss.detach())
    dist.destroy_process_group()
    """)

HANG = textwrap.dedent("""\
    import torch
    import torch.distributed as dist

    def evaluate():
        dist.all_reduce(torch.ones(1))           # rank 0 only

    dist.init_process_group("gloo")
    if dist.get_rank() == 0:
        evaluate()
    dist.barrier()
    """)


def config(script: Path, **kw) -> ReduceConfig:
    return ReduceConfig(script=script, cwd=script.parent, write=kw.pop("write", False),
                        launch=Launch(nproc=2, ranks=True, hang_after=kw.pop("hang_after", 20.0)), **kw)


def test_the_first_error_is_the_failing_ranks_and_the_script_reduces_to_one_plain_process(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SHARDED_LABELS)
    first = run_observed(config(script, keep_error="out of bounds")).observation
    assert first.signature.type == "IndexError" and first.rank == 1 and first.world_size == 2
    result = reduce(config(script, keep_error="Target 4 is out of bounds", extract=False, ablate=False,
                           max_tests=120))
    assert result.distributed["rank"] == 1 and result.distributed["world_size"] == 2
    assert result.distributed["reduced_world_size"] == 1  # one rank's shard holds the label too
    assert result.distributed["result"] == "python", result.notes  # reproduces without torch.distributed
    assert "reproduces without torch.distributed" in " ".join(result.notes)
    assert "F.cross_entropy(" in result.files["train.py"] and result.verified[0] == result.verified[1] > 0


def test_a_hang_names_where_each_rank_waits_and_leaves_no_process_or_port(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    started = time.monotonic()
    obs = run_observed(config(script, keep_error="x", hang_after=3.0, timeout=120)).observation
    assert time.monotonic() - started < 60
    assert obs.status is RunStatus.HANG and obs.signature.family.key == "hang"
    assert obs.signature.message == ("rank 0 waits in torch.distributed.all_reduce (in evaluate); rank 1 waits in "
                                     "torch.distributed.barrier (in <module>): a collective not every rank reaches")
    left = psutil.Process().children(recursive=True)
    assert not alive(left) and not listening(p.pid for p in left)


def test_killing_a_reduction_of_ranks_leaves_no_rank_and_no_port(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    proc = subprocess.Popen(
        [sys.executable, "-m", "shrinkgpu", "reduce", "--family", "hang", "--hang-after", "3", "-q",
         "--nproc-per-node", "2", str(script)],
        cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    seen: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        for p in psutil.Process(proc.pid).children(recursive=True):
            seen.setdefault(p.pid, p)
        if len([p for p in seen.values() if "request.json" in " ".join(cmdline(p))]) >= 2:
            break  # the original's two ranks are running
        time.sleep(0.2)
    assert len(seen) >= 3, [cmdline(p) for p in seen.values()]
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
    time.sleep(1.0)
    assert not alive(seen.values())
    assert not listening(seen)


def cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def alive(processes) -> list[str]:
    """The ones of ``processes`` still running (not zombies waiting to be reaped)."""
    out = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(" ".join(p.cmdline()))
        except psutil.Error:
            continue
    return out


def listening(pids) -> list[int]:
    """Ports some of ``pids`` still listen on (the store a rank 0 hosted)."""
    pids = set(pids)
    try:
        return [c.laddr.port for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN and c.pid in pids]
    except psutil.Error:
        pytest.skip("this machine does not let a process list its sockets")
