"""What a reduction hands back: the result, the oracle's counts and the extracted call.

Below the report and the reducer both, so that the report is written from a typed
value and the reducer, the oracle and the extraction fill it in.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from shrinkgpu.launch import PLAIN, Launch
from shrinkgpu.signature import Signature
from shrinkgpu.worker import Dropped, Isolation, Placement


@dataclass
class OracleStats:
    runs: int = 0
    cache_hits: int = 0
    invalid: int = 0
    by_verdict: dict[str, int] = field(default_factory=dict)
    run_seconds: float = 0.0
    # candidates that failed with another error, by the error's class (``NameError``:
    # a pass proposed something that could not run; the peers' tables count the same)
    other_errors: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Extraction:
    path: Path  # the script
    data: Path | None  # the tensors it loads, when it loads any
    text: str
    level: str  # "metadata" or "exact"
    lines: int  # lines beyond the imports
    signature: Signature  # its first error, from a fresh interpreter
    note: str | None = None  # why it is longer than a glance (extract.MAX_LINES)
    op: str | None = None  # the operator it calls, as recorded ("torch.nn.functional.cross_entropy")
    # (where, variable, metadata) of each tensor argument: what the ablation changes
    arguments: tuple[tuple[str, str, dict], ...] = ()
    # what the file beside it holds, in words, when it reads one a loader's call read
    # (``the state dict the failing call was given (11 tensors, 2.1 MiB): the user's weights``)
    holds: str | None = None
    loader: bool = False  # a loader's failing call (load_state_dict, torch.load, json.load)

    @property
    def compiled(self) -> bool:
        """A compiled function or module alone (``torch.compile(gate, fullgraph=True)(x0)``)."""
        return bool(self.op and self.op.startswith("torch.compile("))


@dataclass(frozen=True)
class Ablation:
    """The minimal case (and the extracted call) with one change at a time
    (``shrinkgpu.ablation``): each change's outcome, and the kind they show."""

    outcomes: tuple  # ablation.Outcome, in the order they were made
    kind: str
    reason: str
    hint: str | None = None
    stage: str | None = None  # a compile failure's stage, from the backend changes
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"kind": self.kind, "reason": self.reason, "hint": self.hint, "stage": self.stage,
                "seconds": round(self.seconds, 3), "changes": [o.to_json() for o in self.outcomes]}


