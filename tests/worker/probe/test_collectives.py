"""worker/probe/collectives.py: where a rank waits, noted by the collectives it calls."""

from __future__ import annotations

import json

import torch
import torch.distributed as dist

from shrinkgpu.worker.probe.collectives import COLLECTIVES, read_waiting, watch_collectives


def keep_collectives(monkeypatch) -> None:
    """Every collective put back as it was after the test (the wrappers replace them)."""
    for name in COLLECTIVES:
        if hasattr(dist, name):
            monkeypatch.setattr(dist, name, getattr(dist, name))


def test_a_collective_notes_that_it_was_entered_where_and_left(tmp_path, monkeypatch):
    path = str(tmp_path / "collectives.json")
    seen: list[dict | None] = []
    keep_collectives(monkeypatch)

    def blocking_barrier(*args, **kwargs):
        seen.append(read_waiting(path))  # while the rank waits inside it
        return None

    monkeypatch.setattr(dist, "barrier", blocking_barrier)
    monkeypatch.setattr(dist, "all_reduce", lambda *a, **k: None)
    root = str(tmp_path)
    (tmp_path / "train.py").write_text("def main(dist):\n    dist.barrier()\n")
    watch_collectives(path, (root,), lambda f: "train.py")
    namespace: dict = {}
    exec(compile((tmp_path / "train.py").read_text(), str(tmp_path / "train.py"), "exec"), namespace)
    namespace["main"](dist)
    [waiting] = seen
    assert waiting["in"] == "torch.distributed.barrier" and waiting["seq"] == 1
    assert waiting["frames"] == [["train.py", 2, "main"]]  # the user's frame, not the probe's
    assert read_waiting(path) is None  # left: in no collective now
    assert json.loads((tmp_path / "collectives.json").read_text())["out"] == "torch.distributed.barrier"


def test_wrapping_twice_keeps_one_wrapper(tmp_path, monkeypatch):
    keep_collectives(monkeypatch)
    monkeypatch.setattr(dist, "all_reduce", lambda *a, **k: None)
    path = str(tmp_path / "c.json")
    watch_collectives(path, (str(tmp_path),), lambda f: f)
    once = dist.all_reduce
    watch_collectives(path, (str(tmp_path),), lambda f: f)
    assert dist.all_reduce is once
    dist.all_reduce(torch.ones(1))
    record = json.loads((tmp_path / "c.json").read_text())
    assert (record["out"], record["seq"]) == ("torch.distributed.all_reduce", 1)
