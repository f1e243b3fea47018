"""Probabilistic delta debugging: learn which units are needed, test where it pays.

ProbDD (Wang et al., "Probabilistic Delta Debugging", ESEC/FSE 2021) keeps, for each
unit, an estimate ``p`` of the probability that it must stay.  Each step removes the
prefix of units (lowest ``p`` first) that maximises the expected number of units
removed, ``|S| * prod(1 - p)``; a failed removal raises the estimates of the units it
tried, in proportion.  A unit whose removal failed on its own is needed (``p = 1``).
The search ends when every remaining unit is known to be needed, so the result is
1-minimal like ddmin's, usually after fewer tests.

``prior(item)`` seeds the estimates.  The driver uses it to carry knowledge across
sweeps: a unit found needed in the previous sweep starts high and is tried alone early
instead of dragging groups down with it.

With ``jobs > 1`` several disjoint prefixes are tried at once; successes are merged
(one more test), otherwise the first success is kept, so results depend only on
``jobs``.  A batch with a success drops its failures' verdicts (the estimates are
learnt from batches that failed whole), and an unmerged success beyond the first is
dropped too: ``on_unused`` gets those candidates, the speculation that did not pay.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence, TypeVar

from shrinkgpu.core.verdict import Verdict

T = TypeVar("T")

DEFAULT_PRIOR = 0.1  # the paper's initial probability that a unit must stay
NEEDED = 1.0
# Group failures never make a unit certain: only a failed removal on its own does, which
# is what keeps the result 1-minimal.
GROUP_CAP = 0.99


def _best_prefix(order: list[int], p: dict[int, float]) -> list[int]:
    best, best_gain, keep_prob = 0, 0.0, 1.0
    for k, i in enumerate(order, start=1):
        keep_prob *= 1.0 - p[i]
        gain = k * keep_prob
        if gain > best_gain:
            best, best_gain = k, gain
    return order[: max(best, 1)]


def probdd(
    items: Sequence[T],
    test: Callable[[Sequence[T]], Verdict],
    *,
    test_many: Callable[[list[Sequence[T]]], list[Verdict]] | None = None,
    jobs: int = 1,
    on_accept: Callable[[Sequence[T]], None] | None = None,
    prior: Callable[[T], float] | None = None,
    weight: Callable[[T], float] | None = None,
    on_unused: Callable[[list[Sequence[T]]], None] | None = None,
) -> list[T]:
    """The smallest sublist found that ``test`` still calls REPRODUCED (see ddmin for
    the contract: ``test(kept)``, ``items`` assumed interesting, order preserved).
    ``weight(item)`` breaks ties between equally likely units: heavier ones (larger
    edits) are tried first, so a budget cut short still removed the most."""
    current = list(range(len(items)))
    if not current:
        return []

    def kept(indices: Iterable[int]) -> list[T]:
        return [items[i] for i in indices]

    def accept(indices: list[int]) -> list[int]:
        if on_accept is not None:
            on_accept(kept(indices))
        return indices

    if test([]).interesting:
        accept([])
        return []
    p = {i: min(max(prior(items[i]) if prior else DEFAULT_PRIOR, 0.0), GROUP_CAP) for i in current}
    w = {i: (weight(items[i]) if weight else 0.0) for i in current}
    batch = test_many if (test_many is not None and jobs > 1) else None
    removals = 0
    marked_at: dict[int, int] = {}  # unit -> removals done when it was found needed
    while True:
        open_ = sorted((i for i in current if p[i] < NEEDED), key=lambda i: (p[i], -w[i], i))
        if not open_:
            # A unit found needed before a later removal may have become removable
            # (programs are not monotone): try those alone again, so the result is
            # 1-minimal for the final list, as ddmin's is.
            stale = [i for i in current if marked_at.get(i, removals) < removals]
            if not stale:
                break
            for i in stale:
                p[i] = GROUP_CAP
                del marked_at[i]
            continue
        subsets: list[list[int]] = []
        pool = list(open_)
        while pool and len(subsets) < (jobs if batch is not None else 1):
            chosen = _best_prefix(pool, p)
            subsets.append(chosen)
            pool = [i for i in pool if i not in set(chosen)]
        candidates = [[i for i in current if i not in set(s)] for s in subsets]
        if batch is not None and len(candidates) > 1:
            verdicts = batch([kept(c) for c in candidates])
        else:
            verdicts = [test(kept(c)) for c in candidates]
        wins = [k for k, v in enumerate(verdicts) if v.interesting]
        if wins:
            merged_ok = False
            if len(wins) > 1:
                gone = set().union(*(set(subsets[k]) for k in wins))
                merged = [i for i in current if i not in gone]
                merged_ok = test(kept(merged)).interesting
            used = set(wins) if merged_ok else {wins[0]}
            dropped: list[Sequence[T]] = [kept(c) for k, c in enumerate(candidates) if k not in used]
            if dropped and on_unused is not None:
                on_unused(dropped)
            if merged_ok:
                current = accept(merged)
                removals += 1
                continue
            current = accept(candidates[wins[0]])
            removals += 1
            continue
        for s in subsets:
            if len(s) == 1:
                p[s[0]] = NEEDED
                marked_at[s[0]] = removals
                continue
            keep_prob = 1.0
            for i in s:
                keep_prob *= 1.0 - p[i]
            for i in s:
                p[i] = min(GROUP_CAP, p[i] / (1.0 - keep_prob)) if keep_prob < 1.0 else GROUP_CAP
    return kept(current)
