"""Every message between the reducer's process and the processes that run candidates,
as frozen types both sides read by field, each with ``to_json``/``from_json``.

Down: what the reducer wants recorded beyond the first error (``Watch``: count the
loops, save a call, pickle the data objects); the runner adds where this run's files
are (``RunRequest``); the executor wraps it in the supervisor's ``RunCommand`` (or
``PreloadCommand``).  Up: the supervisor's events (``Ready``, ``Preloaded``,
``PreloadRefusal``, ``Started``, ``Finished``) and what the probe saw in the candidate's
process (``ProbeReport``, the file ``observation.json``).  Messages cross a process
boundary as JSON (the supervisor's pipes, a file a fresh interpreter reads), so they
hold only plain values.

Standard library only: the probe imports this in every fresh interpreter, before the
user's script, and the supervisor before it preloads anything.
"""

from __future__ import annotations

import enum
from dataclasses import Field, asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, TypeVar

# Seconds a fresh interpreter of the development machine took to import torch: the unit
# of a run that could not measure its own (torch was loaded before the probe ran).
NOMINAL_STARTUP = 1.6
# A measured import shorter than this was no import (torch was already loaded).
MIN_STARTUP = 0.05
# Beside a run's observation file, the probe's record of the first error as it leaves
# the script, written before anything slow (saving what the watch asks for): a run
# stopped by its time limit after its error still says what it was.
FIRST_ERROR_SUFFIX = ".first"


def startup_of(measured: float | None) -> float:
    """The pace of a run: the seconds its interpreter took to import torch, or the
    development machine's when it did not measure one."""
    return measured if measured is not None and measured >= MIN_STARTUP else NOMINAL_STARTUP


def run_length(seconds: float, startup: float | None) -> float:
    """How long ``seconds`` of a script's own time (after torch's import) are, in units
    of that import: the length a busy machine, which slows both alike, does not change."""
    return max(0.0, seconds) / startup_of(startup)


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


