"""The oracle: a candidate program in, a verdict out.

It is the only place where "interesting" is decided, so every rule of faithfulness
lives here: a candidate that does not compile never reaches a worker; a candidate is
REPRODUCED only if its first error is the bug to keep (``signature.Target``: the same
bug as the original's, matching the user's ``--keep-error`` or ``--family``), and again
in a confirmation run; a timeout is never a reproduction.  Every run a reduction makes
once its workers are calibrated goes through here and is counted (``OracleStats``).  Verdicts are cached by the content of the rendered files, so two edit
sets that render alike cost one run.
"""

from __future__ import annotations

import threading
import warnings
from typing import Mapping

from shrinkgpu.core import Verdict
from shrinkgpu.core.rates import RateTest
from shrinkgpu.results import OracleStats
from shrinkgpu.signature import Target
from shrinkgpu.worker import Isolation, Observation, Runner, Watch


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


def files_key(files: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The identity of a program: its files' paths and texts.  What the cache and the
    record of reproductions are keyed by."""
    return tuple(sorted(files.items()))


def _compiles(files: Mapping[str, str]) -> bool:
    for path, text in files.items():
        if path.endswith(".py"):
            # A candidate's SyntaxWarnings ("'int' object is not subscriptable") are the
            # candidate's business: its run shows them, the user's terminal must not.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    compile(text, path, "exec", dont_inherit=True)
                except (SyntaxError, ValueError):
                    return False
    return True


def _facts_only(obs: Observation) -> Observation:
    """Drop the output text: only the signature and run facts are kept per candidate."""
    from dataclasses import replace

    return replace(obs, stdout="", stderr="", modules=())


class Oracle:
    """``files -> Verdict`` with compile check, cache, and one retry after a worker loss."""

    def __init__(
        self,
        runner: Runner,
        target: Target,
        timeout: float,
        fresh_timeout: float | None = None,
        confirm: int = 1,
        gpus: tuple[str, ...] = (),
        rate: float = 1.0,
        pin_variable: str = "CUDA_VISIBLE_DEVICES",
        contrast: Watch | None = None,
        contrast_passes: bool = False,
    ):
        self.runner = runner
        # A torch.compile failure that the original does not have with its compiled code
        # run eagerly: a candidate that fails alike that way too is a bug of its own code
        # (a view that fails in eager as well), not the compiler's, and is another bug.
        self.contrast = contrast
        # ... and when the original passes that way, a candidate must pass too: one that
        # fails eagerly at all (``a + b`` of shapes that never broadcast, which the
        # compiler reports as its own "fake tensor call") is a mistake of its own code
        self.contrast_passes = contrast_passes
        self.target = target
        self.timeout = timeout
        # Candidates judged together are pinned to these devices in turn.
        self.gpus = gpus
        # A candidate must reproduce reliably, not once: one that lost the script's
        # seeding fails only sometimes.  Reproductions are re-run this many times.
        self.confirm = confirm
        # How often the original reproduces; below 1, each candidate is judged by a
        # sequential test of its own rate against it (core.rates), not by a few runs.
        self.rate = rate
        self.pin_variable = pin_variable
        # A fresh interpreter pays for its imports again: its limit comes from the fresh run.
        self.fresh_timeout = fresh_timeout or timeout
        self.stats = OracleStats()
        self._cache: dict[tuple, Verdict] = {}
        self._lock = threading.Lock()
        self.last_other: Observation | None = None
        # Files the latest fresh check of the result read: what it needs beside it.
        self.verified_reads: tuple[str, ...] = ()
        # For candidates that reproduced: what their run showed (call chain, argparse
        # results), which passes need once the candidate becomes the new original.
        self.reproduced: dict[tuple, Observation] = {}

    def __call__(self, files: Mapping[str, str]) -> Verdict:
        return self.many([files])[0]

    def many(self, batch: list[Mapping[str, str]]) -> list[Verdict]:
        """Verdicts for several programs, run side by side in the workers."""
        keys = [files_key(files) for files in batch]
        verdicts: list[Verdict | None] = [None] * len(batch)
        todo: dict[tuple, int] = {}  # key -> index of its first occurrence
        for i, (files, key) in enumerate(zip(batch, keys)):
            cached = self._cache.get(key)
            if cached is not None:
                self.stats.cache_hits += 1
                verdicts[i] = cached
            elif key in todo:
                self.stats.cache_hits += 1
            elif not _compiles(files):
                self.stats.invalid += 1
                verdicts[i] = self._store(key, Verdict.INVALID)
            else:
                todo[key] = i
        order = list(todo.values())
        if self.rate < 1.0:
            judged = self._judge_flaky(batch, keys, order)
            for i in order:
                verdicts[i] = self._store(keys[i], judged[i])
            for i, key in enumerate(keys):
                if verdicts[i] is None:
                    verdicts[i] = self._cache[key]
            return verdicts  # type: ignore[return-value]
        observed = self._observe_many([batch[i] for i in order])
        first: dict[int, Verdict] = {}
        confirm: list[int] = []
        for i, obs in zip(order, observed):
            first[i] = classify(obs, self.target)
            if first[i] is Verdict.OTHER_ERROR:
                self._other(obs)
            elif first[i] is Verdict.REPRODUCED:
                confirm.append(i)
                self.reproduced[keys[i]] = _facts_only(obs)
        # A candidate must reproduce reliably, not once (a lost seed fails "mostly").
        for _ in range(self.confirm):
            if not confirm:
                break
            again = self._observe_many([batch[i] for i in confirm])
            still = []
            for i, obs in zip(confirm, again):
                if classify(obs, self.target) is Verdict.REPRODUCED:
                    still.append(i)
                else:
                    first[i] = Verdict.FLAKY
                    self.reproduced.pop(keys[i], None)
            confirm = still
        if self.contrast is not None and confirm:
            futures = [self.runner.submit(batch[i], timeout=self.timeout, env=self._pin(k), watch=self.contrast)
                       for k, i in enumerate(confirm)]
            for i, fut in zip(confirm, futures):
                obs = fut.result()
                self.stats.runs += 1
                self.stats.run_seconds += obs.wall
                eager = classify(obs, self.target)
                # (eagerly a candidate may run on where the compiled one failed at once:
                # reaching the time limit without an error is no failure of its own)
                if eager is Verdict.REPRODUCED or (
                        self.contrast_passes and eager not in (Verdict.PASSED, Verdict.TIMEOUT)):
                    first[i] = Verdict.OTHER_ERROR
                    self.reproduced.pop(keys[i], None)
                    with self._lock:
                        self.stats.other_errors["fails without compiling too"] = (
                            self.stats.other_errors.get("fails without compiling too", 0) + 1)
        for i in order:
            verdicts[i] = self._store(keys[i], first[i])
        for i, key in enumerate(keys):
            if verdicts[i] is None:
                verdicts[i] = self._cache[key]
        return verdicts  # type: ignore[return-value]

    def _judge_flaky(self, batch, keys, order: list[int]) -> dict[int, Verdict]:
        """Verdicts for an original that does not fail every run: candidates run side by
        side, again and again, each until its sequential test decides.  A different
        error, a timeout or a crash ends a candidate's test at once: never a different bug."""
        tests = {i: RateTest(self.rate) for i in order}
        judged: dict[int, Verdict] = {}
        pending = list(order)
        while pending:
            observed = self._observe_many([batch[i] for i in pending])
            still = []
            for i, obs in zip(pending, observed):
                verdict = classify(obs, self.target)
                if verdict in (Verdict.OTHER_ERROR, Verdict.TIMEOUT, Verdict.CRASHED):
                    if verdict is Verdict.OTHER_ERROR:
                        self._other(obs)
                    judged[i] = verdict
                    continue
                test = tests[i]
                test.add(verdict is Verdict.REPRODUCED)
                if verdict is Verdict.REPRODUCED:
                    self.reproduced[keys[i]] = _facts_only(obs)
                if not test.decided:
                    still.append(i)
                elif test.accepted:
                    judged[i] = Verdict.REPRODUCED
                else:
                    judged[i] = Verdict.FLAKY if test.reproduced else Verdict.PASSED
            pending = still
        for i, verdict in judged.items():
            if verdict is not Verdict.REPRODUCED:
                self.reproduced.pop(keys[i], None)
        return judged

    def _other(self, obs: Observation) -> None:
        self.last_other = obs
        kind = obs.signature.type if obs.signature is not None else (obs.status or "unknown")
        with self._lock:
            self.stats.other_errors[kind] = self.stats.other_errors.get(kind, 0) + 1

    def _store(self, key: tuple, verdict: Verdict) -> Verdict:
        with self._lock:
            self._cache[key] = verdict
            self.stats.by_verdict[verdict.value] = self.stats.by_verdict.get(verdict.value, 0) + 1
        return verdict

    def _observe_many(self, batch: list[Mapping[str, str]]) -> list[Observation]:
        if len(batch) == 1:
            return [self.observe(batch[0])]
        futures = [
            self.runner.submit(files, timeout=self.timeout, env=self._pin(k)) for k, files in enumerate(batch)
        ]
        out = []
        for k, (files, fut) in enumerate(zip(batch, futures)):
            obs = fut.result()
            if obs.infra_error and not self.runner.alive:
                self.runner.restart()
                # The retry keeps its device: a candidate must never move to another GPU.
                obs = self.runner.run(files, timeout=self.timeout, env=self._pin(k))
            self.stats.runs += 1
            self.stats.run_seconds += obs.wall
            out.append(obs)
        return out

    def _pin(self, slot: int) -> dict[str, str]:
        if not self.gpus:
            return {}
        return {self.pin_variable: self.gpus[slot % len(self.gpus)]}

    def reproduction(self, files: Mapping[str, str]) -> Observation | None:
        """What the run of ``files`` showed, when it reproduced (None otherwise, or when
        the verdict came from the cache without a run)."""
        return self.reproduced.get(files_key(files))

    def observe(
        self, files: Mapping[str, str], isolation: Isolation | None = None, timeout: float | None = None,
        watch: Watch = Watch(),
    ) -> Observation:
        """One run of ``files``, counted in the statistics: the final checks (fresh
        interpreters), and the runs that record more than a verdict needs (``watch``:
        a rebase counting loops or saving objects, a resume)."""
        limit = timeout or self.timeout
        env = self._pin(0)
        obs = self.runner.run(files, timeout=limit, isolation=isolation, env=env, watch=watch)
        if obs.infra_error and not self.runner.alive:
            self.runner.restart()
            obs = self.runner.run(files, timeout=limit, isolation=isolation, env=env, watch=watch)
        if isolation is Isolation.FRESH and self.target.matches(obs.signature):
            self.verified_reads = obs.reads
        self.stats.runs += 1
        self.stats.run_seconds += obs.wall
        return obs
