"""What the user and the maintainer get: the reduced files, a report, progress lines."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from shrinkgpu.core import Improved, PassStarted, Tested
from shrinkgpu.core.rates import describe_rate
from shrinkgpu.families import advice_for
from shrinkgpu.signature import Signature
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


def write_outputs(result, output: Path, spec: ScriptSpec) -> None:
    """Write the reduced program and the report; never over one of the user's sources."""
    result.files = {rel: tidy_layout(text) for rel, text in result.files.items()}
    target, files = output_paths(result.files, result.main, output)
    protected = {spec.script.resolve()} | {(spec.root_dir / rel).resolve() for rel in result.files}
    for path in files:
        if path.resolve() in protected:
            raise OutputError(f"refusing to overwrite the user's file {path}")
    if len(files) == 1 and target.is_dir():
        raise OutputError(f"{target} is a directory; give -o a file name")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    result.output = target
    report = target.with_suffix(".md") if target.suffix == ".py" else target.with_name(target.name + ".md")
    if report.resolve() in protected:
        raise OutputError(f"refusing to overwrite the user's file {report}")
    report.write_text(render_report(result, spec, target), encoding="utf-8")
    result.report = report


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


def _signature_table(sig: Signature, final: Signature | None = None) -> list[str]:
    advice = advice_for(sig.family)
    lines = [
        "| | |", "|---|---|", f"| error | `{sig.headline}` |", f"| family | {sig.family.value} |",
        f"| first check | {advice.first_check} |", f"| do not conclude | {advice.avoid} |",
    ]
    if sig.op is not None:
        lines.append(f"| operator | `{sig.op.name}` |")
        for t in sig.op.tensors:
            lines.append(f"| `{t.path}` | {t.describe().split(': ', 1)[1]} |")
        for other in sig.op.others:
            path, _, value = other.partition(" = ")
            lines.append(f"| `{path}` | `{value}` |")
        kept = ", ".join(f"`{a}`" for a in sig.op.arguments) or "all defaults"
        lines.append(f"| arguments that differ from the defaults (original) | {kept} |")
        if final is not None and final.op is not None:
            now = ", ".join(f"`{a}`" for a in final.op.arguments) or "all defaults"
            lines.append(f"| the same, in the reduced script | {now} |")
    else:
        lines.append("| operator | none: the error was not raised by a torch call |")
    if sig.kernel_assertion:
        lines.append(f"| kernel assertion | `{sig.kernel_assertion}` |")
    return lines


