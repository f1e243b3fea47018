"""What the user and the maintainer get: the reduced files, a report, progress lines."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from shrinkgpu.core import PassStarted, Tested
from shrinkgpu.core.rates import describe_rate
from shrinkgpu.families import Family, advice_for
from shrinkgpu.inputs import encode_source
from shrinkgpu.privacy import Redactor
from shrinkgpu.signature import Signature
from shrinkgpu.syntax.code import calls_named
from shrinkgpu.worker import ScriptSpec


class OutputError(Exception):
    pass


@dataclass(frozen=True)
class Stage:
    """A progress event of the reducer itself (the core emits the rest)."""

    message: str


def output_paths(result_files: dict[str, str], main: str, output: Path) -> tuple[Path, dict[Path, str]]:
    """Where each file goes: one file at ``output``, or a directory for several."""
    if len(result_files) == 1:
        return output, {output: result_files[main]}
    directory = output.with_suffix("") if output.suffix == ".py" else output
    return directory, {directory / rel: text for rel, text in result_files.items()}


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
            around = isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) or isinstance(body[i - 1], (cst.FunctionDef, cst.ClassDef))
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


@dataclass(frozen=True)
class Reducing:
    """The search starts on a program of this many tokens (an event)."""

    files: dict
    main: str
    tokens: int


@dataclass(frozen=True)
class BestSoFar:
    """The reducer accepted a smaller program (an event, after the core's ``Improved``)."""

    files: dict
    main: str
    tokens: int


def _with_mark(text: str, why: str) -> str:
    """``text`` with a first comment saying it is partial, kept after a shebang or coding
    declaration (which must stay on the first two lines)."""
    lines = text.splitlines(keepends=True)
    head = 0
    while head < min(2, len(lines)) and (lines[head].startswith("#!") or "coding" in lines[head][:80] and lines[head].lstrip().startswith("#")):
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

    def __init__(self, output: Path, interval: float = 0.5):
        self.output = output
        self.interval = interval
        self._pending: BestSoFar | None = None
        self._last = 0.0

    def __call__(self, event: object) -> None:
        if not isinstance(event, BestSoFar):
            return
        self._pending = event
        if time.monotonic() - self._last >= self.interval:
            self.flush()

    def flush(self) -> None:
        event, self._pending = self._pending, None
        if event is None:
            return
        files = {rel: tidy_layout(text) for rel, text in event.files.items()}
        files[event.main] = _with_mark(files[event.main], "the search was still going")
        target, paths = output_paths(files, event.main, self.output)
        try:
            _write_files(paths, target)
        except OSError:
            return  # the final write will say what is wrong with the path
        self._last = time.monotonic()


def read_partial(output: Path, main: str) -> dict[str, str] | None:
    """The program written at ``output`` by an earlier run (partial or not), or None."""
    directory = output.with_suffix("") if output.suffix == ".py" else output
    if output.is_file():
        return {main: _strip_mark(output.read_text(encoding="utf-8", errors="replace"))}
    if directory.is_dir():
        files = {
            str(p.relative_to(directory)): _strip_mark(p.read_text(encoding="utf-8", errors="replace"))
            for p in sorted(directory.rglob("*.py"))
        }
        return files if main in files else None
    return None


def write_outputs(result, output: Path, spec: ScriptSpec) -> None:
    """Write the reduced program and the report, atomically; never over one of the user's
    sources.  A result that was not verified in fresh interpreters (interrupted, out of
    time) says so on its first line."""
    result.files = {rel: tidy_layout(text) for rel, text in result.files.items()}
    files = dict(result.files)
    if result.verified[1] == 0:
        files[result.main] = _with_mark(files[result.main], f"stopped: {result.stopped or 'not verified'}")
    target, paths = output_paths(files, result.main, output)
    protected = {spec.script.resolve()} | {(spec.root_dir / rel).resolve() for rel in result.files}
    for path in paths:
        if path.resolve() in protected:
            raise OutputError(f"refusing to overwrite the user's file {path}")
    if len(paths) == 1 and target.is_dir():
        raise OutputError(f"{target} is a directory; give -o a file name")
    if len(paths) == 1:
        # A directory an earlier partial run left for a multi-file program goes.
        stale = output.with_suffix("") if output.suffix == ".py" else None
        if stale is not None and stale.is_dir() and (stale / result.main).is_file():
            shutil.rmtree(stale, ignore_errors=True)
    _write_files(paths, target)
    result.output = target
    # Data the result loads beside itself (a library call's saved arguments).
    beside = target if target.suffix != ".py" else target.parent
    for name, source in getattr(result, "data_files", {}).items():
        shutil.copy2(source, beside / name)
    report = target.with_suffix(".md") if target.suffix == ".py" else target.with_name(target.name + ".md")
    if report.resolve() in protected:
        raise OutputError(f"refusing to overwrite the user's file {report}")
    _atomic_write(report, render_report(result, spec, target).encode("utf-8"))
    result.report = report
    if getattr(result, "case", None):
        _atomic_write(case_path(target), json.dumps(_case(result, target), indent=2).encode("utf-8"))


def case_path(target: Path) -> Path:
    """The case file beside a result: what ``shrinkgpu verify`` and ``--emit-test`` read."""
    base = target.with_suffix("") if target.suffix == ".py" else target
    return base.with_name(base.name + ".json")


def _case(result, target: Path) -> dict:
    here = target.parent

    def rel(path: str) -> str:
        return os.path.relpath(path, here)

    case = dict(result.case)
    original = {
        "script": rel(case.pop("script")), "args": case.pop("args"), "cwd": rel(case.pop("cwd")),
        "root": rel(case.pop("root")), "module": case.pop("module"), "argv0": case.pop("argv0"),
    }
    extracted = getattr(result, "extracted", None)
    return {
        "shrinkgpu": _version(),
        "case": target.name,
        "main": result.main,
        "module": original["module"],
        "args": original["args"],
        "original": original,
        "signature": result.signature.to_json(),
        "final_signature": result.final_signature.to_json() if result.final_signature else None,
        "extracted": rel(str(extracted.path)) if extracted is not None else None,
        "launch_env": dict(getattr(result, "launch_env", {})),
        **case,
    }


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("shrinkgpu")
    except metadata.PackageNotFoundError:
        return "unknown"


def _git_revision(directory: Path) -> str:
    try:
        rev = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=5,
        )
        if rev.returncode != 0:
            return "not in a git checkout"
        dirty = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5,
        )
        return rev.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


