"""Delta debugging over a list: find a 1-minimal sublist that is still interesting.

Zeller and Hildebrandt's ddmin, in the form that matters for program reduction: only
complements are tested (removing one chunk at a time).  Subset tests ("keep only this
chunk") almost never succeed on programs, whose parts depend on each other, and they are
not needed for the guarantee: when the granularity reaches single items and no removal
succeeds, every remaining item is necessary on its own -- 1-minimality.

Before splitting, the empty list is tried once: for passes whose edits are independent
(delete every unused function) all of them usually succeed together, and one test then
does the work of the whole search.
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


def ddmin(items: Sequence[T], test: Callable[[Sequence[T]], Verdict]) -> list[T]:
    """The smallest sublist found that ``test`` still calls REPRODUCED.

    ``test(kept)`` judges the program in which only ``kept`` survives; ``items`` itself
    is assumed interesting.  Order is preserved.  The result is 1-minimal if ``test`` is
    deterministic: removing any single remaining item is not interesting.
    """
    current = list(items)
    if not current:
        return current
    if test([]).interesting:
        return []
    n = 2
    while len(current) >= 2:
        chunks = _chunks(current, min(n, len(current)))
        for i in range(len(chunks)):
            complement = [x for j, c in enumerate(chunks) if j != i for x in c]
            if test(complement).interesting:
                current = complement
                n = max(n - 1, 2)
                break
        else:
            if n >= len(current):
                break
            n = min(2 * n, len(current))
    return current
