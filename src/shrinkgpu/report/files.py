"""The files a reduction writes: the result (atomically; a directory swapped in whole),
the best program so far while the search runs (marked partial), the report and the
case file, all where ``layout.OutputLayout`` puts them."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Mapping

from shrinkgpu.inputs import encode_source
from shrinkgpu.layout import OutputLayout
from shrinkgpu.report.document import render_report, reproduce_command
from shrinkgpu.report.versions import package_version
from shrinkgpu.results import ReductionResult
from shrinkgpu.worker import ScriptSpec


class OutputError(Exception):
    pass


def tidy_layout(text: str) -> str:
    """Blank lines only, as a person would lay the result out: none at the top, two
    around top-level functions and classes.  Tokens are untouched, so this is the
    program that was verified."""
    import libcst as cst

    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return text
    blank = cst.EmptyLine(indent=False, whitespace=cst.SimpleWhitespace(""), comment=None, newline=cst.Newline())
    body = list(module.body)
    for i, stmt in enumerate(body):
        lines = list(stmt.leading_lines)
        if i == 0:
            while lines and lines[0].comment is None:
                lines.pop(0)
        else:
            around = (isinstance(stmt, (cst.FunctionDef, cst.ClassDef))
                      or isinstance(body[i - 1], (cst.FunctionDef, cst.ClassDef)))
            leading_blank = 0
            while leading_blank < len(lines) and lines[leading_blank].comment is None:
                leading_blank += 1
            if around and leading_blank < 2:
                lines = [blank] * (2 - leading_blank) + lines
        body[i] = stmt.with_changes(leading_lines=lines)
    header = [line for line in module.header if line.comment is not None] if not body else list(module.header)
    while header and header[0].comment is None:
        header.pop(0)
    return module.with_changes(body=body, header=header).code


PARTIAL_MARK = "# shrinkgpu: partial result"


def _with_mark(text: str, why: str) -> str:
    """``text`` with a first comment saying it is partial, kept after a shebang or coding
    declaration (which must stay on the first two lines)."""
    lines = text.splitlines(keepends=True)
    head = 0
    while (head < min(2, len(lines))

           and (lines[head].startswith("#!") or "coding" in lines[head][:80] and lines[head].lstrip().startswith("#"))):
        head += 1
    mark = f"{PARTIAL_MARK} ({why}): not verified in fresh interpreters; `shrinkgpu reduce ... --resume` continues.\n"
    return "".join(lines[:head]) + mark + "".join(lines[head:])


def _strip_mark(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(PARTIAL_MARK))


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.shrinkgpu-tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _write_files(files: dict[Path, str], target: Path) -> None:
    """One file atomically, or a directory swapped in whole."""
    if len(files) == 1 and target in files:
        _atomic_write(target, encode_source(files[target]))
        return
    staging = target.with_name(f".{target.name}.shrinkgpu-tmp")
    shutil.rmtree(staging, ignore_errors=True)
    for path, text in files.items():
        dest = staging / path.relative_to(target)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(encode_source(text))
    old = target.with_name(f".{target.name}.shrinkgpu-old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


class PartialWriter:
    """Keeps the best program found so far at the output path, marked partial, so that an
    interrupt, a SIGTERM or a crash at any moment leaves it (``--resume`` starts from
    it).  At most one write per ``interval`` seconds; ``flush`` writes the last one."""

    def __init__(self, layout: OutputLayout, interval: float = 0.5):
        self.layout = layout
        self.interval = interval
        self._pending: tuple[dict[str, str], str] | None = None
        # Not 0.0: the monotonic clock counts from boot, and a machine up for less than
        # ``interval`` would hold back the first program.
        self._last = float("-inf")

    def offer(self, files: Mapping[str, str], main: str) -> None:
        """The newest best program (its files, and which is the main script)."""
        self._pending = (dict(files), main)
        if time.monotonic() - self._last >= self.interval:
            self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        files, main = pending
        files = {rel: tidy_layout(text) for rel, text in files.items()}
        files[main] = _with_mark(files[main], "the search was still going")
        target, paths = self.layout.placed(files, main)
        try:
            _write_files(paths, target)
        except OSError:
            return  # the final write will say what is wrong with the path
        self._last = time.monotonic()


def read_partial(layout: OutputLayout, main: str) -> dict[str, str] | None:
    """The program an earlier run wrote at ``layout`` (partial or not), or None."""
    output, directory = layout.output, layout.directory
    if output.is_file():
        return {main: _strip_mark(output.read_text(encoding="utf-8", errors="replace"))}
    if directory.is_dir():
        files = {
            str(p.relative_to(directory)): _strip_mark(p.read_text(encoding="utf-8", errors="replace"))
            for p in sorted(directory.rglob("*.py"))
        }
        return files if main in files else None
    return None


def write_outputs(result: ReductionResult, layout: OutputLayout, spec: ScriptSpec) -> None:
    """Write the reduced program and the report, atomically; never over one of the user's
    sources.  A result that was not verified in fresh interpreters (interrupted, out of
    time) says so on its first line."""
    result.files = {rel: tidy_layout(text) for rel, text in result.files.items()}
    files = dict(result.files)
    if result.verified[1] == 0:
        files[result.main] = _with_mark(files[result.main], f"stopped: {result.stopped or 'not verified'}")
    target, paths = layout.placed(files, result.main)
    protected = {spec.script.resolve()} | {(spec.root_dir / rel).resolve() for rel in result.files}
    for path in paths:
        if path.resolve() in protected:
            raise OutputError(f"refusing to overwrite the user's file {path}")
    if len(paths) == 1 and target.is_dir():
        raise OutputError(f"{target} is a directory; give -o a file name")
    if len(paths) == 1:
        # A directory an earlier partial run left for a multi-file program goes.
        stale = layout.directory if layout.directory != layout.output else None
        if stale is not None and stale.is_dir() and (stale / result.main).is_file():
            shutil.rmtree(stale, ignore_errors=True)
    _write_files(paths, target)
    if len(paths) > 1 and layout.output != target and layout.output.is_file():
        # The partial the search kept at the path asked for, while the best program was
        # one file: the result is the directory now, and nothing stale stays beside it.
        layout.output.unlink()
    result.output = target
    result.command = reproduce_command(spec, target, result.main, result.run_from, result.launch, result.launch_env)
    # Data the result loads beside itself (a library call's saved arguments).
    beside = target if target == layout.directory and len(paths) > 1 else target.parent
    for name, source in result.data_files.items():
        if Path(source).is_dir():  # the files a run wrote before the state it replays from
            shutil.copytree(source, beside / name, dirs_exist_ok=True)
        else:
            shutil.copy2(source, beside / name)
    # The result written back as source, when that is the artifact that runs alone; a
    # stale one of an earlier reduction to the same output goes.
    alone = layout.alone
    if alone.resolve() in protected:
        raise OutputError(f"refusing to overwrite the user's file {alone}")
    if result.written_back is not None:
        _atomic_write(alone, encode_source(tidy_layout(result.written_back)))
    elif alone.is_file():
        alone.unlink()
    report = layout.report
    if report.resolve() in protected:
        raise OutputError(f"refusing to overwrite the user's file {report}")
    _atomic_write(report, render_report(result, spec, target).encode("utf-8"))
    result.report = report
    if result.case:
        _atomic_write(layout.case, json.dumps(_case(result, target), indent=2).encode("utf-8"))


# Data a result reads is copied beside it up to this much in all; beyond, the printed
# command runs it from the directory that holds the data instead.
BESIDE_MAX_BYTES = 64 * 2**20


def place_needed_files(result: ReductionResult, spec: ScriptSpec, limit: int = BESIDE_MAX_BYTES) -> None:
    """Make the files the result read in its verified runs available where it is written,
    so that the command its report prints runs as printed: each copied beside it (at its
    place relative to the working directory the script ran in) when they are small,
    never over a file that is there already; else the command runs the result from the
    user's working directory, which holds them (``result.run_from``)."""
    written = result.output
    here = written if written.is_dir() else written.parent
    cwd = spec.cwd.resolve()
    wanted: list[tuple[Path, Path]] = []
    for rel in result.needs:
        source = spec.root_dir / rel
        try:
            inside = source.resolve().relative_to(cwd)
        except ValueError:
            continue  # outside the working directory: no place beside the result means the same
        if source.is_file():
            wanted.append((source, here / inside))
    if not wanted:
        return
    if sum(source.stat().st_size for source, _ in wanted) > limit:
        result.run_from = spec.cwd
        return
    copied = []
    for source, dest in wanted:
        if dest.exists():
            continue  # a file of the user's by that name stays as it is
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)
        copied.append(str(dest.relative_to(here)))
    result.beside = tuple(copied)


