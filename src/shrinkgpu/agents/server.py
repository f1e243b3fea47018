"""``shrinkgpu mcp``: shrinkgpu's commands as tools of an MCP server on stdio, for coding
agents that triage bugs (docs/agents.md says when to call which).

Each tool mirrors a command and answers with the JSON that command prints with
``--json`` (agents/calls.py runs it as a child process); a failure to run at all
(exit 1) or a bad argument (exit 2) is a tool error whose text says why.  ``reduce``
reports its progress as the protocol's progress notifications (the seconds since it
started; ``max_time`` as the total) and, cancelled, stops the way Ctrl-C stops it: the
best program so far stays at its output path, marked partial, with its report.

The official ``mcp`` SDK is an optional extra (``pip install 'shrinkgpu[agents]'``):
only this module imports it, and only ``shrinkgpu mcp`` imports this module.
"""

import os
import signal
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from shrinkgpu.agents.calls import Answer, Report, call, command, options

INSTRUCTIONS = """\
shrinkgpu reduces a failing PyTorch script to a small one that fails with the same first
error (class, message, operator, and the dtype, shape and stride at the operator), judged
in isolated processes. `run` says what a script's first error is; `reduce` cuts a script
down (give keep_error or family, and max_time); `check` says whether a script you cut or
rewrote by hand is still the same bug as the original, and which part differs when it is
not; `extract` writes the failing call alone; `verify` checks a fix; `ablate` compares one
change at a time. Never call a hand-made cut "the same bug" without `check`.
"""

Strictness = Literal["strict", "batch", "tensors", "operator"]
SyncLaunches = Literal["auto", "always", "never"]
Script = Annotated[str, Field(description="Path of the Python script (relative to cwd).")]
Args = Annotated[list[str] | None, Field(description="The script's own command-line arguments.")]
Cwd = Annotated[str | None, Field(description="Directory to run in, as the user runs the script (default: the "
                                               "server's).")]
KeepError = Annotated[str | None, Field(description="Regular expression the first error (Class: message) must "
                                                    "match, e.g. 'Target \\\\d+ is out of bounds'.")]
FamilyName = Annotated[str | None, Field(description="Or keep an error family: index, device-assert, "
                                                     "out-of-memory, shape, dtype, compile, ...")]
Timeout = Annotated[float | None, Field(description="Seconds per run of the script.")]
# The exit codes of a reduction stopped by a signal (SIGINT, SIGHUP, SIGTERM): its best
# result so far is written, and the answer says so.
INTERRUPTED = (130, 129, 143)
# What ``reduce`` answers with, of the command's JSON (docs/outputs.md has every key).
REDUCE_KEYS = ("output", "command", "report", "tokens_before", "tokens_after", "ratio", "candidates_tested",
               "seconds", "stopped_early", "stop_reason", "verified", "original_rate", "signature",
               "final_signature", "notes", "exit_code", "error")


def reporter(ctx: Context, total: float | None) -> Report:
    """Progress notifications for one call: the seconds since the command started, made
    to grow with every notification (the protocol asks it)."""
    last = [0.0]

    async def report(seconds: float, message: str) -> None:
        last[0] = max(seconds, last[0] + 0.001)
        await ctx.report_progress(last[0], total, message)

    return report


def answered(answer: Answer, ok: tuple[int, ...]) -> dict[str, Any]:
    """The command's JSON when its exit code is an answer (``ok``), else a tool error."""
    if answer.exit_code in ok:
        return answer.data
    raise ToolError(f"shrinkgpu exited with {answer.exit_code}: {answer.error or 'no message'}")


def read_tree(path: str, cwd: str | None) -> dict[str, str] | None:
    """The Python files of a result written as a directory, by their paths in it."""
    where = Path(path) if os.path.isabs(path) or cwd is None else Path(cwd) / path
    if not where.is_dir():
        return None
    return {str(p.relative_to(where)): p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(where.rglob("*.py"))}


def read_text(path: str | None, cwd: str | None) -> str | None:
    if not path:
        return None
    where = Path(path) if os.path.isabs(path) or cwd is None else Path(cwd) / path
    try:
        return where.read_text(encoding="utf-8", errors="replace") if where.is_file() else None
    except OSError:
        return None