_RUN_DIR = re.compile(r"(?:/[^\s'\"`]*?)?/shrinkgpu-[\w-]+/run-\d+/root/?")
_NTH = {1: "st", 2: "nd", 3: "rd"}


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else _NTH.get(n % 10, 'th')}"


def render_report(result, spec: ScriptSpec, target: Path) -> str:
    """The maintainer's report, shaped like PyTorch's bug template (describe the bug with
    a minimal example, versions) so that it pastes as is, then how it was reduced.  The
    error and the operator's table are the result's own (the script beside the report),
    with the original's where they differ.  Nothing private: see ``privacy.Redactor``."""
    original = result.signature
    shown = result.final_signature or original
    env = result.environment or {}
    out = [
        f"# shrinkgpu: reduction of `{spec.script.name}`",
        "",
        "Paste from *Describe the bug* to the end of *Versions* into a bug report "
        "(https://github.com/pytorch/pytorch/issues/new/choose, or your project's).",
        "",
        "### 🐛 Describe the bug",
        "",
    ]
    op_name = f"`{shown.op.name}`" if shown.op else "The script"
    out.append(f"{op_name} fails with `{shown.headline}` ({shown.family.value}).")
    out.append("")
    files = sorted(result.files.items(), key=lambda kv: kv[0] != result.main)
    out.append(
        f"Minimal example, `{target.name}`: the original script reduced by deleting and inlining code, so it "
        "still shows where the bad values come from:"
    )
    out.append("")
    for rel, text in files:
        if len(files) > 1:
            out.append(f"`{rel}`:")
        out += ["```python", text.rstrip("\n"), "```", ""]
    extracted = getattr(result, "extracted", None)
    if extracted is not None:
        out += [
            f"The failing call alone, `{extracted.path.name}` (rebuilt from what was captured at the call: it "
            "shows the operator's contract" + (f"; data in `{extracted.data.name}`" if extracted.data else "") + "):",
            "",
            "```python", extracted.text.rstrip("\n"), "```", "",
        ]
    out += ["The error:", "", "```", _verbatim(shown), "```", ""]
    if shown is not original and shown.normalized == original.normalized and shown.message != original.message:
        out += [f"(In the original script: `{original.headline}`.)", ""]
    surfaced = getattr(result, "surfaced", None)
    if surfaced is not None:
        where = f"`{surfaced.op.name}`" if surfaced.op else "a call that is not torch's"
        at = f" (`{surfaced.frame.file}:{surfaced.frame.line}`: `{surfaced.frame.source}`)" if surfaced.frame else ""
        out += [
            f"Asynchronous: as the script runs, Python sees the error at {where}{at}; with synchronous launches "
            f"(`{' '.join(f'{k}={v}' for k, v in sorted(result.launch_env.items()))}`) it is raised by "
            f"{op_name}, whose kernel failed.",
            "",
        ]
    out += _operator_table(result, shown, original) + [""]
    advice = advice_for(shown.family)
    out += [f"First check: {advice.first_check}. Do not conclude {advice.avoid}.", ""]
    check = suggest_check(shown)
    if check is not None:
        out += ["A check that rejects such values where they enter, with the call filled in:", "",
                "```python", check, "```", ""]
    out += ["### Versions", "", "```", (getattr(result, "collect_env", None) or _short_versions(env)).rstrip(), "```", ""]
    launch = "".join(f"{k}={shlex.quote(str(v))} " for k, v in sorted(getattr(result, "launch_env", {}).items()))
    out += ["### How it was reduced (shrinkgpu)", "", "```sh", f"{launch}{reproduce_command(spec, target, result.main)}",
            "```", ""]
    needs = getattr(result, "needs", ())
    if needs:
        out.append("- needs beside it: " + ", ".join(f"`{n}`" for n in needs))
    for file, name, cls, size in getattr(result, "loaded_objects", ()):
        out.append(
            f"- `{file}`: `{name}` (a `{cls}`, {size / 2**20:.1f} MiB) as the original held it at its first error; "
            "the result loads it instead of building it, so its constructor is not shown (`--no-load-objects` "
            "keeps every constructor)"
        )
    in_place = getattr(result, "in_place", None)
    verified = f"- verified in fresh interpreters: {result.verified[0]} of {result.verified[1]} runs"
    if in_place is not None:
        verified += f"; where it is written: {in_place}"
    out += [
        f"- tokens: {result.tokens_before} -> {result.tokens_after}"
        + (f" ({100 * result.tokens_after / result.tokens_before:.1f}%)" if result.tokens_before else ""),
        f"- candidates tested: {result.candidates_tested} (runs: {result.oracle.runs}, cache hits: "
        f"{result.oracle.cache_hits}, rejected without running: {result.oracle.invalid})",
        "- verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(result.oracle.by_verdict.items())),
        f"- time: {result.seconds:.1f}s; isolation: {result.isolation.value}"
        + (f" ({result.preload_modules} modules preloaded)" if result.preload_modules else "")
        + f"; timeout per candidate {result.timeout:.1f}s",
        verified,
        f"- backend: CUDA {env.get('cuda') or 'none'}, HIP {env.get('hip') or 'none'}"
        + (f", devices: {', '.join(env['devices'])}" if env.get("devices") else ""),
        f"- code revision: {_git_revision(spec.script.parent)}",
    ]
    rate = getattr(result, "original_rate", (1, 1))
    if rate[0] < rate[1]:
        out.append(
            f"- flaky: the original reproduced in {describe_rate(*rate)} in fresh interpreters, the result in "
            f"{describe_rate(*result.verified)}; each candidate was judged by a sequential test of its rate"
        )
    if result.stopped:
        out.append(f"- stopped early: {result.stopped} (the result is the best found so far)")
    for note in original.caught_earlier:
        out.append(f"- the original caught an earlier torch error before this one: `{note}`")
    notes = list(result.notes)
    text = "\n".join(out)
    redactor = Redactor(project=spec.root_dir, env=spec.env if spec.env is not None else os.environ)
    text = redactor(_RUN_DIR.sub("./", text))
    notes_text = [redactor(_RUN_DIR.sub("./", n)) for n in notes]
    if redactor.note():
        notes_text.append(redactor.note())
    if notes_text:
        text += "\n\n### Notes\n\n" + "\n".join(f"- {n}" for n in notes_text)
    return text + "\n"


