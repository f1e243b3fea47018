"""What one run of a candidate showed, as a value: exit, output, and its first error."""

from __future__ import annotations

import dataclasses
import json
import re
import signal as _signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shrinkgpu.signature import ExceptionRecord, Frame, Signature, choose_first_error
from shrinkgpu.worker.protocol import FIRST_ERROR_SUFFIX, Finished, ProbeReport, RunStatus

OUTPUT_TAIL = 64 * 1024


@dataclass(frozen=True)
class Observation:
    exit_code: int | None
    signal: int | None
    timed_out: bool
    wall: float  # seconds from fork to exit, as the supervisor saw them
    status: RunStatus
    signature: Signature | None
    stdout: str = ""
    stderr: str = ""
    duration: float | None = None  # the script's own time, inside the probe
    # (name, file, path relative to the run's root when the module is the user's own)
    modules: tuple[tuple[str, str | None, str | None], ...] = field(default=(), repr=False)
    infra_error: str | None = None
    environment: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    parses: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)  # argparse results
    # configuration reads (json/yaml/toml) the user's code made: where and the value's literal
    loads: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)
    # (file, line, innermost) of the user's frames at each seeding call
    seed_sites: tuple[tuple[str, int, bool], ...] = field(default=(), compare=False, repr=False)
    # (file, line of a ``for`` header, iteration) around the failing frames: only from
    # runs that counted loops (``count_loops``)
    loops: tuple[tuple[str, int, int], ...] = field(default=(), compare=False, repr=False)
    # (file, line of a ``for`` header, call): which call of the function holding that loop
    # the failure came in (1: its first), from the same runs
    loop_calls: tuple[tuple[str, int, int], ...] = field(default=(), compare=False, repr=False)
    # (file, line of a ``for``/``while`` header, share of the run's time inside it): only
    # from runs that counted loops
    loop_time: tuple[tuple[str, int, float], ...] = field(default=(), compare=False, repr=False)
    # files under the run's root the script opened (relative): its data, never overwritten
    reads: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # where the user's code called a library that called back into a user object, with
    # that call's arguments saved (``probe.library_cut``): only from runs asked for it
    cut: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    # the user's data objects alive at the first error, pickled (``probe.saved_objects``):
    # only from runs asked for them
    saved_objects: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)
    # {operator: {argument: (shape, ...)}}: the shapes the operators that raised had across
    # the run's calls; only from runs asked for them (``Watch.op_shapes``)
    op_shapes: dict[str, dict[str, tuple[tuple[int, ...], ...]]] = field(default_factory=dict, compare=False,
                                                                         repr=False)
    # the torch calls that raised, their arguments saved as they raised: [{"op", "call",
    # "path"}]; only from runs asked for them (``Watch.keep_raised``)
    raised_calls: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)
    # what the call ``Watch.output_of`` names returned, summarised (``float32[4] all
    # finite``); only from runs asked for it
    output: str | None = field(default=None, compare=False, repr=False)
    # what ``Watch.state`` saved (``probe.state``): the entries, what was left out and
    # why, the RNGs, the file; None when the run never reached that iteration
    state: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    # what ``Watch.written`` copied: {"files": [relative paths], "files_bytes": n} or
    # {"files": [], "files_error": why}; None when not asked
    written: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    # [{"file", "function", "expression", "literal"}]: the size reads of the failing user
    # frames, evaluated at the first error; only from runs asked for them (``Watch.sizes``)
    sizes: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)
    # when the error left the script (time.time(), the probe's clock): which of a job's
    # ranks failed first (worker/ranks.py)
    failed_at: float | None = field(default=None, compare=False, repr=False)
    # a job of several ranks (torchrun): how many, and whose first error this is (None:
    # no rank failed)
    world_size: int = field(default=1, compare=False)
    rank: int | None = field(default=None, compare=False)
    # the processes the script started itself that were watched (probe/children.py):
    # [{"index", "launcher", "method"}]; and how the failing rank was started ("mp.spawn",
    # "start_processes", "multiprocessing.Process"; None: torchrun's, or no ranks)
    children: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)
    launcher: str | None = field(default=None, compare=False)
    # seconds the run's fresh interpreter took to import torch (None: it was loaded
    # already): the pace of the machine when it ran
    startup: float | None = field(default=None, compare=False, repr=False)
    # a run stopped by its time limit after its first error left the script (the probe
    # was still saving what its watch asked for): that error, from the record the probe
    # writes first (``FIRST_ERROR_SUFFIX``).  Never the run's ``signature``: a run that
    # did not end is no reproduction; the original's first run cut by --max-time still
    # says what it reached.
    raised_before_timeout: Signature | None = field(default=None, compare=False, repr=False)

    @property
    def failed(self) -> bool:
        """Whether the script failed (what ``shrinkgpu run`` exits 0 for)."""
        return self.signature is not None

    @classmethod
    def infrastructure(cls, message: str) -> "Observation":
        return cls(None, None, False, 0.0, RunStatus.INFRA, None, infra_error=message)

    @classmethod
    def from_run(
        cls,
        event: Finished,
        obs_path: Path,
        stdout: Path,
        stderr: Path,
        *,
        crash_log: Path | None = None,
        root: Path | None = None,
    ) -> "Observation":
        """The observation of a run the supervisor says is over (``event``), from the
        probe's report at ``obs_path`` and the captured output.  ``crash_log``:
        faulthandler's dump, read for the last user frame of a run that died by a
        signal; ``root``: the run's copy of the user's directory (which files are the
        user's, and their text)."""
        out = _tail(stdout)
        err = _tail(stderr)
        if event.error:
            return cls.infrastructure(event.error)
        if event.cancelled:
            # Killed by us (the server shut down): says nothing about the candidate.
            return cls.infrastructure("the run was cancelled")
        try:
            report = ProbeReport.from_json(json.loads(obs_path.read_text(encoding="utf-8")))
        except (FileNotFoundError, json.JSONDecodeError):
            report = None
        sig = event.signal
        signature = None
        before_timeout = None
        if event.timed_out:
            status = RunStatus.TIMEOUT
            early = _early_report(obs_path)
            if early is not None:
                before_timeout = _first_error(early, out + "\n" + err)
                report = report or dataclasses.replace(early, status=RunStatus.TIMEOUT)
        elif report is not None:
            status = report.status
            signature = _first_error(report, out + "\n" + err)
        elif sig:
            status = RunStatus.SIGNAL
            name = _signal.Signals(sig).name if sig in _signal.Signals._value2member_map_ else f"SIG{sig}"
            frame = _crash_frame(crash_log, root) if crash_log is not None and root is not None else None
            signature = Signature.for_signal(sig, name, out + "\n" + err, stderr=err, frame=frame)
        else:
            status = RunStatus.NO_REPORT  # left by os._exit or similar before the probe could write
        report = report or ProbeReport()
        return cls(
            exit_code=event.exit_code,
            signal=sig,
            timed_out=event.timed_out,
            wall=float(event.wall),
            status=status,
            signature=signature,
            stdout=out,
            stderr=err,
            duration=report.duration,
            failed_at=report.failed_at,
            modules=report.modules,
            environment=report.environment,
            parses=report.parses,
            loads=report.loads,
            seed_sites=report.seed_sites,
            loops=_loops(report),
            loop_calls=_loops(report, 3),
            loop_time=_loop_time(report.loop_time),
            reads=report.reads,
            cut=report.cut,
            saved_objects=report.saved_objects,
            op_shapes=_op_shapes(report.op_shapes),
            raised_calls=report.raised_calls,
            state=report.state,
            written=report.written,
            sizes=report.sizes,
            output=report.output,
            children=report.children,
            startup=report.startup,
            raised_before_timeout=before_timeout,
        )

    def describe(self) -> str:
        if self.infra_error:
            return f"could not run: {self.infra_error}"
        if self.timed_out:
            reached = self.raised_before_timeout
            return f"timed out after {self.wall:.1f}s" + (f", after its first error {reached.headline}"
                                                         if reached is not None else "")
        if self.signature is not None:
            return self.signature.headline + (f" (rank {self.rank} of {self.world_size})"
                                              if self.world_size > 1 and self.rank is not None else "")
        if self.status is RunStatus.NO_REPORT:
            return f"exited with status {self.exit_code} without reporting (os._exit?)"
        return f"finished without error (exit status {self.exit_code})"


