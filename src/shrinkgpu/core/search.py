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
from typing import Any, Callable, Generic, Protocol, Sequence, TypeVar, cast

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


class Budget:
    """What a search may spend: ``max_tests`` tests, and time until ``deadline`` (a
    value of ``now()``, ``time.monotonic()`` here).  The search asks ``exhausted()``
    before each test and ``charge()``s each one here, the one place tests are counted.  A
    caller that spends the same budget outside the search (a run the search did not ask
    for), whose deadline moves while the search runs, or whose clock is another (a fake
    one in tests), subclasses it: the search reads nothing else."""

    def __init__(self, max_tests: int | None = None, deadline: float | None = None):
        self.max_tests = max_tests
        self.deadline = deadline
        self.charged = 0

    def charge(self, tests: int = 1) -> None:
        self.charged += tests

    def now(self) -> float:
        return time.monotonic()

    def exhausted(self) -> str | None:
        """Why nothing more may be spent, or None."""
        if self.max_tests is not None and self.charged >= self.max_tests:
            return f"test budget of {self.max_tests} used up"
        deadline = self.deadline
        if deadline is not None and self.now() >= deadline:
            return "time limit reached"
        return None


class ReductionStopped(Exception):
    def __init__(self, reason: str, result: Any):  # ``result``: the best state so far
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
    history: list[S] = field(default_factory=list)  # states accepted, in order
    # tests run beside others in a batch whose verdicts the search then did not use:
    # what judging candidates in parallel cost beyond one at a time
    unused: int = 0

    def emit(self, event: object) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def check(self) -> None:
        reason = self.budget.exhausted()
        if reason is not None:
            raise ReductionStopped(reason, self.best)

    def record(self, size: Any, verdict: Verdict) -> None:
        self.tests += 1
        self.budget.charge()
        self.emit(Tested(verdict, size, self.best_size, self.tests))

    def accept(self, state: S, size: Any) -> None:
        """The search committed to ``state``: it is the new best (never one that is no
        candidate, ``size`` None)."""
        if size is not None and size < self.best_size:
            self.best, self.best_size = state, size
            self.history.append(state)


@dataclass(frozen=True)
class Outcome(Generic[S]):
    best: S
    history: tuple[S, ...]  # every state accepted, oldest (the input) first, ``best`` last
    tests: int
    stopped: str | None  # why the search ended early, or None when it reached a fixpoint
    unused: int = 0  # of ``tests``, those run in parallel whose verdicts went unused


