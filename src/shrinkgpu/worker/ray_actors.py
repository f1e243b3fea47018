"""Candidates on a Ray cluster: ``RayExecutor``, one more ``Executor``.

Each Ray actor (``CandidateWorker``) owns a fork server (``ForkServer``, the local
executor's machinery) started on the actor's node with the reducer's preload, and a
``Sandbox`` of its own there: the user's directory arrives once per node through the
object store (the driver puts it once; Ray moves an object to a node once, and every
actor of that node reads it from shared memory), and each candidate's run directory is
made on the actor's node.  A candidate travels as one actor call carrying only what
differs from that copy: the program files the runner wrote fresh, the files the
template gained or had repaired since, and the run's temporary directory (warm compile
caches).  Paths in the request (the run directory, the watch's outputs) are moved to the
node's, and moved back in the observation; what the watch saved there comes back with it.

Faults: an actor that dies during a candidate (killed, its node gone, its fork server
killed by the candidate) costs the candidate nothing: it is queued again for another
actor, inside this executor, so the runner and the search count it once.  A candidate
that kills its worker a second time is a crash of the candidate (a ``SIGKILL``
observation), never a retry loop.  ``close()`` kills every actor (no restart), so none
is left in the cluster.

Ray is imported here only, and only when a ``RayCluster`` is made: the local executor
never imports it.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import shutil
import signal
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from shrinkgpu.signature import Signature
from shrinkgpu.worker.executors import (
    Executor,
    ExecutorSettings,
    ForkServer,
    ForkUnavailable,
    Isolation,
    Job,
    Placement,
    PreloadReport,
)
from shrinkgpu.worker.factory import Capacity, Executors, default_executor
from shrinkgpu.worker.observation import Observation
from shrinkgpu.worker.protocol import RunRequest, RunStatus, Watch
from shrinkgpu.worker.sandbox import Sandbox, sweep_stale_sessions

RAY_MISSING = "--executor ray needs Ray, which is not installed here: pip install 'shrinkgpu[ray]'"
# Runs a candidate gets when the worker running it dies: the second death is the candidate's.
ATTEMPTS = 2
# Seconds an actor is given to remove its node's directories before it is killed.
SHUTDOWN_GRACE = 5.0
# Seconds the workers get to be placed and to preload (torch's import on a busy node).
READY_TIMEOUT = 300.0
# Seconds between asking a restarting actor whether it is back.
RECOVER_INTERVAL = 1.0
# The most of the user's directory shipped to the nodes (once, through the object store;
# every worker then holds it in memory to make its run directories): past it, the start
# is refused with what to leave out.  Big data belongs in a linked directory, which is
# shipped as the link.
SHIP_BYTES_LIMIT = 1 << 30
# The variables that pin a local worker to a GPU: an actor's GPU is the one Ray gave it.
PIN_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


class RayUnavailable(RuntimeError):
    """Ray is not installed, or the cluster asked for cannot be reached."""


def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(RAY_MISSING) from exc
    return ray


@dataclass(frozen=True)
class RayOptions:
    """Where the cluster is and what each worker takes of it."""

    # "host:port" or "ray://host:port"; "local": start a cluster on this machine;
    # None: ``RAY_ADDRESS``, else a cluster already started on this machine ("auto")
    address: str | None = None
    workers: int | None = None  # actors; None: as many as the cluster's GPUs (else CPUs) hold
    gpus_per_worker: float = 1.0  # a fraction shares a GPU; ignored on a cluster without GPUs
    cpus_per_worker: float = 1.0


# -- what travels ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Snapshot:
    """The user's directory as the runs see it (the template the runner links from)."""

    files: dict[str, bytes]
    links: dict[str, str]  # shared directories (``data -> /mnt/datasets``): linked, not copied
    dirs: tuple[str, ...]