# The fields of a ``Watch`` that hold a path it writes to (besides ``capture`` and ``state``).
PATH_FIELDS = ("cut", "save_objects", "keep_raised", "collectives", "written")


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
    # and, when the run's own time before its error was at least this long (in units of
    # its import of torch, ``run_length``; 0: always), the results of its data helpers
    # (``train, val, test = build_splits(cfg)``): a shorter run is not started from a
    # saved state, the one use of them
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
    # a file: each torch.distributed collective notes there that the rank entered it
    # (which one, where) and left it, for the launcher that watches ranks for a hang
    collectives: str | None = None
    # a directory: when the run ends, the files it wrote (new or changed since it
    # started) copied there: what a failure after the training loops reads of what they
    # wrote (a checkpoint, a vocabulary), for a start without those loops
    written: str | None = None
    # the script starts its own ranks with the spawn method (``torch.multiprocessing.spawn``):
    # a forked candidate forks them from a copy of itself made before the script ran
    # (probe/children.py), instead of a new interpreter each; this many wait forked in
    # advance (0: no such copy)
    zygote: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def for_child(self, index: int, collectives: str) -> "Watch":
        """This watch for process ``index`` the script started itself (probe/children.py):
        what a process of its own records (its modules, versions, the collective it waits
        in, at ``collectives``; the arguments of its calls that raise, the call to
        capture), each path its own; what only the whole program's run can give (the
        loops, the library's cut, the state) is the parent's."""

        own = Watch(keep_raised=self.keep_raised, capture=self.capture).with_paths(lambda path: f"{path}.child{index}")
        return replace(own, collect_modules=self.collect_modules, collect_env=self.collect_env, collectives=collectives)

    def paths(self) -> dict[str, str]:
        """Every path this watch writes to, by the field that holds it (``capture.path``,
        ``state.progress``): the one list a run's copies (a rank's, a child's, a Ray
        node's) move."""
        out = {name: getattr(self, name) for name in PATH_FIELDS}
        if self.capture is not None:
            out["capture.path"] = self.capture.path
        if self.state is not None:
            out["state.path"], out["state.progress"] = self.state.path, self.state.progress
        return {name: path for name, path in out.items() if path}

    def with_paths(self, move: Callable[[str], str]) -> "Watch":
        """This watch with every path it writes to moved by ``move``."""
        moved = {name: move(path) for name, path in self.paths().items()}
        capture, state = self.capture, self.state
        # (Any: the fields named in PATH_FIELDS, each ``str | None``, which a dict's type
        # cannot say field by field)
        paths: dict[str, Any] = {name: moved[name] for name in PATH_FIELDS if name in moved}
        return replace(
            self, **paths,
            capture=replace(capture, path=moved["capture.path"]) if capture is not None else None,
            state=(replace(state, path=moved.get("state.path", state.path),
                           progress=moved.get("state.progress", state.progress)) if state is not None else None),
        )

    def for_rank(self, rank: int) -> "Watch":
        """This watch for one of several ranks: each path a rank writes to made its own
        (``<path>.rank<k>``)."""
        return self.with_paths(lambda path: f"{path}.rank{rank}")

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
            output_of=tuple(data["output_of"]) if data.get("output_of") else None,
            collectives=data.get("collectives"),
            written=data.get("written"),
            zygote=int(data.get("zygote") or 0),
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
    # started by torchrun, one process per rank: each rank writes its own report (and
    # what its watch saves) under ``<path>.rank<RANK>`` (``for_rank``)
    per_rank: bool = False

    def for_rank(self, rank: int) -> "RunRequest":
        return replace(self, observation=f"{self.observation}.rank{rank}", crash_log=f"{self.crash_log}.rank{rank}",
                       watch=self.watch.for_rank(rank), per_rank=False)

    def for_child(self, index: int) -> "RunRequest":
        """The request of a process the script started itself (probe/children.py): its
        report, crash log and collectives' file beside the parent's
        (``<observation>.child<k>``, ``<observation>.collectives.child<k>``)."""
        return replace(self, observation=f"{self.observation}.child{index}", crash_log=f"{self.crash_log}.child{index}",
                       watch=self.watch.for_child(index, f"{self.observation}.collectives.child{index}"),
                       per_rank=False)

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
            per_rank=bool(data.get("per_rank")),
        )


# -- the supervisor's commands --------------------------------------------------------------
@dataclass(frozen=True)
class RunCommand:
    """Run one request: how its process starts (``mode``: "fork" from the preloaded
    server, "fresh" for a new interpreter), its limit, its standard streams and the
    variables it adds to the user's environment (GPU pinning, thread caps, TMPDIR)."""

    id: int
    mode: str
    request: RunRequest
    request_path: str  # where a fresh interpreter reads ``request`` from
    timeout: float
    stdin: str
    stdout: str
    stderr: str
    env: dict[str, str] = field(default_factory=dict)
    # a fresh interpreter's launcher: the arguments of ``python`` that come before the
    # probe's own (``-m torch.distributed.run ... --no-python``: the ranks as torchrun starts them)
    launcher: tuple[str, ...] = ()

    op: ClassVar[str] = "run"

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "id": self.id, "mode": self.mode, "request": self.request.to_json(),
                "request_path": self.request_path, "timeout": self.timeout, "stdin": self.stdin,
                "stdout": self.stdout, "stderr": self.stderr, "env": dict(self.env), "launcher": list(self.launcher)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunCommand":
        return cls(id=int(data["id"]), mode=str(data["mode"]), request=RunRequest.from_json(data["request"]),
                   request_path=str(data.get("request_path") or ""), timeout=float(data.get("timeout", 60.0)),
                   stdin=str(data["stdin"]), stdout=str(data["stdout"]), stderr=str(data["stderr"]),
                   env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
                   launcher=tuple(str(a) for a in data.get("launcher") or ()))


