"""A group of processes as one run: the ranks torchrun starts (worker/ranks.py) or the
processes a script starts itself (probe/children.py).  Their observations become one
(``combine``, ``with_children``), and one rule says when the group hangs (``HangRule``).

The first error of a group is the root exception of the process that failed first, by
each process's own clock at the moment its error left the script (or its death, for one
killed by a signal).  What the others then say (a peer that closed its connection, a
collective that timed out, the parent's ``ProcessRaisedException`` quoting a child's
traceback) is a consequence and never taken for the first error, unless it is all there
is (a rank that left a collective early and exited cleanly).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal as _signal
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from shrinkgpu.families import Family, is_peer_consequence
from shrinkgpu.signature import Frame, OpRecord, Signature, normalize_message
from shrinkgpu.worker.observation import Observation
from shrinkgpu.worker.probe.collectives import read_waiting
from shrinkgpu.worker.protocol import Finished, RunStatus, Watch

# The parent's side of a child that failed: never the first error while a child's is known.
WRAPPERS = ("torch.multiprocessing.spawn.ProcessRaisedException",
            "torch.multiprocessing.spawn.ProcessExitedException")
_EXITED = re.compile(r"process (\d+) terminated with signal (SIG\w+)")

# (rank, where it waits: the collectives file's record)
Waiting = list[tuple[int, dict[str, Any]]]


def bring_back_capture(watch: Watch, own: Watch) -> None:
    """The call one process of the group captured (at ``own``'s path: a rank's, a
    child's), where the run's ``watch`` asked for it."""
    if watch.capture is None or own.capture is None or own.capture.path == watch.capture.path:
        return
    for suffix in ("", ".json"):
        source = Path(own.capture.path + suffix)
        if source.exists():
            os.replace(source, watch.capture.path + suffix)


def in_collective(obs: Observation, path: str | None, root: Path) -> Observation:
    """A rank killed by a signal in a collective (gloo's abort comes from a thread of its
    own, with no Python frame in the crash dump): its first error at the user's frame
    that called the collective, named as the operator."""
    sig = obs.signature
    if sig is None or obs.status is not RunStatus.SIGNAL or sig.frame is not None or not path:
        return obs
    waiting = read_waiting(path)
    if not waiting or not waiting.get("frames"):
        return obs
    file, line, function = waiting["frames"][0]
    try:
        source = (root / file).read_text(encoding="utf-8", errors="replace").splitlines()[int(line) - 1].strip()
    except (OSError, IndexError, ValueError):
        source = ""
    sig = dataclasses.replace(sig, frame=Frame(file, int(line), function, source), op=OpRecord(waiting["in"], ()),
                              stack=tuple((f, int(n)) for f, n, _fn in waiting["frames"]))
    return dataclasses.replace(obs, signature=sig)


def failed(obs: Observation) -> bool:
    """Whether a rank ended with an error (an infrastructure loss is no failure of its own)."""
    if obs.infra_error:
        return False
    return obs.signature is not None or obs.status in (RunStatus.SIGNAL, RunStatus.EXIT, RunStatus.NO_REPORT,
                                                       RunStatus.TIMEOUT)


# -- one hang rule ------------------------------------------------------------------------------
def stuck(waits: Sequence[tuple[int, dict[str, Any] | None]], ended: int) -> Waiting | None:
    """Where each process still running waits, when the group cannot go on: every one of
    them waits in a collective, and they are not all in the same one, or a peer has
    already ended (it will never join them); else None.  ``waits``: each running
    process and where it waits (None: in no collective); ``ended``: how many ended."""
    if not waits or any(w is None for _k, w in waits):
        return None
    running: Waiting = [(k, w) for k, w in waits if w is not None]
    if not ended and len({(w["in"], w["seq"]) for _k, w in running}) == 1:
        return None  # all in the same collective: slow, not stuck
    return running


class HangRule:
    """``stuck`` held for ``after`` seconds without a change: the group hangs.  The same
    rule for torchrun's ranks, forked ranks and the processes a script starts itself, so
    that a candidate and the fresh check of the same program are judged alike."""

    def __init__(self, after: float):
        self.after = after
        self._since: tuple[tuple, float] | None = None

    def check(self, waits: Sequence[tuple[int, dict[str, Any] | None]], ended: int,
              now: float | None = None) -> Waiting | None:
        now = time.monotonic() if now is None else now
        found = stuck(waits, ended)
        if found is None:
            self._since = None
            return None
        key = tuple((k, w["in"], w["seq"]) for k, w in found)
        if self._since is None or self._since[0] != key:
            self._since = (key, now)
            return None
        return found if now - self._since[1] >= self.after else None


def hang_observation(base: Observation, hang: Waiting, wall: float, world: int) -> Observation:
    """A group that hangs: where each process waits, and which ended before; ``base``:
    the observation the hang's stands on (the first waiting rank's, or the parent's)."""
    waiting = {k for k, _w in hang}
    parts = [f"rank {k} waits in {w['in']}" + (f" (in {w['frames'][0][2]})" if w.get("frames") else "")
             for k, w in hang]
    parts += [f"rank {k} ended" for k in range(world) if k not in waiting]
    message = "; ".join(parts) + ": a collective not every rank reaches"
    rank, first = hang[0]
    frame = None
    if first.get("frames"):
        file, line, function = first["frames"][0]
        frame = Frame(file, int(line), function, "")
    signature = Signature("Hang", message, normalize_message(message), OpRecord(first["in"], ()), frame,
                          family=Family.HANG, stack=tuple((f, int(n)) for f, n, _fn in first.get("frames") or ()))
    return dataclasses.replace(base, status=RunStatus.HANG, signature=signature, timed_out=False, infra_error=None,
                               exit_code=None, wall=wall, rank=rank, world_size=world)


# -- torchrun's ranks ---------------------------------------------------------------------------
def combine(observations: list[Observation], ended: list[float], stopped: set[int],
            hang: Waiting | None, world: int) -> Observation:
    """The job's observation from its ranks' (``ended``: when each rank's run ended, by
    this machine's clock; ``stopped``: the ranks stopped after a peer failed or hung)."""
    wall = max((o.wall for o in observations), default=0.0)
    lost = [o for k, o in enumerate(observations) if o.infra_error and k not in stopped]
    if lost:
        return lost[0]
    if hang is not None:
        return hang_observation(observations[hang[0][0]], hang, wall, world)
    ranked = [(k, o) for k, o in enumerate(observations) if k not in stopped or o.signature is not None]
    errors = [(k, o) for k, o in ranked if o.signature is not None]
    own = [(k, o) for k, o in errors if not is_peer_consequence(o.signature.type, o.signature.message)]

    def when(item) -> tuple[float, int]:
        k, o = item
        return (o.failed_at if o.failed_at is not None else ended[k], k)

    if own or errors:
        rank, chosen = min(own or errors, key=when)
        chosen = with_peer_facts(chosen, observations)
    else:
        ended_badly = [(k, o) for k, o in ranked if o.timed_out or (o.exit_code not in (0, None))]
        rank, chosen = min(ended_badly, key=when) if ended_badly else (0, observations[0])
        if not ended_badly:
            return dataclasses.replace(chosen, wall=wall, world_size=world)
    return dataclasses.replace(chosen, wall=wall, rank=rank, world_size=world)


def with_peer_facts(chosen: Observation, observations: list[Observation]) -> Observation:
    """A rank that died without its probe's report (gloo's abort) still ran the program
    every rank ran: what another rank's report says of it (the modules it imported, the
    environment, the files it read, argparse and configuration values, seeding) stands
    for it; the failing stack stays its own."""
    if chosen.modules or chosen.status is not RunStatus.SIGNAL:
        return chosen
    peer = next((o for o in observations if o.modules), None)
    if peer is None:
        return chosen
    return dataclasses.replace(chosen, modules=peer.modules, environment=chosen.environment or peer.environment,
                               reads=chosen.reads or peer.reads, parses=chosen.parses or peer.parses,
                               loads=chosen.loads or peer.loads, seed_sites=chosen.seed_sites or peer.seed_sites)


# -- the processes a script starts itself ---------------------------------------------------------
def child_observations(parent: Observation, observation: Path, crash_log: Path, stdout: Path, stderr: Path,
                       root: Path | None) -> dict[int, Observation]:
    """Each watched child's observation, from its report beside the parent's; a child that
    left none and that the parent says died by a signal, as a death by that signal."""
    died = {}
    if parent.signature is not None and parent.signature.type in WRAPPERS:
        died = {int(i): name for i, name in _EXITED.findall(parent.signature.message)}
    out: dict[int, Observation] = {}
    for child in parent.children:
        k = int(child["index"])
        path = Path(f"{observation}.child{k}")
        event = Finished(id=0, wall=parent.wall)
        if not path.exists():
            number = getattr(_signal.Signals, died.get(k, ""), None)
            if number is None:
                continue  # still running when the parent ended, or stopped by it: nothing of its own
            event = Finished(id=0, signal=int(number), wall=parent.wall)
        obs = Observation.from_run(event, path, stdout, stderr, crash_log=Path(f"{crash_log}.child{k}"), root=root)
        # (gloo's abort comes from a thread of its own: the frame is where the rank waited)
        out[k] = in_collective(obs, f"{observation}.collectives.child{k}", root) if root is not None else obs
    return out


def said_started(parent: Observation, observation: Path) -> Observation:
    """A parent that wrote no report (stopped with ranks that hang): the processes it said
    it started (``<observation>.started``, probe/children.py), and the modules it had
    imported then."""
    if parent.children:
        return parent
    try:
        said = json.loads(Path(f"{observation}.started").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return parent
    modules = parent.modules or tuple((m[0], m[1], m[2]) for m in said.get("modules") or ())
    return dataclasses.replace(parent, children=tuple(said.get("children") or ()), modules=modules)


def with_children(parent: Observation, children: dict[int, Observation],
                  hang: Waiting | None = None, starter: str | None = None) -> Observation:
    """The run of a script that started processes of its own, as one: the first error is
    the child's that failed first (its rank, its operator, its tensors), the parent's
    wrapper of it a consequence; what the run as a whole read, parsed and imported is the
    parent's, with the modules its children imported added (what a fork server
    preloads).  ``starter``: how the ranks start, when the parent, stopped with its
    hanging children, could not say."""
    if hang is not None:  # (the parent, stopped with its children, wrote no report of them)
        world = max([len(parent.children), *(k + 1 for k in children), *(k + 1 for k, _w in hang)])
        launcher = parent.children[0].get("launcher") if parent.children else starter
        base = dataclasses.replace(parent, modules=_merged_modules(parent, children.values()), world_size=world,
                                   launcher=launcher)
        return hang_observation(base, hang, parent.wall, world)
    if not parent.children or parent.infra_error:
        return parent
    world = len(parent.children)
    launcher = parent.children[0].get("launcher")
    modules = _merged_modules(parent, children.values())
    base = dataclasses.replace(parent, modules=modules, world_size=world, launcher=launcher)
    candidates = [(k, o) for k, o in children.items() if o.signature is not None]
    if parent.signature is not None and parent.signature.type not in WRAPPERS:
        candidates.append((None, parent))
    own = [(k, o) for k, o in candidates if not is_peer_consequence(o.signature.type, o.signature.message)]
    if not (own or candidates):
        return base

    def when(item) -> tuple[float, int]:
        k, o = item
        return (o.failed_at if o.failed_at is not None else float("inf"), -1 if k is None else k)

    rank, chosen = min(own or candidates, key=when)
    if rank is None:
        return base  # the parent's own error came first
    return dataclasses.replace(base, signature=chosen.signature, status=chosen.status, failed_at=chosen.failed_at,
                               rank=rank, environment=chosen.environment or parent.environment,
                               raised_calls=chosen.raised_calls, op_shapes=chosen.op_shapes or parent.op_shapes)


def _merged_modules(parent: Observation, children) -> tuple:
    seen = {name for name, _f, _l in parent.modules}
    extra = []
    for child in children:
        for module in child.modules:
            if module[0] not in seen:
                seen.add(module[0])
                extra.append(module)
    return tuple(parent.modules) + tuple(extra)


def children_waiting(collectives: str, observation: str) -> tuple[list[tuple[int, dict[str, Any] | None]], int]:
    """Where each child still running waits (from ``<collectives>.child<k>``, which a
    child writes as it starts) and how many ended (their reports are written)."""
    parent = Path(collectives).parent
    name = Path(collectives).name + ".child"
    waits, ended = [], 0
    for path in sorted(parent.glob(name + "*")):
        index = path.name[len(name):]
        if not index.isdigit():
            continue
        if Path(f"{observation}.child{index}").exists():
            ended += 1
            continue
        waits.append((int(index), read_waiting(str(path))))
    return waits, ended


def watch_group(read: Callable[[], tuple[list[tuple[int, dict[str, Any] | None]], int]], rule: HangRule,
                over: Callable[[], bool], poll: float = 0.2) -> Waiting | None:
    """Poll ``read`` (where the running processes wait, how many ended) until ``over()``
    or the rule says the group hangs; where they wait then, or None."""
    while not over():
        waits, ended = read()
        hang = rule.check(waits, ended)
        if hang is not None:
            return hang
        time.sleep(poll)
    return None