def _verbatim(sig: Signature) -> str:
    lines = [f"{sig.type}: {sig.message.rstrip()}" if sig.message.strip() else sig.type]
    if sig.kernel_assertion:
        lines.append(sig.kernel_assertion)
    return "\n".join(lines)


def _short_versions(env: dict) -> str:
    return (f"Python {env.get('python', sys.version.split()[0])}, torch {env.get('torch', 'unknown')}, "
            f"CUDA {env.get('cuda') or 'none'}, HIP {env.get('hip') or 'none'}; {env.get('platform', '')}\n"
            "(torch.utils.collect_env was not available)")


def _operator_table(result, shown: Signature, original: Signature) -> list[str]:
    lines = ["| | |", "|---|---|"]
    if shown.op is None:
        lines.append("| operator | none: the error was not raised by a torch call |")
    else:
        which = f"the {_ordinal(shown.call)} call of it in the run" if shown.call else "-"
        loops = getattr(result, "loops", ())
        if loops:
            which += "; " + ", ".join(f"iteration {k} of the loop at `{f}:{n}`" for f, n, k in loops) + " (original)"
        lines += [f"| operator | `{shown.op.name}` |", f"| which call | {which} |"]
        for t in shown.op.tensors:
            lines.append(f"| `{t.path}` | {t.describe().split(': ', 1)[1]} |")
        kept = ", ".join(f"`{a}`" for a in shown.op.arguments) or "all defaults"
        lines.append(f"| arguments that differ from the defaults | {kept} |")
        if original.op is not None and original.op.arguments != shown.op.arguments:
            was = ", ".join(f"`{a}`" for a in original.op.arguments) or "all defaults"
            lines.append(f"| the same, in the original | {was} |")
        if original.op is not None and original.op.tensors != shown.op.tensors:
            lines.append("| tensors in the original | " + "; ".join(t.describe() for t in original.op.tensors) + " |")
    if shown.kernel_assertion:
        lines.append(f"| kernel assertion | `{shown.kernel_assertion}` |")
    if shown.frame is not None:
        lines.append(f"| where | `{shown.frame.file}:{shown.frame.line}` in `{shown.frame.function}`: `{shown.frame.source}` |")
    return lines