@dataclass
class ReductionResult:
    output: Path | None
    report: Path | None
    files: dict[str, str]
    main: str
    signature: Signature
    final_signature: Signature | None
    tokens_before: int
    tokens_after: int
    candidates_tested: int
    oracle: OracleStats
    seconds: float
    stopped: str | None
    verified: tuple[int, int]  # (reproduced, runs) in fresh interpreters
    isolation: Isolation
    preload_modules: int
    timeout: float
    calibration: tuple[float, ...] = ()
    jobs: int = 1
    threads: int | None = None  # cap on each candidate's thread pools, None when uncapped
    gpus: tuple[str, ...] = ()
    environment: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    passes: dict = field(default_factory=dict)
    launch_env: dict = field(default_factory=dict)  # {"CUDA_LAUNCH_BLOCKING": "1"} with --sync-launches
    surfaced: Signature | None = None  # where an asynchronous error surfaced without synchronous launches
    original_rate: tuple[int, int] = (1, 1)  # (reproduced, runs) of the original in fresh interpreters
    collect_env: str | None = None  # torch.utils.collect_env, run once in a fresh process
    # the user's code revision when the reduction started (a commit made during a long
    # reduction is not the code it reduced)
    revision: str | None = None
    needs: tuple[str, ...] = ()  # files beside it the result read in its verified runs
    in_place: str | None = None  # how the result ran where it was written, when that is elsewhere
    loops: tuple[tuple[str, int, int], ...] = ()  # (file, loop header line, iteration) of the failure
    extracted: Extraction | None = None  # the failing call alone, when made
    data_files: dict = field(default_factory=dict)  # file name -> path: written beside the result
    # (file, name, class, bytes) of each data object the result loads instead of building
    loaded_objects: tuple[tuple[str, str, str, int], ...] = ()
    # the state at the failing step the result loads (reducer/state.py): file, loop,
    # iteration, what it restores, bytes; None when it loads none
    state: dict | None = None
    case: dict = field(default_factory=dict)  # what `verify` needs: how the original ran, what to keep
    trace: tuple[tuple[float, int], ...] = ()  # (seconds, tokens) at each accepted reduction
    extract_error: str | None = None  # why the failing call was not extracted
    # (argument, dimension) at the operator the original varied across its calls: not the bug's
    varying: tuple[tuple[str, int], ...] = ()
    command: str | None = None  # the shell command that runs the written result, from its directory
    beside: tuple[str, ...] = ()  # data files it reads, copied beside it (relative to it)
    run_from: Path | None = None  # where its command runs it from, when its data is too large to copy
    # the minimal case with one change at a time, and what they say
    ablation: Ablation | None = None
    # a distributed script: how the result runs (torchrun's ranks, or one plain python
    # when it reproduces without torch.distributed), the user's world size, and which
    # rank raised the original's first error; None where the script ran as one process
    distributed: dict | None = None
    launch: Launch = PLAIN
    # what the search started from: {"from": "original" | "saved state" | "cut" | "partial
    # result", "what": in words, "seconds": its fresh run}
    start: dict = field(default_factory=dict)
    isolation_because: str | None = None  # why every candidate ran in a fresh interpreter
    preload_dropped: tuple[Dropped, ...] = ()  # modules not preloaded because forking after them is unsafe
    # whether the fork server held torch: forked, but without it every candidate imports
    # torch itself, at a fresh interpreter's cost
    torch_preloaded: bool = False
    # a torch.compile failure run with its compiled code run eagerly: "passes", "fails
    # otherwise", "fails the same way", "did not end"; None for any other failure
    eager: str | None = None
    # which artifact runs alone (reducer/alone.py): {"artifact": "result" | "extracted call"
    # | "result written back" | None, "file", "checked", "result_needs"}; None when not asked
    alone: dict | None = None
    written_back: str | None = None  # the result written back as source, when that is what runs alone
    # where the search's candidates ran (--executor), and what running them side by side cost
    placement: Placement | None = None
    search_seconds: float = 0.0  # the search alone: its candidates per second are tests / this
    unused_runs: int = 0  # candidates run beside others whose verdicts the search did not use

    @property
    def where(self) -> Placement:
        """Where the search's candidates ran, its workers said (a local executor has
        one per candidate in flight)."""
        placed = self.placement or Placement("local", ())
        return placed if placed.workers is not None else dataclasses.replace(placed, workers=self.jobs)

    @property
    def candidates_per_second(self) -> float | None:
        return self.candidates_tested / self.search_seconds if self.search_seconds > 0 else None

    @property
    def unused_share(self) -> float | None:
        return self.unused_runs / self.candidates_tested if self.candidates_tested else None

    def to_json(self) -> dict:
        return {
            "output": str(self.output) if self.output else None,
            "alone": self.alone,
            "command": self.command,
            "report": str(self.report) if self.report else None,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "ratio": round(self.tokens_after / self.tokens_before, 4) if self.tokens_before else None,
            "candidates_tested": self.candidates_tested,
            "runs": self.oracle.runs,
            "cache_hits": self.oracle.cache_hits,
            "invalid_skipped": self.oracle.invalid,
            "verdicts": dict(self.oracle.by_verdict),
            "other_errors": dict(self.oracle.other_errors),
            "seconds": round(self.seconds, 3),
            "stopped_early": self.stopped is not None,
            "stop_reason": self.stopped,
            "verified": {"reproduced": self.verified[0], "runs": self.verified[1]},
            "isolation": self.isolation.value,
            "preloaded_modules": self.preload_modules,
            "timeout": self.timeout,
            "calibration_runs": list(self.calibration),
            "jobs": self.jobs,
            **self.where.to_json(),
            "candidates_per_second": round(self.candidates_per_second, 3) if self.candidates_per_second else None,
            # runs made in parallel whose verdicts the search did not use (core/ddmin.py, probdd.py)
            "speculation": {"unused_runs": self.unused_runs,
                            "share": round(self.unused_share, 4) if self.unused_share is not None else None},
            "threads_per_candidate": self.threads,
            "gpus": list(self.gpus),
            "signature": self.signature.to_json(),
            "final_signature": self.final_signature.to_json() if self.final_signature else None,
            "environment": self.environment,
            "notes": self.notes,
            "passes": self.passes,
            "launch_env": self.launch_env,
            "surfaced_signature": self.surfaced.to_json() if self.surfaced else None,
            "original_rate": {"reproduced": self.original_rate[0], "runs": self.original_rate[1]},
            "varying_dimensions": [{"argument": a, "dimension": d} for a, d in self.varying],
            "needs": list(self.needs),
            "copied_beside": list(self.beside),
            "run_from": str(self.run_from) if self.run_from else None,
            "state": self.state,
            "ablation": self.ablation.to_json() if self.ablation else None,
            "ablation_summary": self.ablation.stage if self.ablation else None,
            "loaded_objects": [
                {"file": f, "name": n, "class": c, "bytes": b} for f, n, c, b in self.loaded_objects
            ],
            "verified_where_written": self.in_place,
            # (seconds since the start, tokens) at the start of the search and at each
            # accepted reduction: when each size was reached
            "trace": [list(point) for point in self.trace],
            "extracted": None if self.extracted is None else {
                "script": str(self.extracted.path),
                "data": str(self.extracted.data) if self.extracted.data else None,
                "level": self.extracted.level,
                "lines": self.extracted.lines,
                "note": self.extracted.note,
                "holds": self.extracted.holds,
            },
            "extract_error": self.extract_error,
            "distributed": self.distributed,
            "start": self.start,
            "isolation_because": self.isolation_because,
            "preload_dropped": [d.to_json() for d in self.preload_dropped],
            "torch_preloaded": self.torch_preloaded,
            "eager": self.eager,
        }
