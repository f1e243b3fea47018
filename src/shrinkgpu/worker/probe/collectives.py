"""Where a rank waits: each ``torch.distributed`` collective the script calls notes, in a
small file of its own rank, that it entered (which collective, its number in this rank,
the user's frames that called it) and that it left.

The launcher reads these files while the ranks run: when every rank still running has
sat in a collective, and not all in the same one, for long enough, the job hangs (a
collective one rank never reaches), and the files say which rank waits where.  A rank
that never enters a collective (busy evaluating while the others wait at a barrier) is
never taken for a hang.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import sys
import time
from typing import Any, Callable

from shrinkgpu.worker.probe.paths import is_user_file

# The collectives a script calls by name (``dist.barrier()``), point to point included.
COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor", "all_to_all",
    "all_to_all_single", "barrier", "monitored_barrier", "broadcast", "broadcast_object_list", "gather",
    "gather_object", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter", "scatter_object_list",
    "send", "recv",
)
MAX_FRAMES = 8


# Where this process notes its collectives: set again in a child the script forked
# (probe/children.py), which notes in a file of its own through the same wrappers.
_WHERE: dict[str, Any] = {"path": None, "counter": itertools.count(1)}


def watch_collectives(path: str, roots: tuple[str, ...], rel: Callable[[str], str]) -> None:
    """Wrap the collectives of ``torch.distributed`` so that each notes in ``path`` when
    it is entered and left, with the user's frames that called it (``rel``: a user's
    file's path relative to its root)."""
    _WHERE["path"], _WHERE["counter"] = path, itertools.count(1)
    try:
        import torch.distributed as dist
    except Exception:  # a torch without distributed support: nothing to watch
        return
    if not dist.is_available():
        return

    def note(record: dict[str, Any]) -> None:
        try:
            tmp = f"{_WHERE['path']}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(record, fh)
            os.replace(tmp, _WHERE["path"])
        except (OSError, TypeError):
            pass  # a note is an aid, never a reason for the run to fail

    def user_frames() -> list[list[Any]]:
        frames, frame = [], sys._getframe(2)
        while frame is not None and len(frames) < MAX_FRAMES:
            filename = frame.f_code.co_filename
            if is_user_file(filename, roots):
                frames.append([rel(filename), frame.f_lineno, frame.f_code.co_name])
            frame = frame.f_back
        return frames

    def wrapped(name: str, fn):
        @functools.wraps(fn)
        def collective(*args, **kwargs):
            seq = next(_WHERE["counter"])
            note({"in": f"torch.distributed.{name}", "seq": seq, "since": time.time(), "frames": user_frames()})
            try:
                return fn(*args, **kwargs)
            finally:
                note({"out": f"torch.distributed.{name}", "seq": seq, "since": time.time()})

        collective.__shrinkgpu_collective__ = True
        return collective

    for name in COLLECTIVES:
        fn = getattr(dist, name, None)
        if callable(fn) and not getattr(fn, "__shrinkgpu_collective__", False):
            setattr(dist, name, wrapped(name, fn))


def read_waiting(path: str) -> dict[str, Any] | None:
    """What a rank's file says it waits in (``in``, ``seq``, ``since``, ``frames``), or None
    when it is in no collective (or wrote nothing)."""
    try:
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None
    return record if "in" in record else None