_CLASS_LOSSES = ("cross_entropy", "nll_loss")


def suggest_check(sig: Signature) -> str | None:
    """For an index error (on any device), the matching ``shrinkgpu.checks`` call with the
    failing call's own arguments filled in, when the failing line is that call."""
    if sig.op is None or sig.family not in (Family.INDEX, Family.DEVICE_ASSERT):
        return None
    name = sig.op.name.rsplit(".", 1)[-1]
    call = _call_in(sig.frame.source if sig.frame else "", name)
    args = dict(a.split("=", 1) for a in sig.op.arguments if "=" in a)
    shapes = {t.path: t.shape for t in sig.op.tensors}

    def arg(position: int, keyword: str, placeholder: str) -> str:
        if call is not None:
            if len(call.args) > position and not isinstance(call.args[position], ast.Starred):
                return ast.unparse(call.args[position])
            for kw in call.keywords:
                if kw.arg == keyword:
                    return ast.unparse(kw.value)
        return placeholder

    where = f"  # before {sig.frame.source}" if sig.frame and call is not None else ""
    if name in _CLASS_LOSSES:
        logits = shapes.get("args[0]") or shapes.get("kwargs['input']")
        if not logits:
            return None
        classes = logits[1] if len(logits) > 1 else logits[0]
        ignore = args.get("ignore_index")
        extra = f", ignore_index={ignore}" if ignore is not None else ""
        target = arg(1, "target", "target")
        return f"from shrinkgpu.checks import validate_class_targets\nvalidate_class_targets({target}, {classes}{extra}){where}"
    if name == "embedding":
        weight = shapes.get("args[1]") or shapes.get("kwargs['weight']")
        if not weight:
            return None
        padding = args.get("padding_idx")
        extra = f", padding_idx={padding}" if padding not in (None, "None") else ""
        return (f"from shrinkgpu.checks import validate_embedding_indices\n"
                f"validate_embedding_indices({arg(0, 'input', 'indices')}, {weight[0]}{extra}){where}")
    if name in ("gather", "index_select", "scatter", "scatter_add", "index_add", "index_add_", "scatter_", "index_copy"):
        dim = args.get("dim") or args.get("args[1]") or "dim"
        return (f"from shrinkgpu.checks import validate_index\n"
                f"validate_index({arg(0, 'input', 'input')}, {dim}, {arg(2, 'index', 'index')}){where}")
    return None


def _call_in(source: str, name: str) -> ast.Call | None:
    """The call of ``name`` (``F.cross_entropy``, ``torch.gather``) in a line of source."""
    calls = calls_named(source, name)
    return calls[0] if calls else None