async def run(script: Script, ctx: Context, args: Args = None, cwd: Cwd = None, timeout: Timeout = None,
              sync_launches: SyncLaunches = "auto") -> dict[str, Any]:
    """Run the script once in a fresh interpreter: its first error (class, message, the
    operator with its tensors' dtype/shape/stride), the error's family and what to check
    first. `failed` is false when it ran without error."""
    argv = command("run", options(timeout=timeout, sync_launches=sync_launches), [script], args or ())
    return answered(await call(argv, cwd=cwd, report=reporter(ctx, None)), (0, 3))


async def reduce(
    script: Script,
    ctx: Context,
    keep_error: KeepError = None,
    family: FamilyName = None,
    args: Args = None,
    cwd: Cwd = None,
    max_time: Annotated[float | None, Field(description="Seconds for the whole reduction; the best result so far "
                                                        "is written when it runs out.")] = 600.0,
    max_tests: Annotated[int | None, Field(description="Stop after this many candidates.")] = None,
    output: Annotated[str | None, Field(description="Where to write the result (default <stem>.min.py beside "
                                                    "the script).")] = None,
    strictness: Strictness = "strict",
    propose_with: Annotated[str | None, Field(description="A shell command that proposes smaller programs "
                                                          "(docs/agents.md); each is judged like every "
                                                          "candidate.")] = None,
    extract: bool = True,
    ablate: bool = True,
) -> dict[str, Any]:
    """Reduce the script to a small one that fails with the same first error, never
    touching the original. Answers with the result's path and text, its tokens before
    and after, the report's path, and the failing call alone (`extracted`). Cancelling
    the call stops the reduction and leaves the best result so far at `output`, marked
    partial."""
    if keep_error is None and family is None:
        raise ToolError("say which error to keep: keep_error (a regular expression), family, or both")
    opts = options(keep_error=keep_error, family=family, max_time=max_time, max_tests=max_tests, output=output,
                   strictness=strictness, propose_with=propose_with, progress_json=True)
    opts += ([] if extract else ["--no-extract"]) + ([] if ablate else ["--no-ablate"])
    answer = await call(command("reduce", opts, [script], args or ()), cwd=cwd, report=reporter(ctx, max_time))
    data = answered(answer, (0, 3, *INTERRUPTED))
    out = {key: data.get(key) for key in REDUCE_KEYS if key in data}
    if data.get("output"):
        out["text"] = read_text(data["output"], cwd)
        if out["text"] is None:  # a result of several files: a directory
            out["files"] = read_tree(data["output"], cwd)
    extracted = data.get("extracted")
    if extracted:
        out["extracted"] = {**extracted, "text": read_text(extracted.get("script"), cwd)}
    return out


async def extract(script: Script, ctx: Context, args: Args = None, cwd: Cwd = None, timeout: Timeout = None,
                  output: Annotated[str | None, Field(description="Where to write (default <stem>.extracted.py).")]
                  = None) -> dict[str, Any]:
    """Write the failing call alone: a standalone script that rebuilds its arguments
    (same dtype, shape and strides), checked in a fresh interpreter. Answers with its
    path and text."""
    answer = await call(command("extract", options(timeout=timeout, output=output), [script], args or ()), cwd=cwd,
                        report=reporter(ctx, None))
    data = answered(answer, (0, 3))
    if data.get("output"):
        data = {**data, "text": read_text(data["output"], cwd)}
    return data


async def verify(
    result: Annotated[str, Field(description="The x.min.py a reduction wrote (its case file is beside it).")],
    ctx: Context,
    cwd: Cwd = None,
    flow_command: Annotated[str | None, Field(description="A shell command that runs a representative part of "
                                                          "the flow; it must exit 0.")] = None,
    original: bool = True,
    timeout: Timeout = None,
) -> dict[str, Any]:
    """After a fix: the minimal case, its neighbours, the extracted call and the original
    in fresh interpreters. `ok` is true when every check passes."""
    opts = options(command=flow_command, timeout=timeout) + ([] if original else ["--no-original"])
    return answered(await call(command("verify", opts, [result]), cwd=cwd, report=reporter(ctx, None)), (0, 4))


