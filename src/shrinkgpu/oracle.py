"""The oracle: a candidate program in, a verdict out.

It is the only place where "interesting" is decided, so every rule of faithfulness
lives here: a candidate that does not compile never reaches a worker; a candidate is
REPRODUCED only if its first error is the same bug as the original's (``Signature.
same_bug``) *and* matches the user's ``--keep-error`` pattern; a timeout is never a
reproduction.  Verdicts are cached by the content of the rendered files, so two edit
sets that render alike cost one run.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Mapping

from shrinkgpu.core import Verdict
from shrinkgpu.signature import Signature, Strictness
from shrinkgpu.worker import Isolation, Observation, Runner


@dataclass(frozen=True)
class Target:
    """The bug to keep."""

    signature: Signature
    pattern: re.Pattern[str] | None = None
    strictness: Strictness = Strictness.STRICT

    def matches(self, sig: Signature | None) -> bool:
        if sig is None:
            return False
        if self.pattern is not None and not self.pattern.search(sig.keep_text()):
            return False
        return self.signature.same_bug(sig, self.strictness)


def classify(obs: Observation, target: Target) -> Verdict:
    if obs.infra_error:
        return Verdict.CRASHED
    if obs.timed_out:
        return Verdict.TIMEOUT
    if obs.signature is not None:
        return Verdict.REPRODUCED if target.matches(obs.signature) else Verdict.OTHER_ERROR
    if obs.status in ("no-report", "probe-error"):
        return Verdict.CRASHED
    return Verdict.PASSED


def _facts_only(obs: Observation) -> Observation:
    """Drop the output text: only the signature and run facts are kept per candidate."""
    from dataclasses import replace

    return replace(obs, stdout="", stderr="", modules=())


@dataclass
class OracleStats:
    runs: int = 0
    cache_hits: int = 0
    invalid: int = 0
    by_verdict: dict[str, int] = field(default_factory=dict)
    run_seconds: float = 0.0


class Oracle:
    """``files -> Verdict`` with compile check, cache, and one retry after a worker loss."""

    def __init__(
        self,
        runner: Runner,
        target: Target,
        timeout: float,
        fresh_timeout: float | None = None,
        confirm: int = 1,
    ):
        self.runner = runner
        self.target = target
        self.timeout = timeout
        # A candidate must reproduce reliably, not once: one that lost the script's
        # seeding fails only sometimes.  Reproductions are re-run this many times.
        self.confirm = confirm
        # A fresh interpreter pays for its imports again: its limit comes from the fresh run.
        self.fresh_timeout = fresh_timeout or timeout
        self.stats = OracleStats()
        self._cache: dict[tuple, Verdict] = {}
        self._lock = threading.Lock()
        self.last_other: Observation | None = None
        # For candidates that reproduced: what their run showed (call chain, argparse
        # results), which passes need once the candidate becomes the new original.
        self.reproduced: dict[tuple, Observation] = {}

    def __call__(self, files: Mapping[str, str]) -> Verdict:
        key = tuple(sorted(files.items()))
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self.stats.cache_hits += 1
                return cached
        verdict = self._judge(files)
        with self._lock:
            self._cache[key] = verdict
            self.stats.by_verdict[verdict.value] = self.stats.by_verdict.get(verdict.value, 0) + 1
        return verdict

    def _judge(self, files: Mapping[str, str]) -> Verdict:
        for path, text in files.items():
            if not path.endswith(".py"):
                continue
            try:
                compile(text, path, "exec", dont_inherit=True)
            except (SyntaxError, ValueError):
                self.stats.invalid += 1
                return Verdict.INVALID
        obs = self.observe(files)
        verdict = classify(obs, self.target)
        if verdict is Verdict.REPRODUCED:
            for _ in range(self.confirm):
                if classify(self.observe(files), self.target) is not Verdict.REPRODUCED:
                    verdict = Verdict.FLAKY
                    break
        if verdict is Verdict.OTHER_ERROR:
            self.last_other = obs
        elif verdict is Verdict.REPRODUCED:
            with self._lock:
                self.reproduced[tuple(sorted(files.items()))] = _facts_only(obs)
        return verdict

    def observe(
        self, files: Mapping[str, str], isolation: Isolation | None = None, timeout: float | None = None
    ) -> Observation:
        limit = timeout or self.timeout
        obs = self.runner.run(files, timeout=limit, isolation=isolation)
        if obs.infra_error and not self.runner.alive:
            self.runner.restart()
            obs = self.runner.run(files, timeout=limit, isolation=isolation)
        self.stats.runs += 1
        self.stats.run_seconds += obs.wall
        return obs