@dataclass(frozen=True)
class Shipment:
    """One candidate as an actor call: the request and what differs from the snapshot."""

    request: dict[str, Any]  # RunRequest.to_json(), the driver's paths
    run_path: str  # the driver's run directory, and its temporary directory
    run_tmp: str
    files: dict[str, bytes]  # written fresh, or changed in the template since the snapshot
    missing: tuple[str, ...]  # snapshot files this run does not have
    # the run's temporary directory as it starts (a copy of warm compile caches, the same
    # for every run): ObjectRef of {relative path: bytes}, put once per content
    tmp: Any
    timeout: float
    env: dict[str, str]
    snapshot: Any  # ObjectRef of the Snapshot
    stdin: Any  # ObjectRef of the stdin bytes


@dataclass(frozen=True)
class Returned:
    observation: Observation  # with the driver's paths
    worker_died: bool  # the fork server died under the run (the candidate killed it?)
    outputs: dict[str, dict[str, bytes]]  # driver path of a watch output -> {relative path: bytes}
    node: str


def _identity(st: os.stat_result) -> tuple[int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _walk(top: Path):
    """(relative path, DirEntry) of everything under ``top``, symlinks not followed."""
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(top / rel if rel else top) as entries:
            for entry in entries:
                sub = os.path.join(rel, entry.name) if rel else entry.name
                yield sub, entry
                if entry.is_dir(follow_symlinks=False):
                    stack.append(sub)


def _tree(top: Path) -> dict[str, bytes]:
    if not top.exists():
        return {}
    if top.is_file():
        return {"": top.read_bytes()}
    return {rel: Path(e.path).read_bytes() for rel, e in _walk(top) if e.is_file(follow_symlinks=False)}


def _write_tree(top: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = top / rel if rel else top
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def check_shipment(template: Path, limit: int = SHIP_BYTES_LIMIT) -> None:
    """Refuse (``RayUnavailable``: the reduction stops, it does not go on elsewhere) a
    directory too large to ship, naming its largest entries, before any worker starts."""
    sizes: dict[str, int] = {}
    total = 0
    for rel, entry in _walk(template):
        if entry.is_file(follow_symlinks=False):
            size = entry.stat(follow_symlinks=False).st_size
            top = rel.split(os.sep, 1)[0]
            sizes[top] = sizes.get(top, 0) + size
            total += size
    if total <= limit:
        return
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
    named = ", ".join(f"{name} ({size / 2**20:.0f} MiB)" for name, size in largest)
    raise RayUnavailable(
        f"the directory shipped to the Ray workers is {total / 2**20:.0f} MiB, more than "
        f"{limit / 2**20:.0f} MiB; its largest entries: {named}. Move data the script reads into a "
        "directory linked in (a symlink is shipped as the link: its target must exist on every node), "
        "or point --root at a smaller directory")


def snapshot_of(run_root: Path) -> tuple[Snapshot, dict[str, tuple[int, int, int]]]:
    """The template behind a run directory (every file linked from it: more than one
    link), and each file's identity on the driver."""
    files: dict[str, bytes] = {}
    ids: dict[str, tuple[int, int, int]] = {}
    links: dict[str, str] = {}
    dirs: list[str] = []
    for rel, entry in _walk(run_root):
        if entry.is_symlink():
            links[rel] = os.readlink(entry.path)
        elif entry.is_dir():
            dirs.append(rel)
        else:
            st = entry.stat(follow_symlinks=False)
            if st.st_nlink > 1:
                files[rel] = Path(entry.path).read_bytes()
                ids[rel] = _identity(st)
    return Snapshot(files, links, tuple(sorted(dirs))), ids


def differences(run_root: Path, ids: dict[str, tuple[int, int, int]]) -> tuple[dict[str, bytes], tuple[str, ...]]:
    """What a run directory holds beyond the snapshot whose identities are ``ids``: files
    written fresh or not the snapshot's, and the snapshot's files it lacks."""
    fresh: dict[str, bytes] = {}
    seen = set()
    for rel, entry in _walk(run_root):
        if not entry.is_file(follow_symlinks=False):
            continue
        seen.add(rel)
        st = entry.stat(follow_symlinks=False)
        if st.st_nlink == 1 or ids.get(rel) != _identity(st):
            fresh[rel] = Path(entry.path).read_bytes()
    return fresh, tuple(sorted(set(ids) - seen))


def _watch_paths(request: dict[str, Any]) -> list[str]:
    """Every path the run's watch writes to (outside the run directory)."""
    return list(Watch.from_json(request.get("watch") or {}).paths().values())


def swap(value: Any, pairs: Sequence[tuple[str, str]]) -> Any:
    """``value`` with every path of ``pairs`` (from, to) replaced, in strings anywhere
    inside it (messages and tracebacks name them too)."""
    if type(value) is str:
        for old, new in pairs:
            if old in value:
                value = value.replace(old, new)
        return value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(swap(v, pairs) for v in value)
    if isinstance(value, list):
        return [swap(v, pairs) for v in value]
    if isinstance(value, dict):
        return {swap(k, pairs): swap(v, pairs) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: swap(getattr(value, f.name), pairs) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value


def _why(exc: BaseException) -> str:
    """What Ray says of a dead actor, in a few words: its node gone, or the actor itself."""
    text = str(exc)
    if "node" in text.lower() and ("died" in text.lower() or "dead" in text.lower()):
        return "its node left the cluster"
    return "the worker process died"


def worker_crash(wall: float, node: str) -> Observation:
    """A candidate whose run killed the worker running it twice: its crash."""
    message = (f"shrinkgpu: the Ray worker running this candidate died, {ATTEMPTS} times (last on node {node}): "
               "the candidate kills its worker")
    return Observation(exit_code=None, signal=int(signal.SIGKILL), timed_out=False, wall=wall,
                       status=RunStatus.SIGNAL, signature=Signature.for_signal(int(signal.SIGKILL), "SIGKILL",
                                                                               message, stderr=message),
                       stderr=message)


# -- the actor --------------------------------------------------------------------------------
class CandidateWorker:
    """One worker on one node: a fork server there, pinned to the GPU Ray gave the actor,
    and the node's copy of the user's directory.  Ray re-runs ``__init__`` when it
    restarts the actor, so a restarted worker preloads again and fetches the copy again."""

    def __init__(self, settings: ExecutorSettings, preload: tuple[str, ...], pin_gpu: bool):
        # An actor killed outright (its node's OOM killer, ray.kill) removes nothing: its
        # directories are sessions owned by its process, which the next worker on the node
        # sweeps as the next reduction sweeps the driver's.
        sweep_stale_sessions()
        empty = Path(tempfile.mkdtemp(prefix="shrinkgpu-empty-"))
        try:
            self.home = Sandbox(empty)
        finally:
            empty.rmdir()
        self.base = self.home.session / "node"
        self.base.mkdir()
        self.tmp = self.base / "tmp"  # the supervisor's TMPDIR on this node
        self.tmp.mkdir()
        env = {k: v for k, v in settings.env.items() if not (pin_gpu and k in PIN_VARIABLES)}
        env["TMPDIR"] = str(self.tmp)
        self.gpu = os.environ.get("CUDA_VISIBLE_DEVICES") if pin_gpu else None
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        self.pin_gpu = pin_gpu
        self.settings = dataclasses.replace(settings, env=env)
        self.preload = preload
        self.node = self._node()
        self.sandbox: Sandbox | None = None
        self.snapshot_key: Any = None
        self.stdin_key: Any = None
        self.stdin = self.base / "stdin"
        self.tmp_key: Any = None
        self.tmp_files: dict[str, bytes] = {}
        self._current: Future | None = None
        self._lock = threading.Lock()
        self.server: ForkServer | None = None
        self.report: PreloadReport | ForkUnavailable
        try:
            self.server, self.report = self._start_server()
        except ForkUnavailable as unavailable:
            self.report = unavailable

    @staticmethod
    def _node() -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def _start_server(self) -> tuple[ForkServer, PreloadReport]:
        server = ForkServer(self.settings)
        return server, server.start(self.preload)

    def ready(self) -> tuple[PreloadReport | ForkUnavailable, str, str | None]:
        return self.report, self.node, self.gpu

    def ping(self) -> str:
        return self.node

    def _ensure_sandbox(self, snapshot_ref: Any, stdin_ref: Any) -> Sandbox:
        import ray

        if self.sandbox is None or snapshot_ref != self.snapshot_key:
            snap: Snapshot = ray.get(snapshot_ref)
            user = self.base / "user"
            if self.sandbox is not None:
                self.sandbox.close()
                shutil.rmtree(user, ignore_errors=True)
            user.mkdir()
            for d in snap.dirs:
                (user / d).mkdir(parents=True, exist_ok=True)
            _write_tree(user, snap.files)
            for rel, target in snap.links.items():
                os.symlink(target, user / rel)
            self.sandbox = Sandbox(user)
            self.snapshot_key = snapshot_ref
        if stdin_ref != self.stdin_key:
            self.stdin.write_bytes(ray.get(stdin_ref))
            self.stdin_key = stdin_ref
        return self.sandbox

    def _fetch(self, ref: Any) -> dict[str, bytes]:
        import ray

        if ref != self.tmp_key:
            self.tmp_files, self.tmp_key = ray.get(ref), ref
        return self.tmp_files

    def run(self, ship: Shipment) -> Returned:
        if self.server is None:
            raise ForkUnavailable(str(self.report))
        sandbox = self._ensure_sandbox(ship.snapshot, ship.stdin)
        run = sandbox.prepare({}, omit=(*ship.missing, *ship.files))
        try:
            _write_tree(run.root, ship.files)
            _write_tree(run.tmp, self._fetch(ship.tmp))
            outbox = run.path.parent / f"{run.path.name}-outputs-{run.use}"
            watched = _watch_paths(ship.request)
            outputs = {p: str(outbox / f"{i}-{Path(p).name}") for i, p in enumerate(watched)}
            if outputs:
                outbox.mkdir()
            # the temporary directory lies inside the run's: moved first
            there = [(ship.run_tmp, str(run.tmp)), (ship.run_path, str(run.path)), *outputs.items()]
            request = RunRequest.from_json(swap(ship.request, there))
            env = {k: swap(v, there) for k, v in ship.env.items() if not (self.pin_gpu and k in PIN_VARIABLES)}
            job = Job(request=request, run=run, timeout=ship.timeout, stdin=self.stdin, env=env)
            with self._lock:
                self._current = self.server.submit(job)
            obs = self._current.result()
            with self._lock:
                self._current = None
            died = obs.infra_error is not None and not self.server.alive
            if died:
                self.server.close()
                self.server, self.report = self._start_server()
            back = [(new, old) for old, new in reversed(there)]
            saved = {old: _tree(Path(new)) for old, new in outputs.items()}
            if outputs:
                shutil.rmtree(outbox, ignore_errors=True)
            return Returned(swap(obs, back), died, saved, self.node)
        finally:
            sandbox.release(run)

    def cancel(self) -> None:
        with self._lock:
            if self._current is not None and self.server is not None:
                self.server.cancel(self._current)

    def shutdown(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        if self.sandbox is not None:
            self.sandbox.close()
        self.home.close()


# -- the driver's side -------------------------------------------------------------------------
@dataclass
class _Task:
    ship: Shipment
    future: Future
    started: float
    attempts: int = 0
    tried: set = field(default_factory=set)
    ref: Any = None


class RayExecutor(Executor):
    """Candidates run by actors of a Ray cluster, each the next idle one; one fork server
    per actor on its node."""

    isolation = Isolation.FORK

    def __init__(self, cluster: "RayCluster", settings: ExecutorSettings):
        self.cluster = cluster
        self.settings = settings
        self.lanes = max(1, settings.lanes)
        self._actors: list[Any] = []  # the pool: every actor not known to be dead for good
        self._made: list[Any] = []  # every actor made, killed at close() whatever became of it
        self._node_of: dict[Any, str] = {}  # the node each actor started on
        self._losses: list[dict] = []  # the workers that died under a candidate (``placement``)
        self._started = time.perf_counter()
        self._idle: list[Any] = []
        self._pending: collections.deque[_Task] = collections.deque()
        self._running: dict[Future, tuple[Any, _Task]] = {}
        self._lock = threading.RLock()
        self._closed = False
        self._snapshot: Any = None
        self._ids: dict[str, tuple[int, int, int]] = {}
        self._stdin: dict[str, Any] = {}
        self._tmp: dict[tuple, Any] = {}
        self.nodes: tuple[str, ...] = ()

    def start(self, preload: Sequence[str] = ()) -> PreloadReport:
        started = time.perf_counter()
        if self.settings.template is not None:
            check_shipment(self.settings.template)
        ray = self.cluster.ray
        options = self.cluster.options
        gpus = self.cluster.gpus > 0 and options.gpus_per_worker > 0
        count = self.cluster.workers()
        # Spread over the nodes: Ray's default packs a node first, and workers on one node
        # share its CPUs, its disk and the copy it fetches, while another node idles.
        remote = ray.remote(CandidateWorker).options(
            num_gpus=options.gpus_per_worker if gpus else 0, num_cpus=options.cpus_per_worker,
            max_restarts=-1, max_task_retries=0, max_concurrency=2, scheduling_strategy="SPREAD")
        self._actors = [remote.remote(self.settings, tuple(preload), gpus) for _ in range(count)]
        self._made = list(self._actors)
        waiting = [a.ready.remote() for a in self._actors]
        try:
            done, _ = ray.wait(waiting, num_returns=len(waiting), timeout=READY_TIMEOUT)
            if len(done) < len(waiting):
                # Ray keeps an actor pending, never failing, while no node has room for it.
                raise ForkUnavailable(f"{len(waiting) - len(done)} of {count} Ray worker(s) did not start within "
                                      f"{READY_TIMEOUT:.0f}s: the cluster has no room for what each asks "
                                      f"({options.gpus_per_worker if gpus else 0} GPU, {options.cpus_per_worker} CPU)")
            ready = ray.get(waiting)
        except ray.exceptions.RayError as exc:
            self.close()
            # (a node without shrinkgpu, or without the script's libraries, says so here)
            raise ForkUnavailable(f"the Ray workers could not start: {str(exc).strip().splitlines()[-1]}") from exc
        except BaseException:
            self.close()
            raise
        refused = [r for r, _, _ in ready if isinstance(r, ForkUnavailable)]
        if refused:
            self.close()
            raise ForkUnavailable(f"on a Ray worker: {refused[0].reason}", refused[0].dropped)
        self._idle = list(self._actors)
        self.nodes = tuple(sorted({node for _, node, _ in ready}))
        self._node_of = {actor: node for actor, (_, node, _) in zip(self._actors, ready)}
        self._started = time.perf_counter()
        first: PreloadReport = ready[0][0]
        # (a report's note is for a fallback: where the workers are is ``nodes``)
        return PreloadReport(first.modules, first.dropped, time.perf_counter() - started, Isolation.FORK)

    # -- submitting -----------------------------------------------------------------------------
    def _shipment(self, job: Job) -> Shipment:
        ray = self.cluster.ray
        if self._snapshot is None:
            snap, self._ids = snapshot_of(job.run.root)
            self._snapshot = ray.put(snap)
        key = str(job.stdin)
        if key not in self._stdin:
            self._stdin[key] = ray.put(job.stdin.read_bytes() if job.stdin.is_file() else b"")
        files, missing = differences(job.run.root, self._ids)
        # Copies keep their mtimes (seed_caches): the same listing is the same content.
        listing = tuple(sorted((rel, e.stat().st_size, e.stat().st_mtime_ns) for rel, e in _walk(job.run.tmp)
                               if e.is_file(follow_symlinks=False)))
        if listing not in self._tmp:
            self._tmp = {listing: ray.put(_tree(job.run.tmp))}  # warm caches change rarely: keep the last
        return Shipment(request=job.request.to_json(), run_path=str(job.run.path), run_tmp=str(job.run.tmp),
                        files=files, missing=missing, tmp=self._tmp[listing], timeout=job.timeout,
                        env=dict(job.env), snapshot=self._snapshot, stdin=self._stdin[key])

    def submit(self, job: Job) -> Future:
        if not self._actors:
            raise RuntimeError("the executor was not started")
        result: Future = Future()
        task = _Task(self._shipment(job), result, time.perf_counter())
        with self._lock:
            self._pending.append(task)
        self._dispatch()
        return result

    def _dispatch(self) -> None:
        with self._lock:
            while self._pending and self._idle and not self._closed:
                task = self._pending.popleft()
                others = [a for a in self._idle if a not in task.tried]
                actor = (others or self._idle)[0]
                self._idle.remove(actor)
                task.tried.add(actor)
                task.ref = actor.run.remote(task.ship)
                self._running[task.future] = (actor, task)
                task.ref.future().add_done_callback(lambda f, a=actor, t=task: self._done(a, t, f))
            if self._pending and not self._actors:
                lost = list(self._pending)
                self._pending.clear()
            else:
                lost = []
        for task in lost:
            task.future.set_result(Observation.infrastructure("no Ray worker is left"))

    def _done(self, actor: Any, task: _Task, done: Future) -> None:
        ray = self.cluster.ray
        with self._lock:
            self._running.pop(task.future, None)
            closed = self._closed
        died, obs = False, None
        try:
            returned: Returned = done.result()
        except ray.exceptions.RayActorError as exc:
            died, node = True, self._node_of.get(actor) or f"{exc}".splitlines()[0][:200]
            self._lost(node, _why(exc))
        except Exception as exc:  # noqa: BLE001 - the actor raised: an infrastructure failure
            obs = Observation.infrastructure(f"on a Ray worker: {type(exc).__name__}: {exc}")
        else:
            died, node = returned.worker_died, returned.node
            if not died:
                for path, files in returned.outputs.items():
                    _write_tree(Path(path), files)
                obs = returned.observation
        if closed:
            task.future.set_result(Observation.infrastructure("the run was cancelled"))
            return
        if died:
            task.attempts += 1
            if task.attempts >= ATTEMPTS:
                obs = worker_crash(time.perf_counter() - task.started, node)
            else:
                with self._lock:
                    self._pending.appendleft(task)  # the same candidate, counted once
                    if self._losses:
                        self._losses[-1]["reran"] += 1
        if obs is not None:
            task.future.set_result(obs)
        if isinstance(done.exception(), ray.exceptions.RayActorError):
            self._recover(actor)
        else:
            with self._lock:
                if not self._closed:
                    self._idle.append(actor)
        self._dispatch()

    def _recover(self, actor: Any) -> None:
        """Take ``actor`` back once Ray has restarted it; drop it when it cannot be."""
        ray = self.cluster.ray

        def back(done: Future) -> None:
            failed = done.exception()
            with self._lock:
                if self._closed:
                    return
                if failed is None:
                    self._idle.append(actor)
                elif isinstance(failed, ray.exceptions.ActorDiedError):
                    if actor in self._actors:
                        self._actors.remove(actor)
                else:
                    # Restarting (its node gone, no room elsewhere yet): asked again later.
                    timer = threading.Timer(RECOVER_INTERVAL, self._recover, (actor,))
                    timer.daemon = True
                    timer.start()
                    return
            self._dispatch()

        try:
            actor.ping.remote().future().add_done_callback(back)
        except Exception:  # noqa: BLE001 - a handle Ray no longer knows
            with self._lock:
                if actor in self._actors:
                    self._actors.remove(actor)
            self._dispatch()

    # -- the rest of the interface ----------------------------------------------------------------
    @property
    def actors(self) -> tuple[Any, ...]:
        """The handles of the actors still in the pool."""
        with self._lock:
            return tuple(self._actors)

    @property
    def alive(self) -> bool:
        return bool(self._actors) and not self._closed

    def placement(self) -> Placement:
        """The nodes the workers started on, and the workers started (a node removed
        since, or an actor dead for good, still took candidates), and what was lost: a
        worker whose node the cluster no longer counts as alive lost it with its node."""
        with self._lock:
            losses = [dict(x) for x in self._losses]
        if losses:
            try:
                alive = {n["NodeID"] for n in self.cluster.ray.nodes() if n.get("Alive")}
            except Exception:  # noqa: BLE001 - what the loss was stays as the actor said
                alive = None
            for loss in losses:
                if alive is not None and loss["node"] not in alive:
                    loss["why"] = "its node left the cluster"
        return Placement("ray", self.nodes, len(self._made) or len(self._actors), tuple(losses))

    def _lost(self, node: str, why: str) -> None:
        """A worker died under a candidate: which node, when; the candidates it held
        are counted as they are queued again."""
        with self._lock:
            self._losses.append({"node": node, "seconds": round(time.perf_counter() - self._started, 1),
                                 "reran": 0, "why": why})

    def cancel(self, future: Future) -> None:
        with self._lock:
            queued = [t for t in self._pending if t.future is future]
            for task in queued:
                self._pending.remove(task)
            running = self._running.get(future)
        for task in queued:
            task.future.set_result(Observation.infrastructure("the run was cancelled"))
        if running is not None:
            running[0].cancel.remote()

    def close(self) -> None:
        ray = self.cluster.ray
        with self._lock:
            self._closed = True
            actors, self._actors, self._idle, self._made = list(self._made), [], [], []
            pending = list(self._pending)
            self._pending.clear()
        for task in pending:
            task.future.set_result(Observation.infrastructure("the run was cancelled"))
        goodbyes = []
        for actor in actors:
            try:
                actor.cancel.remote()
                goodbyes.append(actor.shutdown.remote())
            except Exception:  # noqa: BLE001 - an actor already gone
                pass
        if goodbyes:
            ray.wait(goodbyes, num_returns=len(goodbyes), timeout=SHUTDOWN_GRACE)
        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - an actor already gone
                pass
        self._snapshot = None
        self._stdin.clear()
        self._tmp.clear()


class RayCluster(Executors):
    """The executor factory for ``--executor ray``: one connection to the cluster for the
    whole reduction, a ``RayExecutor`` for each runner's candidates.  Runs that must be
    fresh (the original's, the checks of the result) stay on this machine.  ``close()``
    disconnects, and stops the cluster only when it started it (``--address local``)."""

    def __init__(self, options: RayOptions = RayOptions()):
        self.ray = import_ray()
        self.options = options
        self._owns = False
        self._connected = False

    def connect(self) -> None:
        if self._connected:
            return
        ray = self.ray
        if not ray.is_initialized():
            address = self.options.address or os.environ.get("RAY_ADDRESS") or "auto"
            try:
                if address == "local":
                    ray.init(include_dashboard=False, log_to_driver=False)
                else:
                    # never starts a cluster: "auto" finds one started on this machine
                    ray.init(address=address, log_to_driver=False)
            except ConnectionError as exc:
                where = "running on this machine" if address == "auto" else f"at {address}"
                raise RayUnavailable(
                    f"no Ray cluster {where}: start one (`ray start --head`), give its address "
                    "(--address HOST:PORT or RAY_ADDRESS), or --address local to start one for this "
                    f"reduction ({exc})") from exc
            self._owns = True
        self._connected = True

    @property
    def gpus(self) -> float:
        return float(self.ray.cluster_resources().get("GPU", 0))

    def workers(self) -> int:
        """How many actors: ``options.workers``, else what the cluster's GPUs (or, without
        GPUs, its CPUs) hold."""
        if self.options.workers is not None:
            return max(1, self.options.workers)
        resources = self.ray.cluster_resources()
        if resources.get("GPU", 0) > 0 and self.options.gpus_per_worker > 0:
            return max(1, int(resources["GPU"] / self.options.gpus_per_worker))
        return max(1, int(resources.get("CPU", 1) / max(self.options.cpus_per_worker, 0.01)))

    def capacity(self) -> Capacity:
        """The CPUs the workers ask for in all: what the candidates' thread pools are
        sized to (``reducer/pool.py``), not the driver's cores; and the workers."""
        workers = self.workers()
        return Capacity(cores=max(1, int(workers * self.options.cpus_per_worker)), workers=workers)

    def __call__(self, isolation: Isolation, settings: ExecutorSettings) -> Executor:
        if isolation is not Isolation.FORK or settings.launch.ranks:
            return default_executor(isolation, settings)
        self.connect()
        return RayExecutor(self, settings)

    def close(self) -> None:
        if self._owns and self.ray.is_initialized():
            self.ray.shutdown()
        self._owns = self._connected = False

    def __enter__(self) -> "RayCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