def _early_report(obs_path: Path) -> ProbeReport | None:
    """The probe's record of the first error as it left the script, or None."""
    try:
        return ProbeReport.from_json(json.loads(Path(f"{obs_path}{FIRST_ERROR_SUFFIX}").read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _first_error(report: ProbeReport, output: str) -> Signature | None:
    chain = [ExceptionRecord.from_json(r) for r in report.chain]
    if not chain:
        return None
    torch_errors = [ExceptionRecord.from_json(r) for r in report.torch_errors]
    first = choose_first_error(chain, torch_errors)
    if first is None:
        return None
    in_chain = {r.ident for r in chain}
    caught = []
    for rec in torch_errors:
        if rec.ident == first.ident:
            break
        if rec.ident not in in_chain:
            op = f" in {rec.op.name}" if rec.op else ""
            caught.append(f"{rec.type}: {rec.message.strip().splitlines()[0] if rec.message.strip() else ''}{op}")
    hidden = report.suppressed
    # What ``raise ... from None`` hid belongs to the error at the chain's root.
    suppressed = ExceptionRecord.from_json(hidden) if hidden and first.ident == chain[-1].ident else None
    return Signature.from_record(first, output=output, caught_earlier=caught, suppressed=suppressed)


_FAULT_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)', re.M)


def _crash_frame(crash_log: Path, root: Path) -> Frame | None:
    """The innermost frame of the user's code in faulthandler's dump of a crashed run."""
    try:
        text = crash_log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    root = root.resolve()
    # "Current thread ... (most recent call first):": the first user file is the innermost.
    for m in _FAULT_FRAME.finditer(text):
        path = Path(m.group("file"))
        try:
            rel = path.resolve().relative_to(root)
        except (ValueError, OSError):
            continue
        line = int(m.group("line"))
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        source = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        return Frame(str(rel), line, m.group("function"), source)
    return None


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - OUTPUT_TAIL))
            return fh.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _loop_time(items) -> tuple[tuple[str, int, float], ...]:
    out = []
    for item in items:
        try:
            out.append((str(item[0]), int(item[1]), float(item[2])))
        except (TypeError, ValueError, IndexError):
            continue
    return tuple(out)


def _loops(report: ProbeReport, at: int = 2) -> tuple[tuple[str, int, int], ...]:
    """Loop iterations (``at`` 2; ``at`` 3: the call of the loop's function) seen on the
    failing stacks; a loop seen at several errors keeps the first record's (torch errors
    first: the first error is usually one)."""
    seen: dict[tuple[str, int], int] = {}
    for record in [*report.torch_errors, *reversed(report.chain)]:
        for item in (record or {}).get("loops", ()) or ():
            try:
                file, line, value = str(item[0]), int(item[1]), int(item[at])
            except (TypeError, ValueError, IndexError):
                continue
            seen.setdefault((file, line), value)
    return tuple((f, n, k) for (f, n), k in sorted(seen.items()))


def _op_shapes(shapes: dict[str, Any]) -> dict[str, dict[str, tuple[tuple[int, ...], ...]]]:
    out: dict[str, dict[str, tuple[tuple[int, ...], ...]]] = {}
    for op, arguments in shapes.items():
        try:
            out[str(op)] = {str(w): tuple(tuple(int(n) for n in shape) for shape in shapes)
                            for w, shapes in arguments.items()}
        except (TypeError, ValueError, AttributeError):
            continue
    return out
