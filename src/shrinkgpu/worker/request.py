"""What the parent asks of one run, as a typed message both sides read by field.

The reducer says what it wants recorded beyond the first error (``Watch``: count the
loops, save a call, pickle the data objects); the runner adds where this run's files
are (``RunRequest``); the probe, in the candidate's process, reads the same fields.  The
message crosses a process boundary as JSON (a fork server's pipe, or a file a fresh
interpreter reads), so it holds only plain values.

Standard library only: the probe imports this in every fresh interpreter, before the
user's script.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Capture:
    """Save the arguments of the ``call``-th call of operator ``op`` to ``path`` just
    before it runs (on a GPU the values cannot be read after a failed kernel)."""

    op: str
    call: int
    path: str


@dataclass(frozen=True)
class StateAt:
    """Save the program's state at the start of one iteration of a loop: when a frame of
    ``file`` (relative to the root) enters the body of the loop whose header is on line
    ``header``, and the loops of that frame named in ``iterations`` ((header line,
    iteration), the loop itself among them) are at those iterations.  What is saved, to
    ``path``: the state_dict of every module, optimizer, LR scheduler and grad scaler
    the frame holds (and its objects' attributes hold), the plain values of ``names``
    there (the loop's targets, counters, tensors the loop rebinds), and the RNG states."""

    file: str
    header: int
    iterations: tuple[tuple[int, int], ...]
    path: str
    names: tuple[str, ...] = ()
    # a file the probe rewrites every few seconds with the iteration the loop is in, so
    # that the progress lines of a long run can say how far it is
    progress: str | None = None
    # which call of the function that holds the loop (1: its first; 0: any): an
    # ``evaluate()`` that validates during training and fails on the test set later
    call: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "StateAt":
        return cls(
            file=data["file"], header=int(data["header"]),
            iterations=tuple((int(h), int(i)) for h, i in data.get("iterations") or ()),
            path=data["path"], names=tuple(data.get("names") or ()), progress=data.get("progress"),
            call=int(data.get("call") or 0),
        )


@dataclass(frozen=True)
class Watch:
    """What a run records besides its first error and the facts every run records
    (argparse results, configuration reads, seeding calls, files read)."""

    collect_modules: bool = False  # every module the run imported (what to preload)
    collect_env: bool = False  # versions, backend and thread pools, for the report
    # which iteration each loop around the failure was in, and where the time went (a
    # counter compiled into each loop of the user's files and a sampling thread)
    count_loops: bool = False
    # the shapes of every torch call's tensor arguments, for the operators that raised:
    # which dimensions the program varies (the first run only)
    op_shapes: bool = False
    capture: Capture | None = None
    # a path: where a library called back into a user object, save that call there
    cut: str | None = None
    # a directory: at the first error, pickle the user's data objects there
    save_objects: str | None = None
    # and, when the run failed this many seconds or more after it started, the results
    # of its data helpers (``train, val, test = build_splits(cfg)``): a run that short is
    # not started from a saved state, the one use of them
    save_results_after: float | None = None
    # a directory: the arguments of each torch call that raises, saved as it raised
    # (``raised-<n>.pt``): the failing call from the first run itself, where its values
    # can still be read (not after a failed GPU kernel: then a ``capture`` run is needed)
    keep_raised: str | None = None
    state: StateAt | None = None
    # at the first error, the sizes the user's failing frames read (``len(vocab)``,
    # ``x.size(1)``) evaluated there, as literals (``probe.sizes``)
    sizes: bool = False
    # compiled callables run eagerly (``torch.compiler.set_stance("force_eager")``):
    # whether a torch.compile failure needs the compiler at all
    eager: bool = False
    # (operator, N): the result of its N-th call summarised (dtype, shape, all finite or
    # not): what a comparison that passes returned where the original failed
    output_of: tuple[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Watch":
        capture = data.get("capture")
        return cls(
            collect_modules=bool(data.get("collect_modules")),
            collect_env=bool(data.get("collect_env")),
            count_loops=bool(data.get("count_loops")),
            op_shapes=bool(data.get("op_shapes")),
            capture=Capture(**capture) if capture else None,
            cut=data.get("cut"),
            keep_raised=data.get("keep_raised"),
            state=StateAt.from_json(data["state"]) if data.get("state") else None,
            save_objects=data.get("save_objects"),
            save_results_after=data.get("save_results_after"),
            sizes=bool(data.get("sizes")),
            eager=bool(data.get("eager")),
            output_of=tuple(data["output_of"]) if data.get("output_of") else None,  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class RunRequest:
    """One run: the script in its run directory, as the user would start it, and what
    to record about it."""

    script: str  # absolute path of the run's copy of the script
    argv: tuple[str, ...]  # argv[0] as the user typed it, then the script's arguments
    cwd: str
    observation: str  # where the probe writes what it saw (JSON)
    crash_log: str  # where faulthandler writes the stack of a run killed by a signal
    roots: tuple[str, ...]  # the run's copies of the user's directory: whose files are the user's
    module: str | None = None  # run as ``python -m module``
    capture_ops: bool = True  # watch torch calls (the operator of the first error)
    watch: Watch = field(default_factory=Watch)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["argv"] = list(self.argv)
        data["roots"] = list(self.roots)
        data["watch"] = self.watch.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunRequest":
        return cls(
            script=data["script"],
            argv=tuple(data["argv"]),
            cwd=data["cwd"],
            observation=data["observation"],
            crash_log=data.get("crash_log") or "",
            roots=tuple(data["roots"]),
            module=data.get("module"),
            capture_ops=bool(data.get("capture_ops", True)),
            watch=Watch.from_json(data.get("watch") or {}),
        )