@dataclass(frozen=True)
class PreloadCommand:
    """Import ``modules`` in the server, then size its thread pools to ``threads`` for
    every forked child (None: as loaded).  ``deep_each``: ask torch's bad-fork flag after
    every import (a fork each, tens of milliseconds), to name the module that set it when
    a preload was refused as a whole for it."""

    modules: tuple[str, ...]
    threads: int | None = None
    deep_each: bool = False

    op: ClassVar[str] = "preload"

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "modules": list(self.modules), "threads": self.threads, "deep_each": self.deep_each}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "PreloadCommand":
        threads = data.get("threads")
        return cls(tuple(data.get("modules") or ()), int(threads) if threads else None, bool(data.get("deep_each")))


@dataclass(frozen=True)
class CancelCommand:
    """Stop run ``id`` and what it started (a rank whose peer failed, or that hangs); its
    ``Finished`` says ``cancelled``."""

    id: int

    op: ClassVar[str] = "cancel"

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "id": self.id}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "CancelCommand":
        return cls(int(data["id"]))


def command_from_json(data: dict[str, Any]) -> RunCommand | PreloadCommand | CancelCommand:
    """A command read off the supervisor's pipe; ``ValueError`` for one it does not know."""
    kinds: dict[object, Callable[[dict[str, Any]], RunCommand | PreloadCommand | CancelCommand]] = {
        RunCommand.op: RunCommand.from_json, PreloadCommand.op: PreloadCommand.from_json,
        CancelCommand.op: CancelCommand.from_json,
    }
    from_json = kinds.get(data.get("op"))
    if from_json is None:
        raise ValueError(f"unknown command {data.get('op')!r}")
    return from_json(data)


# -- the supervisor's events ----------------------------------------------------------------
E = TypeVar("E", bound="_Event")


class _Event:
    """An event: its fields, and its name under ``"event"``."""

    event: ClassVar[str]
    if TYPE_CHECKING:
        # Every event is a dataclass (asdict and fields read it as one); declared for the
        # type checker only, so that this base stays no dataclass of its own.
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    def to_json(self) -> dict[str, Any]:
        return {"event": self.event, **asdict(self)}

    @classmethod
    def from_json(cls: type[E], data: dict[str, Any]) -> E:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class Ready(_Event):
    pid: int
    subreaper: bool = False  # whether orphans of a candidate are re-parented to it

    event: ClassVar[str] = "ready"


@dataclass(frozen=True)
class Preloaded(_Event):
    imported: int
    failed: list[str]
    seconds: float

    event: ClassVar[str] = "preloaded"


@dataclass(frozen=True)
class PreloadRefusal(_Event):
    """Forking is unsafe after importing ``module`` (None: before any import, or, with
    ``whole``, after the preload as a whole); the server exits."""

    module: str | None
    reason: str
    whole: bool = False

    event: ClassVar[str] = "preload_refused"


@dataclass(frozen=True)
class Started(_Event):
    id: int
    pid: int

    event: ClassVar[str] = "started"


@dataclass(frozen=True)
class Finished(_Event):
    """A run is over: its exit status or signal, whether it was killed at its limit or by
    the server's shutdown (``cancelled``), its wall time; ``error``: the run never
    started (a fork the server refused)."""

    id: int
    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    cancelled: bool = False
    wall: float = 0.0
    error: str | None = None

    event: ClassVar[str] = "finished"


@dataclass(frozen=True)
class ServerError(_Event):
    message: str

    event: ClassVar[str] = "error"


Event = Ready | Preloaded | PreloadRefusal | Started | Finished | ServerError
_EVENTS: dict[object, type[Event]] = {
    kind.event: kind for kind in (Ready, Preloaded, PreloadRefusal, Started, Finished, ServerError)
}


def event_from_json(data: dict[str, Any]) -> Event | None:
    """An event read off the supervisor's pipe (None for one this side does not know)."""
    kind = _EVENTS.get(data.get("event"))
    return kind.from_json(data) if kind is not None else None