def render_report(result, spec: ScriptSpec, target: Path) -> str:
    sig = result.signature
    env = result.environment or {}
    script_name = spec.script.name
    main_name = target.name if target.suffix == ".py" else f"{target.name}/{result.main}"
    args = " ".join(spec.args)
    out = [f"# shrinkgpu: reduction of `{script_name}`", ""]
    out += ["## First error", ""] + _signature_table(sig, result.final_signature) + [""]
    surfaced = getattr(result, "surfaced", None)
    if surfaced is not None:
        where = f"`{surfaced.op.name}`" if surfaced.op else "a call that is not torch's"
        at = f" (`{surfaced.frame.file}:{surfaced.frame.line}`: `{surfaced.frame.source}`)" if surfaced.frame else ""
        kernel = f"`{sig.op.name}`" if sig.op else "the failing kernel"
        out.append(
            f"Asynchronous: where Python saw it, without synchronous launches: {where}{at}. Where the kernel "
            f"failed (synchronous launches): {kernel}, as in the table."
        )
        out.append("")
    if sig.frame is not None:
        out.append(f"In the original: `{sig.frame.file}:{sig.frame.line}` in `{sig.frame.function}`: `{sig.frame.source}`")
    final = result.final_signature
    if final is not None and final.frame is not None:
        # Line numbers from the verified run; the layout was tidied since, so find it.
        text = result.files.get(final.frame.file) or result.files.get(result.main, "")
        lines = [i + 1 for i, line in enumerate(text.splitlines()) if line.strip() == final.frame.source]
        where = f"line {lines[0]}" if lines else f"line {final.frame.line}"
        out.append(f"In the reduced script: {where}: `{final.frame.source}`")
    for note in sig.caught_earlier:
        out.append(f"\nNote: the script caught an earlier torch error before this one: `{note}`")
    launch = "".join(f"{k}={v} " for k, v in sorted(getattr(result, "launch_env", {}).items()))
    out += ["", "## Reproduce", "", "```sh", f"{launch}python {main_name}{' ' + args if args else ''}", "```", ""]
    for rel, text in sorted(result.files.items(), key=lambda kv: kv[0] != result.main):
        out += [f"`{rel}`:" if len(result.files) > 1 else "", "```python", text.rstrip("\n"), "```", ""]
    out += [
        "## Environment",
        "",
        f"- Python {env.get('python', sys.version.split()[0])}, torch {env.get('torch', 'unknown')}",
        f"- backend: CUDA {env.get('cuda') or 'none'}, HIP {env.get('hip') or 'none'}"
        + (f", devices: {', '.join(env['devices'])}" if env.get("devices") else ""),
        f"- platform: {env.get('platform', 'unknown')}",
        f"- code revision: {_git_revision(spec.script.parent)}",
        "",
        "## Reduction",
        "",
        f"- tokens: {result.tokens_before} -> {result.tokens_after}"
        + (f" ({100 * result.tokens_after / result.tokens_before:.1f}%)" if result.tokens_before else ""),
        f"- candidates tested: {result.candidates_tested} (runs: {result.oracle.runs}, cache hits: "
        f"{result.oracle.cache_hits}, rejected without running: {result.oracle.invalid})",
        f"- verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(result.oracle.by_verdict.items())),
        f"- time: {result.seconds:.1f}s; isolation: {result.isolation.value}"
        + (f" ({result.preload_modules} modules preloaded)" if result.preload_modules else "")
        + f"; timeout per candidate {result.timeout:.1f}s",
        f"- verified in fresh interpreters: {result.verified[0]} of {result.verified[1]} runs",
    ]
    rate = getattr(result, "original_rate", (1, 1))
    if rate[0] < rate[1]:
        out.append(
            f"- flaky: the original reproduced in {describe_rate(*rate)} in fresh interpreters, the result in "
            f"{describe_rate(*result.verified)}; each candidate was judged by a sequential test of its rate"
        )
    if result.stopped:
        out.append(f"- stopped early: {result.stopped} (the result is the best found so far)")
    if result.notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in result.notes]
    return "\n".join(out) + "\n"


def _tokens(size) -> int:
    """Sizes in events are (tokens, magnitude) pairs: people read the tokens."""
    return size[0] if isinstance(size, tuple) else size


class ProgressPrinter:
    """Plain progress lines on a stream: stages, improvements, a heartbeat every few seconds."""

    def __init__(self, stream: TextIO = sys.stderr, heartbeat: float = 5.0):
        self.stream = stream
        self.heartbeat = heartbeat
        self._last = time.monotonic()
        self._tests = 0
        self._best: int | None = None

    def __call__(self, event: object) -> None:
        now = time.monotonic()
        if isinstance(event, Stage):
            self._print(event.message)
        elif isinstance(event, Improved):
            before, after = _tokens(event.before), _tokens(event.size)
            if after < before:
                self._print(f"{event.name}: {before} -> {after} tokens ({self._tests} tests)")
        elif isinstance(event, Tested):
            self._tests, self._best = event.tests, event.best
            if now - self._last >= self.heartbeat:
                self._print(f"... {event.tests} tests, best {_tokens(event.best)} tokens")
        elif isinstance(event, PassStarted):
            pass

    def _print(self, message: str) -> None:
        self._last = time.monotonic()
        print(f"shrinkgpu: {message}", file=self.stream, flush=True)
