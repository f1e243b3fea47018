"""Bisection over an ordered list of versions: where does "fails the same way" change?

Pure: it sees a ``judge(index) -> Side`` callable (``SAME``: the same bug; ``OTHER``:
passes or fails another way; ``SKIP``: could not be installed) and the number of
versions.  Both ends first; when they agree, that is the answer (the releases between
are not tried: a bug that comes and goes between two releases that agree is not what a
bisection can find, and the answer says which were tried).  When they differ, the usual
halving, each version judged at most once; a version that cannot be installed is
stepped over to the nearest untried one of the interval (as ``git bisect skip`` does),
and when every version between two judged ones is skipped, the boundary is that
interval.  At most ``2 + ceil(log2(n - 1))`` versions are judged when none is skipped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable


class Side(str, enum.Enum):
    SAME = "same"
    OTHER = "other"
    SKIP = "skip"


@dataclass(frozen=True)
class Bisection:
    judged: dict[int, Side]  # index -> what it showed, in the order judged (dicts keep it)
    # the two judged, installable versions where the answer changes (older, newer), or
    # None when both ends agree or no two installable versions were found
    boundary: tuple[int, int] | None

    @property
    def ends(self) -> tuple[int, int] | None:
        usable = sorted(i for i, s in self.judged.items() if s is not Side.SKIP)
        return (usable[0], usable[-1]) if usable else None


def _first_usable(order: list[int], judge: Callable[[int], Side], judged: dict[int, Side]) -> int | None:
    for i in order:
        if i not in judged:
            judged[i] = judge(i)
        if judged[i] is not Side.SKIP:
            return i
    return None


def bisect(count: int, judge: Callable[[int], Side]) -> Bisection:
    judged: dict[int, Side] = {}
    if count <= 0:
        return Bisection(judged, None)
    high = _first_usable(list(range(count - 1, -1, -1)), judge, judged)
    if high is None:
        return Bisection(judged, None)
    low = _first_usable(list(range(0, high)), judge, judged)
    if low is None or judged[low] is judged[high]:
        return Bisection(judged, None)
    while high - low > 1:
        mid = (low + high) // 2
        # the middle first, then outwards, alternating: the nearest installable one
        around = sorted(range(low + 1, high), key=lambda i: (abs(i - mid), i))
        pick = _first_usable(around, judge, judged)
        if pick is None:
            break  # every version between is skipped: the boundary is this interval
        if judged[pick] is judged[low]:
            low = pick
        else:
            high = pick
        # an interval whose inside is all judged (skipped) ends here
        if all(i in judged for i in range(low + 1, high)):
            break
    return Bisection(judged, (low, high))
