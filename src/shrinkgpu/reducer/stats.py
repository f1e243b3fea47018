"""Per-pass statistics of a reduction, from its events: where the tests went and which
pass removed how many tokens."""

from __future__ import annotations

from shrinkgpu.core import PassStarted, Tested
from shrinkgpu.reducer.events import BestSoFar, Reducing


class PassStats:
    """Tests and tokens removed per pass: where the time goes, for the report."""

    def __init__(self):
        self.current = "setup"
        self.tests: dict[str, int] = {}
        self.accepted: dict[str, int] = {}
        self.removed: dict[str, int] = {}
        self.tokens: int | None = None

    def __call__(self, event: object) -> None:
        if isinstance(event, PassStarted):
            self.current = event.name
        elif isinstance(event, Tested):
            self.tests[self.current] = self.tests.get(self.current, 0) + 1
            if event.verdict.interesting:
                self.accepted[self.current] = self.accepted.get(self.current, 0) + 1
        elif isinstance(event, Reducing):
            self.tokens = event.tokens
        elif isinstance(event, BestSoFar):
            # Tokens of the programs, counted as people count them: the search's own
            # size is a weighted cost (blocks and loops cost extra), not tokens.
            if self.tokens is not None:
                self.removed[self.current] = self.removed.get(self.current, 0) + self.tokens - event.tokens
            self.tokens = event.tokens

    @property
    def tested(self) -> int:
        """Candidates tested so far, in every pass: what --max-tests counts."""
        return sum(self.tests.values())

    def to_json(self) -> dict:
        names = sorted(set(self.tests) | set(self.removed), key=lambda n: -self.tests.get(n, 0))
        return {
            n: {"tests": self.tests.get(n, 0), "reproduced": self.accepted.get(n, 0),
                "tokens_removed": self.removed.get(n, 0)}
            for n in names
        }
