"""Where the state at the failing step is saved, and what the saved state is to the passes.

The first run counted, for each loop around the failure, the iteration it failed in
(``Observation.loops``: frames outermost first, each frame's loops outermost first).
The state is saved in the outermost frame that was past its first iteration somewhere
(``train()``'s ``for epoch`` / ``for batch``, not ``forward``'s ``for layer``: the
earlier iterations to skip are the training), at the start of its innermost loop's
failing iteration.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Mapping

from shrinkgpu.syntax import StateRecord
from shrinkgpu.worker import Observation, StateAt

# A first run shorter than this is cut faster by the search than replayed: the state
# run and its check cost two runs of the original before the search.  In units of what
# the run's interpreter took to import torch (``Limits.startups``), of the script's own
# time after it: a busy machine slows both alike and takes the same decision.  Six
# imports is about 10 s of a run on the development machine (1.6 s an import); the
# README's fixtures run under 2 imports, the long suites' originals over 25.
LONG_RUN = 6.0

# What a method called on a name does to the value it holds: these change it in place.
_MUTATORS = {
    "append", "extend", "insert", "pop", "popleft", "appendleft", "remove", "clear", "update", "add",
    "discard", "setdefault", "sort", "reverse",
}


@dataclass(frozen=True)
class StatePoint:
    """Where to save: the loop (``header`` line, its ``header_text``) in ``file`` whose
    iteration ``iteration`` starts the failing step, with its frame's loops at
    ``iterations``; ``names``: what that frame's loops bind or change."""

    file: str
    header: int
    header_text: str
    iteration: int
    iterations: tuple[tuple[int, int], ...]
    names: tuple[str, ...]
    # which call of the function that holds the loop the failure came in (0: unknown):
    # an ``evaluate()`` called for validation during training, then on the test set
    call: int = 0

    def watch(self, path: Path, progress: Path | None = None) -> StateAt:
        return StateAt(self.file, self.header, self.iterations, str(path), self.names,
                       str(progress) if progress is not None else None, self.call)


def _spans(text: str) -> dict[int, ast.For]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    return {node.lineno: node for node in ast.walk(tree) if isinstance(node, ast.For)}


def _inside(inner: ast.For, outer: ast.For) -> bool:
    return outer.lineno < inner.lineno <= (outer.end_lineno or outer.lineno)


def loop_names(loop: ast.For) -> tuple[str, ...]:
    """Names (and ``name.attribute``s) the loop binds or changes in place: its targets,
    what its body assigns, the receivers of ``append``-like calls and of in-place tensor
    methods (``buf.add_(x)``); ``name.*`` for the receiver of any other method call (an
    object of the user's that its methods change: its data attributes are saved)."""
    out: set[str] = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name):
            out.add(f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            method = node.func.attr
            if (isinstance(receiver, ast.Name)
                    and (method in _MUTATORS or (method.endswith("_") and not method.startswith("_")))):
                out.add(receiver.id)
            elif isinstance(receiver, ast.Name):
                # ``env.step(a)``: an object of the user's whose methods change it; its
                # attributes that are data are saved (``name.*``), not a value bound to it
                out.add(f"{receiver.id}.*")
        elif (isinstance(node, (ast.Subscript,)) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)):
            out.add(node.value.id)
    return tuple(sorted(out))


def state_point(first: Observation, files: Mapping[str, str], main: str,
                hot: tuple[tuple[str, str, float], ...] = ()) -> StatePoint | str:
    """Where the failing step starts, or why the state cannot be saved.  ``hot``: the
    loops where the run's time went (``Facts.hot_loops``): when the failure came in the
    first iteration of the loops around it but the time went into another loop before
    them (training, then an evaluation that fails at its first batch), the state at the
    start of that first iteration is what lets the training go."""
    loops = list(first.loops)
    if not loops:
        return "no for loop was around the failure"
    groups: list[list[tuple[str, int, int, ast.For]]] = []
    spans_of: dict[str, dict[int, ast.For]] = {}
    for file, line, iteration in loops:
        spans = spans_of.setdefault(file, _spans(files.get(file, "")))
        node = spans.get(line)
        if node is None:
            continue
        last = groups[-1][-1] if groups else None
        if last is not None and last[0] == file and _inside(node, last[3]):
            groups[-1].append((file, line, iteration, node))
        else:
            groups.append([(file, line, iteration, node)])
    group = next((g for g in groups if any(it > 0 for _f, _l, it, _n in g)), None)
    if group is None and groups:
        around = {(f, files[f].splitlines()[ln - 1].strip()) for g in groups for f, ln, _it, _n in g}
        if any((f, h) not in around for f, h, _share in hot):
            group = groups[0]
    if group is None:
        return "the failure came in the first iteration of every loop around it: there are no earlier ones to skip"
    file = group[0][0]
    if PurePosixPath(file).parent != PurePosixPath(main).parent:
        return f"the loops are in {file}, outside the main script's directory"
    _f, line, iteration, node = group[-1]
    header_text = files[file].splitlines()[line - 1].strip()
    calls = {(f, ln): n for f, ln, n in first.loop_calls}
    return StatePoint(
        file, line, header_text, iteration,
        tuple((ln, it) for _f, ln, it, _n in group),
        loop_names(group[0][3]),
        calls.get((file, line), 0),
    )


def long_run(wall: float, limits) -> bool:
    """Whether an original whose fresh run took ``wall`` is long enough for the starts
    that skip its steps (the saved state, the cuts, the files its loops wrote) and for
    its hot loops to stay worth cutting first: its own time after torch's import, in
    units of that import (``limits``: the reduction's ``Limits``, which keeps the pace
    the first run measured)."""
    return limits.startups(wall - limits.startup) >= LONG_RUN


def state_record(saved: dict, point: StatePoint, state_file: str, files_dir: str = "") -> StateRecord:
    """The fact the replay pass reads, from what the probe saved; ``files_dir``: where
    the files the run wrote before the iteration are, beside the state file."""
    return StateRecord(
        file=point.file,
        header=point.header_text,
        iteration=int(saved.get("iteration", point.iteration)),
        function=str(saved.get("function") or "<module>"),
        entries=tuple((e["expr"], e["kind"]) for e in saved.get("entries") or ()),
        rng=tuple(saved.get("rng") or ()),
        state_file=state_file,
        directory=(str(PurePosixPath(point.file).parent) if PurePosixPath(point.file).parent != PurePosixPath(".")
                   else ""),
        files_dir=files_dir if saved.get("files") else "",
    )


def describe_left(saved: dict) -> str:
    """What the state left out, for a replay that did not fail the same way."""
    left = saved.get("left") or ()
    if not left:
        return ""
    shown = "; ".join(f"{e['expr']}: {e['why']}" for e in left[:4])
    return f" (not saved: {shown}{'; ...' if len(left) > 4 else ''})"


__all__ = ["LONG_RUN", "StatePoint", "describe_left", "long_run", "loop_names", "state_point",
           "state_record"]