async def ablate(
    result: Annotated[str, Field(description="The x.min.py a reduction wrote.")],
    ctx: Context,
    cwd: Cwd = None,
    timeout: Timeout = None,
) -> dict[str, Any]:
    """The minimal case and the extracted call run with one change at a time (valid
    values, float32, batch 1, another device, compile backends...), each in a fresh
    interpreter, and the kind of bug read from which still fail."""
    return answered(await call(command("ablate", options(timeout=timeout), [result]), cwd=cwd,
                               report=reporter(ctx, None)), (0,))


async def check(
    original: Annotated[str, Field(description="The script that fails (the reference).")],
    candidate: Annotated[str, Field(description="Your cut or rewrite of it.")],
    ctx: Context,
    keep_error: KeepError = None,
    family: FamilyName = None,
    args: Args = None,
    cwd: Cwd = None,
    strictness: Strictness = "strict",
    runs: Annotated[int, Field(ge=1, description="Fresh-interpreter runs of each (a flaky original is measured "
                                                 "over 10).")] = 3,
    timeout: Timeout = None,
    no_cache: Annotated[bool, Field(description="Run the original again even if an earlier check kept what it "
                                                "showed.")] = False,
) -> dict[str, Any]:
    """Is the candidate the same bug as the original, by the rule a reduction uses (same
    class, message, operator, dtype/shape/stride at it, as often as the original fails)?
    `same_bug`, and when false, `part`: the part that differs (class, message, operator,
    dtype, shape, stride, device, arguments, keep-error, family, no error, timeout, rate)
    and `detail`. The original's runs are kept between calls."""
    opts = options(keep_error=keep_error, family=family, strictness=strictness, runs=runs, timeout=timeout,
                   no_cache=no_cache)
    answer = await call(command("check", opts, [original, candidate], args or ()), cwd=cwd,
                        report=reporter(ctx, None))
    return answered(answer, (0, 3))


async def versions(
    case: Annotated[str, Field(description="The case file (x.min.json) a reduction wrote, or a script with "
                                           "keep_error/family.")],
    ctx: Context,
    tries: Annotated[list[str] | None, Field(description="Versions to run in, each NAME==VERSION "
                                                         "(torch==2.12.0, numpy==1.26.4).")] = None,
    range_package: Annotated[str | None, Field(description="With range_span: the package whose releases are "
                                                           "bisected (torch).")] = None,
    range_span: Annotated[str | None, Field(description="FROM..TO (2.10.0..2.15.0), or nightly:YYYY-MM-DD..YYYY-MM-DD "
                                                        "where a configured index serves nightlies.")] = None,
    keep_error: KeepError = None,
    family: FamilyName = None,
    args: Args = None,
    cwd: Cwd = None,
    runs: Annotated[int, Field(ge=1, description="Fresh-interpreter runs per version.")] = 3,
    timeout: Timeout = None,
) -> dict[str, Any]:
    """Which release broke it: the minimal case (and its extracted call) run in
    environments that differ from the user's in one package version each, built with uv
    and kept between calls. Each version: same bug (by check's rule), another error,
    passes, or could not be installed; `sentence` says it in one line ("fails the same
    way since torch 2.13.0; passes on 2.12.0"). Building a CUDA build of torch downloads
    several GB the first time."""
    if not tries and not (range_package and range_span):
        raise ToolError("say which versions: tries (NAME==VERSION, ...) or range_package with range_span")
    opts = options(keep_error=keep_error, family=family, runs=runs, timeout=timeout)
    for pin in tries or ():
        opts += ["--try", pin]
    if range_package and range_span:
        opts += ["--range", range_package, range_span]
    answer = await call(command("versions", opts, [case], args or ()), cwd=cwd, report=reporter(ctx, None))
    return answered(answer, (0,))


TOOLS = (run, reduce, extract, verify, ablate, check, versions)


def build_server() -> MCPServer:
    from shrinkgpu import __version__

    server = MCPServer("shrinkgpu", instructions=INSTRUCTIONS, version=__version__)
    for tool in TOOLS:
        server.add_tool(tool)
    return server


def serve() -> None:
    """Serve on stdin and stdout until the client goes.  SIGINT is Python's own again
    first: a server started with it ignored (a test runner's worker, a shell's background
    job) would hand that on to every reduction it starts, and a cancelled reduce, which
    sends its child SIGINT, would run on to the end instead of writing its partial result."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    build_server().run("stdio")