class CollectEnv:
    """``torch.utils.collect_env`` in a fresh process of the user's Python, started at the
    beginning of a reduction and read at its end, for the report's *Versions*."""

    def __init__(self, python: str, env: dict | None):
        env = {k: v for k, v in (env if env is not None else os.environ).items()
               if k not in ("CUDA_LAUNCH_BLOCKING", "AMD_SERIALIZE_KERNEL")}
        try:
            self.proc: subprocess.Popen | None = subprocess.Popen(
                [python, "-c", "from torch.utils.collect_env import main; main()"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, env=env,
            )
        except OSError:
            self.proc = None

    def result(self, timeout: float = 120.0) -> str | None:
        if self.proc is None:
            return None
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            return None
        text = out.replace("Collecting environment information...\n", "").strip()
        return text or None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def reproduce_command(spec: ScriptSpec, target: Path, main: str) -> str:
    """The shell command that runs the result, quoted for names with spaces."""
    args = "".join(" " + shlex.quote(a) for a in spec.args)
    if target.suffix != ".py":  # a directory of several files
        if spec.module is not None and main.endswith(".py"):
            module = main[: -len(".py")].replace("/", ".").removesuffix(".__main__")
            return f"cd {shlex.quote(target.name)} && python -m {module}{args}"
        return f"cd {shlex.quote(target.name)} && python {shlex.quote(main)}{args}"
    return f"python {shlex.quote(target.name)}{args}"


class ProgressPrinter:
    """Plain progress lines on a stream (when it is not a terminal): the stages,
    a status line every few seconds, and with ``verbose`` every accepted edit.  Sizes
    are tokens of the program, counted as people count them."""

    def __init__(self, stream: TextIO = sys.stderr, heartbeat: float = 5.0, verbose: bool = False):
        self.stream = stream
        self.heartbeat = heartbeat
        self.verbose = verbose
        self.started = time.monotonic()
        self._last = time.monotonic()
        self.pass_name = ""
        self.tested = 0
        self.accepted = 0
        self.tokens: int | None = None
        self.lines: int | None = None
        self.tokens_start: int | None = None

    def __call__(self, event: object) -> None:
        if isinstance(event, Stage):
            self.stage(event.message)
        elif isinstance(event, PassStarted):
            self.pass_name = event.name
        elif isinstance(event, Tested):
            self.tested = event.tests
            self.accepted += event.verdict.interesting
            self.tick()
        elif isinstance(event, BestSoFar):
            before = self.tokens
            self.tokens = event.tokens
            self.lines = sum(text.count("\n") for text in event.files.values())
            if self.tokens_start is None:
                self.tokens_start = before if before is not None else event.tokens
            if self.verbose and before is not None:
                self._print(f"{self.pass_name}: {before} -> {event.tokens} tokens ({self.tested} candidates)")
            self.tick()
        elif isinstance(event, Reducing):
            self.tokens = self.tokens_start = event.tokens
            self.lines = sum(text.count("\n") for text in event.files.values())

    def status(self) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.tested / elapsed if elapsed > 0 else 0.0
        size = "-" if self.tokens is None else f"{self.tokens} tokens, {self.lines or '?'} lines"
        return (f"{self.pass_name or 'starting'} | {size} | {self.tested} candidates, {self.accepted} accepted | "
                f"{rate:.1f}/s | {_clock(elapsed)}")

    def stage(self, message: str) -> None:
        self._print(message)

    def tick(self) -> None:
        if time.monotonic() - self._last >= self.heartbeat:
            self._print(self.status())

    def close(self) -> None:
        pass

    def _print(self, message: str) -> None:
        self._last = time.monotonic()
        print(f"shrinkgpu: {message}", file=self.stream, flush=True)


class LiveProgress(ProgressPrinter):
    """On a terminal: the stages as lines, under them one live status line (rich) with
    the pass, the size in tokens and lines, candidates run and accepted, the rate and the
    time elapsed."""

    def __init__(self, verbose: bool = False):
        from rich.console import Console
        from rich.live import Live

        super().__init__(heartbeat=0.25, verbose=verbose)
        self.console = Console(stderr=True, highlight=False)
        self.live = Live(console=self.console, refresh_per_second=4, transient=True)
        self.live.start()

    def stage(self, message: str) -> None:
        self.console.print(f"shrinkgpu: {message}", markup=False)

    def tick(self) -> None:
        if time.monotonic() - self._last >= self.heartbeat:
            self._last = time.monotonic()
            from rich.text import Text

            self.live.update(Text("shrinkgpu ▸ " + self.status(), style="bold"))

    def _print(self, message: str) -> None:
        self.console.print(f"shrinkgpu: {message}", markup=False)

    def close(self) -> None:
        self.live.stop()


def _clock(seconds: float) -> str:
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{sec:02d}"

