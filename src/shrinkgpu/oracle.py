"""The oracle: candidate programs in, a ``Judgement`` each out.

It is the only place where "interesting" is decided, so every rule of faithfulness
lives here: a candidate that cannot be rendered or does not compile never reaches a
worker (INVALID); a candidate is REPRODUCED only if its first error is the bug to keep
(``signature.Target``: the same bug as the original's, matching the user's
``--keep-error`` or ``--family``), and again in a confirmation run; a timeout is never a
reproduction.  Every run a reduction makes once its workers are calibrated goes through
here and is counted (``OracleStats``).  Judgements are cached by the content of the
rendered files, so two edit sets that render alike cost one run.

A judgement carries what the run that decided it showed (``observation``, for a
reproduction: the facts the next program needs, its run time), so the caller never
asks again.  A candidate's time limit is read from the reduction's ``Limits`` before
each run; the runner retries a run lost to the infrastructure itself.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence, cast

from shrinkgpu.core import Verdict
from shrinkgpu.core.rates import RateTest
from shrinkgpu.families import Family
from shrinkgpu.limits import Limits
from shrinkgpu.results import OracleStats
from shrinkgpu.signature import Target
from shrinkgpu.worker import Isolation, Observation, Runner, RunStatus, Watch


def classify(obs: Observation, target: Target) -> Verdict:
    if obs.infra_error:
        return Verdict.CRASHED
    if obs.timed_out:
        return Verdict.TIMEOUT
    if obs.status is RunStatus.HANG and target.signature.family is not Family.HANG:
        # ranks that wait forever where the original raised: the run never ended, and a
        # run that never ends is never the same bug
        return Verdict.TIMEOUT
    if obs.signature is not None:
        return Verdict.REPRODUCED if target.matches(obs.signature) else Verdict.OTHER_ERROR
    if obs.status in (RunStatus.NO_REPORT, RunStatus.PROBE_ERROR):
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
    return replace(obs, stdout="", stderr="", modules=())


@dataclass(frozen=True)
class Judgement:
    """The oracle's answer for one candidate: its verdict, what the first run of a
    reproduction showed (facts only; None for any other verdict), and the runs it cost
    (0 when it came from the cache or never ran)."""

    verdict: Verdict
    observation: Observation | None = None
    runs: int = 0


def _rendered(program) -> Mapping[str, str] | None:
    """A program's files: a mapping as it is, or a candidate's rendering; None when it
    cannot be rendered (an edit combination libcst cannot print)."""
    if isinstance(program, Mapping):
        return program
    try:
        return program.files
    except Exception:  # noqa: BLE001 - any failure to render makes the candidate invalid
        return None


class Oracle:
    """``programs -> [Judgement]`` with the render and compile checks, the cache, the
    confirmation runs, the rate test of a flaky original and the compile contrast."""

    def __init__(
        self,
        runner: Runner,
        target: Target,
        limits: Limits,
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
        self.limits = limits
        # Candidates judged together are pinned to these devices in turn.
        self.gpus = gpus
        # A candidate must reproduce reliably, not once: one that lost the script's
        # seeding fails only sometimes.  Reproductions are re-run this many times.
        self.confirm = confirm
        # How often the original reproduces; below 1, each candidate is judged by a
        # sequential test of its own rate against it (core.rates), not by a few runs.
        self.rate = rate
        self.pin_variable = pin_variable
        self.stats = OracleStats()
        self._cache: dict[tuple, Judgement] = {}
        self._lock = threading.Lock()

    @property
    def timeout(self) -> float:
        """A candidate's limit now (it follows the program candidates are cut from)."""
        return self.limits.timeout

    @property
    def fresh_timeout(self) -> float:
        return self.limits.fresh_timeout

    def judge(self, programs: Sequence) -> list[Judgement]:
        """A judgement for each program (its files, or a candidate that renders them),
        the ones that must run run side by side in the workers."""
        batch = [_rendered(p) for p in programs]
        keys = [files_key(files) if files is not None else None for files in batch]
        out: list[Judgement | None] = [None] * len(batch)
        todo: dict[tuple, int] = {}  # key -> index of its first occurrence
        for i, (files, key) in enumerate(zip(batch, keys)):
            if files is None or key is None:  # (the one without the other never)
                self.stats.invalid += 1
                out[i] = Judgement(Verdict.INVALID)
                continue
            cached = self._cache.get(key)
            if cached is not None:
                self.stats.cache_hits += 1
                out[i] = replace(cached, runs=0)
            elif key in todo:
                self.stats.cache_hits += 1
            elif not _compiles(files):
                self.stats.invalid += 1
                out[i] = self._store(key, Judgement(Verdict.INVALID))
            else:
                todo[key] = i
        order = list(todo.values())
        judged = self._judge_flaky(batch, order) if self.rate < 1.0 else self._judge(batch, order)
        for key, i in todo.items():
            out[i] = self._store(key, judged[i])
        for i, key in enumerate(keys):
            if out[i] is None:  # (a program judged once before in this batch: it has a key)
                out[i] = replace(self._cache[cast("tuple[Any, ...]", key)], runs=0)
        return out  # type: ignore[return-value]

    def _judge(self, batch, order: list[int]) -> dict[int, Judgement]:
        """Judgements for a deterministic original: one run each, a confirmation run of
        each reproduction, then (a compile failure) the eager contrast."""
        observed = self._observe_many([batch[i] for i in order])
        first: dict[int, Verdict] = {}
        seen: dict[int, Observation] = {}
        runs = {i: 1 for i in order}
        confirm: list[int] = []
        for i, obs in zip(order, observed):
            first[i] = classify(obs, self.target)
            if first[i] is Verdict.OTHER_ERROR:
                self._other(obs)
            elif first[i] is Verdict.REPRODUCED:
                confirm.append(i)
                seen[i] = _facts_only(obs)
        # A candidate must reproduce reliably, not once (a lost seed fails "mostly").
        for _ in range(self.confirm):
            if not confirm:
                break
            again = self._observe_many([batch[i] for i in confirm])
            still = []
            for i, obs in zip(confirm, again):
                runs[i] += 1
                if classify(obs, self.target) is Verdict.REPRODUCED:
                    still.append(i)
                else:
                    first[i] = Verdict.FLAKY
            confirm = still
        if self.contrast is not None and confirm:
            eager = self._observe_many([batch[i] for i in confirm], watch=self.contrast)
            for i, obs in zip(confirm, eager):
                runs[i] += 1
                verdict = classify(obs, self.target)
                # (eagerly a candidate may run on where the compiled one failed at once:
                # reaching the time limit without an error is no failure of its own)
                if verdict is Verdict.REPRODUCED or (
                        self.contrast_passes and verdict not in (Verdict.PASSED, Verdict.TIMEOUT)):
                    first[i] = Verdict.OTHER_ERROR
                    with self._lock:
                        self.stats.other_errors["fails without compiling too"] = (
                            self.stats.other_errors.get("fails without compiling too", 0) + 1)
        return {i: Judgement(first[i], seen.get(i) if first[i] is Verdict.REPRODUCED else None, runs[i])
                for i in order}

    def _judge_flaky(self, batch, order: list[int]) -> dict[int, Judgement]:
        """Judgements for an original that does not fail every run: candidates run side
        by side, again and again, each until its sequential test decides.  A different
        error, a timeout or a crash ends a candidate's test at once: never a different bug."""
        tests = {i: RateTest(self.rate) for i in order}
        seen: dict[int, Observation] = {}
        verdicts: dict[int, Verdict] = {}
        runs = {i: 0 for i in order}
        pending = list(order)
        while pending:
            observed = self._observe_many([batch[i] for i in pending])
            still = []
            for i, obs in zip(pending, observed):
                runs[i] += 1
                verdict = classify(obs, self.target)
                if verdict in (Verdict.OTHER_ERROR, Verdict.TIMEOUT, Verdict.CRASHED):
                    if verdict is Verdict.OTHER_ERROR:
                        self._other(obs)
                    verdicts[i] = verdict
                    continue
                test = tests[i]
                test.add(verdict is Verdict.REPRODUCED)
                if verdict is Verdict.REPRODUCED:
                    seen[i] = _facts_only(obs)
                if not test.decided:
                    still.append(i)
                elif test.accepted:
                    verdicts[i] = Verdict.REPRODUCED
                else:
                    verdicts[i] = Verdict.FLAKY if test.reproduced else Verdict.PASSED
            pending = still
        return {i: Judgement(v, seen.get(i) if v is Verdict.REPRODUCED else None, runs[i])
                for i, v in verdicts.items()}

    def _other(self, obs: Observation) -> None:
        kind = obs.signature.type if obs.signature is not None else (obs.status or "unknown")
        with self._lock:
            self.stats.other_errors[kind] = self.stats.other_errors.get(kind, 0) + 1

    def _store(self, key: tuple, judgement: Judgement) -> Judgement:
        with self._lock:
            self._cache[key] = judgement
            verdict = judgement.verdict
            self.stats.by_verdict[verdict.value] = self.stats.by_verdict.get(verdict.value, 0) + 1
        return judgement

    def _observe_many(self, batch: list[Mapping[str, str]], watch: Watch = Watch()) -> list[Observation]:
        observed = self.runner.run_all([(files, self._pin(k)) for k, files in enumerate(batch)],
                                       timeout=self.limits.run_limit(), watch=watch)
        for obs in observed:
            self.stats.runs += 1
            self.stats.run_seconds += obs.wall
        return observed

    def _pin(self, slot: int) -> dict[str, str]:
        if not self.gpus:
            return {}
        return {self.pin_variable: self.gpus[slot % len(self.gpus)]}

    def observe(
        self, files: Mapping[str, str], isolation: Isolation | None = None, timeout: float | None = None,
        watch: Watch = Watch(),
    ) -> Observation:
        """One run of ``files``, counted in the statistics: the final checks (fresh
        interpreters), and the runs that record more than a verdict needs (``watch``:
        a rebase counting loops or saving objects, a resume)."""
        obs = self.runner.run(files, timeout=timeout or self.limits.run_limit(), isolation=isolation, env=self._pin(0),
                              watch=watch)
        self.stats.runs += 1
        self.stats.run_seconds += obs.wall
        return obs
