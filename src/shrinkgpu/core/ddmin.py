"""Delta debugging over a list: find a 1-minimal sublist that is still interesting.

Zeller and Hildebrandt's ddmin, in the form that matters for program reduction: only
complements are tested (removing one chunk at a time).  Subset tests ("keep only this
chunk") almost never succeed on programs, whose parts depend on each other, and they are
not needed for the guarantee: when the granularity reaches single items and no removal
succeeds, every remaining item is necessary on its own -- 1-minimality.

Before splitting, the empty list is tried once: for passes whose edits are independent
(delete every unused function) all of them usually succeed together, and one test then
does the work of the whole search.

With ``jobs > 1`` and a ``test_many`` that judges several candidates at once (in
parallel workers), complements are tested ``jobs`` at a time.  When several in a batch
succeed, removing all of their chunks together is tried once (the merge); if that fails,
the first success is taken.  Which candidates are tested depends only on ``jobs`` and
the verdicts, so results are deterministic for a given ``jobs``.  A batch's verdicts
after its first success that neither the merge nor the next step uses are speculation
that did not pay: ``on_unused`` gets those candidates (what ``--json`` counts as wasted).
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

from shrinkgpu.core.verdict import Verdict

T = TypeVar("T")


def _chunks(items: Sequence[T], n: int) -> list[list[T]]:
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(list(items[start:end]))
        start = end
    return [c for c in out if c]


def ddmin(
    items: Sequence[T],
    test: Callable[[Sequence[T]], Verdict],
    *,
    test_many: Callable[[list[Sequence[T]]], list[Verdict]] | None = None,
    jobs: int = 1,
    on_accept: Callable[[Sequence[T]], None] | None = None,
    on_unused: Callable[[list[Sequence[T]]], None] | None = None,
) -> list[T]:
    """The smallest sublist found that ``test`` still calls REPRODUCED.

    ``test(kept)`` judges the program in which only ``kept`` survives; ``items`` itself
    is assumed interesting.  Order is preserved.  The result is 1-minimal if ``test`` is
    deterministic: removing any single remaining item is not interesting.
    ``on_accept(kept)`` is called each time the search commits to a smaller list.
    """
    batch = test_many if (test_many is not None and jobs > 1) else None

    def accept(kept: list[T]) -> list[T]:
        if on_accept is not None:
            on_accept(kept)
        return kept

    current = list(items)
    if not current:
        return current
    if test([]).interesting:
        return accept([])
    n = 2
    while len(current) >= 2:
        chunks = _chunks(current, min(n, len(current)))
        complements = [[x for j, c in enumerate(chunks) if j != i for x in c] for i in range(len(chunks))]
        chosen: list[T] | None = None
        step = jobs if batch is not None else 1
        for start in range(0, len(chunks), step):
            idx = list(range(start, min(start + step, len(chunks))))
            if batch is not None and len(idx) > 1:
                verdicts = batch([complements[i] for i in idx])
            else:
                verdicts = [test(complements[i]) for i in idx]
            wins = [i for i, v in zip(idx, verdicts) if v.interesting]
            if not wins:
                continue
            merged_ok = False
            if len(wins) > 1:
                gone = set(wins)
                merged = [x for j, c in enumerate(chunks) if j not in gone for x in c]
                merged_ok = test(merged).interesting
            # one at a time, the search would have stopped at the first success
            dropped: list[Sequence[T]] = [complements[i] for i in idx if i > wins[0] and not (merged_ok and i in wins)]
            if dropped and on_unused is not None:
                on_unused(dropped)
            if merged_ok:
                chosen, n = merged, max(n - len(wins), 2)
                break
            chosen, n = complements[wins[0]], max(n - 1, 2)
            break
        if chosen is None:
            if n >= len(current):
                break
            n = min(2 * n, len(current))
        else:
            current = accept(chosen)
    return current