def reduce_to_fixpoint(
    state: S,
    passes: Sequence[Pass[S, Any]] | Sequence[Sequence[Pass[S, Any]]],
    test: Callable[[S], Verdict],
    size: Callable[[S], Any],
    *,
    budget: Budget | None = None,
    on_event: Callable[[object], None] | None = None,
    normalize: Callable[[S], S] | None = None,
    test_many: Callable[[list[S]], list[Verdict]] | None = None,
    jobs: int = 1,
    search: str = DEFAULT_SEARCH,
) -> Outcome[S]:
    """Reduce ``state`` (assumed interesting) until no pass makes progress.

    ``size(state)`` is the order the search minimises; only states strictly smaller than
    the best are tested.  It may return None: the state is no candidate at all (a bound
    of the caller's own, such as "never more tokens than the start"), and is not tested.

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
    if search not in SEARCHES:
        raise ValueError(f"unknown search {search!r}; choose from {SEARCHES}")
    # (a list of tiers or one tier: told apart by the first element, which no isinstance
    # on it narrows ``passes`` by)
    tiers: list[Sequence[Pass[S, Any]]] = (
        [list(t) for t in cast("Sequence[Sequence[Pass[S, Any]]]", passes)]
        if passes and isinstance(passes[0], (list, tuple))
        else [list(cast("Sequence[Pass[S, Any]]", passes))]
    )
    tracker: Tracker[S] = Tracker(state, size(state), Budget() if budget is None else budget, on_event)
    tracker.history.append(state)
    fixpoint = Fixpoint(tracker, test, size, normalize, test_many, jobs, search)
    stopped: str | None = None
    try:
        tier = 0
        while tier < len(tiers):
            if fixpoint.sweep(tiers[tier]):
                tier = 0
            else:
                tier += 1
    except ReductionStopped as stop:
        stopped = stop.reason
    except KeyboardInterrupt:
        stopped = "interrupted"
    return Outcome(tracker.best, tuple(tracker.history), tracker.tests, stopped, tracker.unused)


class Fixpoint(Generic[S]):
    """One ``reduce_to_fixpoint``: its sweeps over a tier, each pass's levels, the search
    over a level's units, and the tests (the budget checked before each batch)."""

    def __init__(self, tracker: Tracker[S], test: Callable[[S], Verdict], size: Callable[[S], Any],
                 normalize: Callable[[S], S] | None, test_many: Callable[[list[S]], list[Verdict]] | None,
                 jobs: int, search: str):
        self.tracker = tracker
        self.test = test
        self.size = size
        self.normalize = normalize
        self.test_many = test_many
        self.jobs = jobs
        self.search = search
        # the units found needed in a sweep, by the passes' ``unit_key``
        self.needed: set[Any] = set()

    def measured(self, candidate: S) -> Any:
        """``size(candidate)``, the order searched (a number or a tuple); None for a
        candidate that is none."""
        try:
            return self.size(candidate)
        except Exception:  # a candidate that cannot even be built is just invalid
            return None

    def judged(self, candidate: S) -> Verdict:
        return self.judged_many([candidate])[0]

    def judged_many(self, candidates: list[S]) -> list[Verdict]:
        return [v for v, _ran in self.judged_runs(candidates)]

    def judged_runs(self, candidates: list[S]) -> list[tuple[Verdict, bool]]:
        """Each candidate's verdict, and whether it was tested (a candidate no smaller
        than the best is INVALID without a test)."""
        tracker = self.tracker
        tracker.check()
        sizes = [self.measured(c) for c in candidates]
        # Only strictly smaller programs count as progress; this is what makes the sweep
        # terminate whatever the passes propose.
        runnable = [i for i, n in enumerate(sizes) if n is not None and n < tracker.best_size]
        out = [(Verdict.INVALID, False)] * len(candidates)
        if runnable:
            try:
                if len(runnable) == 1 or self.test_many is None:
                    results = [self.test(candidates[i]) for i in runnable]
                else:
                    results = self.test_many([candidates[i] for i in runnable])
            except KeyboardInterrupt:
                raise ReductionStopped("interrupted", tracker.best) from None
            for i, v in zip(runnable, results):
                out[i] = (v, True)
                tracker.record(sizes[i], v)
        return out

    def sweep(self, tier: Sequence[Pass[S, Any]]) -> bool:
        """Each pass of ``tier`` once, level by level; whether the best state shrank."""
        tracker = self.tracker
        before = tracker.best_size
        for p in tier:
            pass_start = tracker.best_size
            level = 0
            while True:
                units = p.units(tracker.best, level)
                if units is None:
                    break
                level += 1
                if units:
                    self.search_level(p, level - 1, tracker.best, units)
            if self.normalize is not None and tracker.best_size < pass_start:
                tracker.best = self.normalize(tracker.best)
        return bool(tracker.best_size < before)

    def search_level(self, p: Pass[S, Any], level: int, current: S, units: Sequence[Any]) -> None:
        """The search over one level's ``units`` of pass ``p`` on ``current``."""
        tracker = self.tracker
        tracker.emit(PassStarted(p.name, level, len(units), tracker.best_size))
        start_size = tracker.best_size
        index = list(range(len(units)))
        built: dict[tuple[int, ...], S] = {}

        def build(kept: Sequence[int]) -> S:
            # Memoised: the candidate ddmin accepts is one it just tested, and a rendered
            # candidate is worth keeping.
            key = tuple(kept)
            if key not in built:
                keep = set(kept)
                built[key] = p.apply(current, [units[i] for i in index if i not in keep])
            return built[key]

        def accept(kept: Sequence[int]) -> None:
            chosen = build(kept)
            tracker.accept(chosen, self.measured(chosen))

        key_of = getattr(p, "unit_key", None)
        keys = [key_of(current, u) for u in units] if key_of is not None else [None] * len(units)
        tested: set[tuple[int, ...]] = set()  # the batches' candidates that were run

        def judge_batch(many: list[Sequence[int]]) -> list[Verdict]:
            judged = self.judged_runs([build(k) for k in many])
            tested.update(tuple(k) for k, (_v, ran) in zip(many, judged) if ran)
            return [v for v, _ran in judged]

        def unused(many: list[Sequence[int]]) -> None:
            tracker.unused += sum(tuple(k) in tested for k in many)

        if self.search == "probdd":
            size_of = getattr(p, "unit_size", None)
            sizes = [size_of(current, u) for u in units] if size_of is not None else [0] * len(units)
            remaining = probdd(
                index,
                lambda kept: self.judged(build(kept)),
                prior=lambda i: NEEDED_BEFORE if keys[i] in self.needed else 0.1,
                weight=lambda i: sizes[i],
                test_many=judge_batch, jobs=self.jobs, on_accept=accept, on_unused=unused,
            )
        else:
            remaining = ddmin(index, lambda kept: self.judged(build(kept)),
                              test_many=judge_batch, jobs=self.jobs, on_accept=accept, on_unused=unused)
        self.needed.update(keys[i] for i in remaining if keys[i] is not None)
        if tracker.best_size < start_size:
            tracker.emit(Improved(p.name, tracker.best_size, start_size))