def _case(result: ReductionResult, target: Path) -> dict:
    here = target.parent

    def rel(path: str) -> str:
        return os.path.relpath(path, here)

    case = dict(result.case)
    original = {
        "script": rel(case.pop("script")), "args": case.pop("args"), "cwd": rel(case.pop("cwd")),
        "root": rel(case.pop("root")), "module": case.pop("module"), "argv0": case.pop("argv0"),
        # the ranks the user started it with (torchrun), None for one process
        "nproc_per_node": case.pop("nproc_per_node", None),
        # how long its first run took: what a later --resume knows before running anything
        # (a --max-time shorter than that is refused up front)
        "seconds": case.pop("seconds", None),
    }
    extracted = result.extracted
    return {
        "shrinkgpu": package_version(),
        "case": target.name,
        "main": result.main,
        "module": original["module"],
        "args": original["args"],
        "original": original,
        "signature": result.signature.to_json(),
        "final_signature": result.final_signature.to_json() if result.final_signature else None,
        "extracted": rel(str(extracted.path)) if extracted is not None else None,
        # what ``shrinkgpu ablate`` changes of the extracted call, and what the last
        # comparisons showed (the regression test's valid neighbour comes from them)
        "extracted_call": {"op": extracted.op, "arguments": [list(a) for a in extracted.arguments]}
        if extracted is not None and extracted.op else None,
        "ablation": result.ablation.to_json() if result.ablation is not None else None,
        "launch_env": dict(result.launch_env),
        # how often the original failed, and the (argument, dimension) pairs it varied at
        # the operator: what ``shrinkgpu versions`` judges another environment's runs by
        "original_rate": list(result.original_rate),
        "varying": [list(v) for v in result.varying],
        # the ranks the minimal case runs as (torchrun), None for one plain python
        "nproc_per_node": result.launch.nproc if result.launch.ranks else None,
        **case,
    }