# -- what the probe saw -----------------------------------------------------------------------
class RunStatus(str, enum.Enum):
    """How a run ended, as the probe (or, without its report, the supervisor) saw it."""

    OK = "ok"  # the script returned
    EXCEPTION = "exception"  # an exception left the script
    EXIT = "exit"  # SystemExit with a non-zero status
    PROBE_ERROR = "probe-error"  # the probe failed before the script ran
    NO_REPORT = "no-report"  # the process ended without a report (os._exit)
    TIMEOUT = "timeout"
    HANG = "hang"  # ranks that wait in collectives not every rank reaches (worker/ranks.py)
    SIGNAL = "signal"  # killed by a signal (a segfault, an abort)
    INFRA = "infra"  # the run was lost to the infrastructure: nothing is known of the script

    __str__ = str.__str__

    def __format__(self, format_spec: str) -> str:
        return str.__format__(self, format_spec)


@dataclass(frozen=True)
class ProbeReport:
    """What the probe writes at the end of a run (``RunRequest.observation``): the
    exception chain and the torch calls that raised, and the facts the run's ``Watch``
    asked for.  Each field that a watch asks for is None (or empty) when it was not."""

    status: RunStatus = RunStatus.OK
    exit_code: int = 0
    chain: tuple[dict[str, Any], ...] = ()  # the exception chain, outermost first (ExceptionRecord's JSON)
    torch_errors: tuple[dict[str, Any], ...] = ()  # the torch calls seen raising, in order
    suppressed: dict[str, Any] | None = None  # what ``raise ... from None`` hid
    probe_error: str | None = None
    duration: float | None = None  # the script's own time
    # seconds the probe took to import torch before the script (a fresh interpreter's;
    # None where it was loaded already: a forked run): the pace of this machine now
    startup: float | None = None
    failed_at: float | None = None  # when the error left the script (time.time()): which rank failed first
    parses: tuple[dict[str, Any], ...] = ()  # argparse results
    loads: tuple[dict[str, Any], ...] = ()  # configuration reads
    reads: tuple[str, ...] = ()  # files under the roots the script opened
    seed_sites: tuple[tuple[str, int, bool], ...] = ()
    modules: tuple[tuple[str, str | None, str | None], ...] = ()  # Watch.collect_modules
    environment: dict[str, Any] = field(default_factory=dict)  # Watch.collect_env
    loop_time: tuple[tuple[str, int, float], ...] = ()  # Watch.count_loops
    cut: dict[str, Any] | None = None  # Watch.cut
    saved_objects: tuple[dict[str, Any], ...] = ()  # Watch.save_objects
    sizes: tuple[dict[str, Any], ...] = ()  # Watch.sizes
    op_shapes: dict[str, Any] = field(default_factory=dict)  # Watch.op_shapes
    raised_calls: tuple[dict[str, Any], ...] = ()  # Watch.keep_raised
    state: dict[str, Any] | None = None  # Watch.state
    output: str | None = None  # Watch.output_of
    written: dict[str, Any] | None = None  # Watch.written
    # the processes the script started itself that were watched (probe/children.py): each
    # {"index", "launcher", "method"}, a report of its own beside this one
    children: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["status"] = self.status.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ProbeReport":
        def seq(name: str) -> tuple[Any, ...]:
            return tuple(data.get(name) or ())

        try:
            status = RunStatus(data.get("status", "ok"))
        except ValueError:
            status = RunStatus.OK
        return cls(
            status=status,
            exit_code=data.get("exit_code", 0),
            chain=seq("chain"),
            torch_errors=seq("torch_errors"),
            suppressed=data.get("suppressed"),
            probe_error=data.get("probe_error"),
            duration=data.get("duration"),
            startup=data.get("startup"),
            failed_at=data.get("failed_at"),
            parses=seq("parses"),
            loads=seq("loads"),
            reads=seq("reads"),
            seed_sites=tuple((f, int(n), bool(i)) for f, n, i in data.get("seed_sites") or ()),
            modules=tuple((m[0], m[1], m[2]) for m in data.get("modules") or ()),
            environment=data.get("environment") or {},
            loop_time=seq("loop_time"),
            cut=data.get("cut"),
            saved_objects=seq("saved_objects"),
            sizes=seq("sizes"),
            op_shapes=data.get("op_shapes") or {},
            raised_calls=seq("raised_calls"),
            state=data.get("state"),
            output=data.get("output"),
            written=data.get("written"),
            children=seq("children"),
        )
