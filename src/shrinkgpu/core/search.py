"""The reduction driver: passes, levels, a delta-debugging search, to a fixpoint.

The driver knows states only through three injected things: a ``test(state) ->
Verdict``, a ``size(state)`` order, and passes that propose *units* (edits) on a state
and build the state in which some units are applied.  States are immutable; a pass never
changes one, it describes a new one.

Each pass is asked for units level by level (``level`` 0, 1, 2, ... until it answers
``None``): a statement-deleting pass uses the level as nesting depth, which gives
hierarchical delta debugging; passes without levels answer only level 0.  Units of one
level go through one search together: ``probdd`` (the default, ``DEFAULT_SEARCH``:
probabilistic delta debugging, which learns which units are needed) or ``ddmin``.
Sweeps over all passes repeat until one makes no progress, so a pass that found
nothing is not re-run on an unchanged state.

Stopping (test budget, deadline, Ctrl-C) ends the search early with the best state
found so far: a candidate that reproduced is never lost.  ``Outcome.stopped`` says why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Protocol, Sequence, TypeVar

from shrinkgpu.core.ddmin import ddmin
from shrinkgpu.core.probdd import probdd
from shrinkgpu.core.verdict import Verdict

SEARCHES = ("ddmin", "probdd")
DEFAULT_SEARCH = "probdd"
# A unit that was needed in the last sweep is probably still needed: ProbDD tries it
# alone instead of letting it sink the groups it is put in.
NEEDED_BEFORE = 0.9

S = TypeVar("S")
U = TypeVar("U")


class Pass(Protocol[S, U]):
    name: str

    def units(self, state: S, level: int) -> Sequence[U] | None:
        """Edits to try at ``level``; ``None`` when there is no such level."""

    def apply(self, state: S, units: Sequence[U]) -> S:
        """The state with ``units`` applied."""

    # Optional: ``unit_key(state, unit) -> hashable``, equal for the same unit in later
    # states, so the search can remember which units were needed (see ``probdd``); and
    # ``unit_size(state, unit) -> number``, how much the unit removes (largest first).


@dataclass
class Budget:
    max_tests: int | None = None
    # A time.monotonic() value, read before every test: the caller may move it while the
    # search runs (the reducer does, as the time left for its final checks falls with the
    # program's run time).
    deadline: float | None = None


class ReductionStopped(Exception):
    def __init__(self, reason: str, result):
        super().__init__(reason)
        self.reason = reason
        self.result = result


# -- events, for whoever shows progress -------------------------------------------------
@dataclass(frozen=True)
class PassStarted:
    name: str
    level: int
    units: int
    size: Any  # the best state's ``size`` (the order the search minimises: a number or a tuple)


@dataclass(frozen=True)
class Tested:
    verdict: Verdict
    size: Any  # the tested state's ``size``
    best: Any  # the best state's ``size`` before this test
    tests: int


@dataclass(frozen=True)
class Improved:
    name: str
    size: Any  # the best state's ``size`` after the pass
    before: Any  # and before it


@dataclass
class Tracker(Generic[S]):
    """Counts tests, enforces the budget, and remembers the best state ever seen."""

    best: S
    best_size: Any  # whatever ``size`` returns: an int, or a tuple compared in order
    budget: Budget = field(default_factory=Budget)
    on_event: Callable[[object], None] | None = None
    tests: int = 0
    history: list = field(default_factory=list)  # states accepted, in order

    def emit(self, event: object) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def check(self) -> None:
        if self.budget.max_tests is not None and self.tests >= self.budget.max_tests:
            raise ReductionStopped(f"test budget of {self.budget.max_tests} used up", self.best)
        if self.budget.deadline is not None and time.monotonic() >= self.budget.deadline:
            raise ReductionStopped("time limit reached", self.best)

    def record(self, size, verdict: Verdict) -> None:
        self.tests += 1
        self.emit(Tested(verdict, size, self.best_size, self.tests))

    def accept(self, state: S, size) -> None:
        """The search committed to ``state``: it is the new best."""
        if size < self.best_size:
            self.best, self.best_size = state, size
            self.history.append(state)


@dataclass(frozen=True)
class Outcome(Generic[S]):
    best: S
    history: tuple  # every state accepted, oldest (the input) first, ``best`` last
    tests: int
    stopped: str | None  # why the search ended early, or None when it reached a fixpoint


def reduce_to_fixpoint(
    state: S,
    passes: Sequence[Pass] | Sequence[Sequence[Pass]],
    test: Callable[[S], Verdict],
    size: Callable[[S], Any],
    *,
    budget: Budget | None = None,
    on_event: Callable[[object], None] | None = None,
    max_sweeps: int | None = None,
    normalize: Callable[[S], S] | None = None,
    test_many: Callable[[list[S]], list[Verdict]] | None = None,
    jobs: int = 1,
    search: str = DEFAULT_SEARCH,
) -> Outcome[S]:
    """Reduce ``state`` (assumed interesting) until no pass makes progress.

    ``passes`` is a list of passes, or a list of *tiers* of passes, cheapest first.  A
    tier is swept until it stops making progress; then the next tier gets one sweep,
    and any progress there sends the search back to the first tier.  Fine-grained passes
    (one unit per expression) thus only ever see programs the coarse ones could not
    shrink further, which is where they pay off.

    ``normalize``, if given, is applied to the best state after each pass that improved
    it; it must return an equivalent state of the same size (a program re-parsed from its
    own text, say), which lets passes work on a simpler representation.

    ``test_many`` and ``jobs`` let the search judge ``jobs`` candidates at once (see
    ``ddmin`` and ``probdd``).  ``search`` is "probdd" (the default: it also learns across
    sweeps which units were needed, through the passes' optional ``unit_key``) or "ddmin".
    """
    budget = Budget() if budget is None else budget
    if search not in SEARCHES:
        raise ValueError(f"unknown search {search!r}; choose from {SEARCHES}")
    needed: set = set()
    tiers: list[Sequence[Pass]] = (
        [list(t) for t in passes] if passes and isinstance(passes[0], (list, tuple)) else [list(passes)]  # type: ignore[index]
    )
    tracker: Tracker[S] = Tracker(state, size(state), budget, on_event)
    tracker.history.append(state)

    def judged(candidate: S) -> Verdict:
        return judged_many([candidate])[0]

    def measured(candidate: S) -> int | None:
        try:
            return size(candidate)
        except Exception:  # a candidate that cannot even be built is just invalid
            return None

    def judged_many(candidates: list[S]) -> list[Verdict]:
        tracker.check()
        sizes = [measured(c) for c in candidates]
        # Only strictly smaller programs count as progress; this is what makes the sweep
        # terminate whatever the passes propose.
        runnable = [i for i, n in enumerate(sizes) if n is not None and n < tracker.best_size]
        verdicts = [Verdict.INVALID] * len(candidates)
        if runnable:
            try:
                if len(runnable) == 1 or test_many is None:
                    results = [test(candidates[i]) for i in runnable]
                else:
                    results = test_many([candidates[i] for i in runnable])
            except KeyboardInterrupt:
                raise ReductionStopped("interrupted", tracker.best) from None
            for i, v in zip(runnable, results):
                verdicts[i] = v
                tracker.record(sizes[i], v)
        return verdicts

    def sweep(tier: Sequence[Pass]) -> bool:
        before = tracker.best_size
        for p in tier:
            pass_start = tracker.best_size
            level = 0
            while True:
                current = tracker.best
                units = p.units(current, level)
                if units is None:
                    break
                level += 1
                if not units:
                    continue
                tracker.emit(PassStarted(p.name, level - 1, len(units), tracker.best_size))
                start_size = tracker.best_size
                index = list(range(len(units)))
                built: dict[tuple[int, ...], S] = {}

                def build(kept: Sequence[int], units=units, current=current, p=p, built=built) -> S:
                    # Memoised: the candidate ddmin accepts is one it just tested, and a
                    # rendered candidate is worth keeping.
                    key = tuple(kept)
                    if key not in built:
                        keep = set(kept)
                        built[key] = p.apply(current, [units[i] for i in index if i not in keep])
                    return built[key]

                def accept(kept: Sequence[int]) -> None:
                    chosen = build(kept)
                    tracker.accept(chosen, measured(chosen))

                key_of = getattr(p, "unit_key", None)
                keys = [key_of(current, u) for u in units] if key_of is not None else [None] * len(units)
                common = dict(
                    test_many=lambda many: judged_many([build(k) for k in many]),
                    jobs=jobs,
                    on_accept=accept,
                )
                if search == "probdd":
                    size_of = getattr(p, "unit_size", None)
                    sizes = [size_of(current, u) for u in units] if size_of is not None else [0] * len(units)
                    remaining = probdd(
                        index,
                        lambda kept: judged(build(kept)),
                        prior=lambda i, keys=keys: NEEDED_BEFORE if keys[i] in needed else 0.1,
                        weight=lambda i, sizes=sizes: sizes[i],
                        **common,
                    )
                else:
                    remaining = ddmin(index, lambda kept: judged(build(kept)), **common)
                needed.update(keys[i] for i in remaining if keys[i] is not None)
                if tracker.best_size < start_size:
                    tracker.emit(Improved(p.name, tracker.best_size, start_size))
            if normalize is not None and tracker.best_size < pass_start:
                tracker.best = normalize(tracker.best)
        return tracker.best_size < before

    sweeps = 0
    stopped: str | None = None
    try:
        tier = 0
        while tier < len(tiers):
            if max_sweeps is not None and sweeps >= max_sweeps:
                break
            sweeps += 1
            if sweep(tiers[tier]):
                tier = 0
            else:
                tier += 1
    except ReductionStopped as stop:
        stopped = stop.reason
    except KeyboardInterrupt:
        stopped = "interrupted"
    return Outcome(tracker.best, tuple(tracker.history), tracker.tests, stopped)
