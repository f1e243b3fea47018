"""``shrinkgpu mcp``: shrinkgpu's commands as tools of an MCP server on stdio, for coding
agents that triage bugs (docs/agents.md says when to call which).

Each tool mirrors a command and answers with the JSON that command prints with
``--json`` (agents/calls.py runs it as a child process); a failure to run at all
(exit 1) or a bad argument (exit 2) is a tool error whose text says why.  Every command
runs as a job (agents/jobs.py).  A call that waits (the default) reports the job's
progress as the protocol's progress notifications and, cancelled, stops it the way
Ctrl-C does: a reduction's best program so far stays at its output path, marked partial.
With ``wait: false`` the call answers at once with the job's id, for clients that cut a
call at 60 s: ``job`` says how it goes (waiting for a change up to ``wait_s``) and, once
over, exactly what the waiting call answers; ``cancel`` stops it.  The server's exit
(stdin closed, SIGTERM, SIGINT) stops its running jobs and waits while they write; a
server killed outright leaves each job's command to stop itself (calls.stop_with_parent).

The protocol's tasks extension would do the same for clients that ask for it; this SDK
has no support for it beyond raw extension methods, and plain tools work in every client.

The official ``mcp`` SDK is an optional extra (``pip install 'shrinkgpu[agents]'``):
only this module imports it, and only ``shrinkgpu mcp`` imports this module.
"""

import os
import signal
import threading
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, cast

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from shrinkgpu.agents.calls import INTERRUPTED, Answer, Refused, answered, command, environment, options
from shrinkgpu.agents.jobs import WAIT_LIMIT, Job, Registry

INSTRUCTIONS = """\
shrinkgpu reduces a failing PyTorch script to a small one that fails with the same first
error (class, message, operator, and the dtype, shape and stride at the operator), judged
in isolated processes. `run` says what a script's first error is; `reduce` cuts a script
down (give keep_error or family, and max_time); `check` says whether a script you cut or
rewrote by hand is still the same bug as the original, and which part differs when it is
not; `extract` writes the failing call alone; `verify` checks a fix; `ablate` compares one
change at a time. Never call a hand-made cut "the same bug" without `check`.
A reduction takes minutes: call `reduce` with wait=false, then `job` with its id and
wait_s=25 until the state is done, failed or cancelled (the answer is in `result`);
`cancel` stops it and keeps the best result so far, marked partial.
"""

# Seconds a waiting call's thread waits for the next message before looking again.
STEP = 5.0
# Seconds ``cancel`` waits for the job to stop before it answers (the job goes on stopping).
CANCEL_WAIT = 5.0

Strictness = Literal["strict", "batch", "tensors", "operator"]
SyncLaunches = Literal["auto", "always", "never"]
Script = Annotated[str, Field(description="Path of the Python script (relative to cwd).")]
ScriptOrLaunch = Annotated[str | None, Field(description="Path of the Python script (relative to cwd); or give "
                                                         "`launch` instead.")]
Args = Annotated[list[str] | None, Field(description="The script's own command-line arguments.")]
Cwd = Annotated[str | None, Field(description="Directory to run in, as the user runs the script (default: the "
                                               "server's).")]
KeepError = Annotated[str | None, Field(description="Regular expression the first error (Class: message) must "
                                                    "match, e.g. 'Target \\\\d+ is out of bounds'.")]
FamilyName = Annotated[str | None, Field(description="Or keep an error family: index, device-assert, "
                                                     "out-of-memory, shape, dtype, compile, ...")]
Timeout = Annotated[float | None, Field(description="Seconds per run of the script.")]
Env = Annotated[dict[str, str | None] | None, Field(description="Environment variables of the script, over the "
                                                                "server's own (null takes one out), e.g. "
                                                                "{\"CUDA_VISIBLE_DEVICES\": \"1\"}.")]
Nproc = Annotated[int | Literal["gpu", "cpu", "auto"] | None, Field(
    description="Run the script as `torchrun --nproc-per-node N` runs it: N ranks, each with torchrun's "
                "environment (RANK, WORLD_SIZE, ...); the first error is the rank that failed first.")]
HangAfter = Annotated[float | None, Field(ge=1, description="With ranks: seconds ranks may wait in a collective "
                                                            "that not all reach before the run counts as hanging "
                                                            "(default 20).")]
Launch = Annotated[list[str] | None, Field(description="Your own launch command line instead of script and args, "
                                                       "e.g. [\"torchrun\", \"--nproc-per-node=2\", \"train.py\", "
                                                       "\"--epochs\", \"3\"].")]
Wait = Annotated[bool, Field(description="false: answer at once with a job id; then call `job` until it is over, "
                                         "and `cancel` to stop it. For clients that cut a call at 60 s.")]
JobId = Annotated[str, Field(description="The id a call with wait=false answered with (`job`).")]
# What ``reduce`` answers with, of the command's JSON (docs/outputs.md has every key).
REDUCE_KEYS = ("output", "command", "report", "tokens_before", "tokens_after", "ratio", "candidates_tested",
               "seconds", "stopped_early", "stop_reason", "verified", "original_rate", "signature",
               "final_signature", "notes", "exit_code", "error")


def reporter(ctx: Context, total: float | None) -> Callable:
    """Progress notifications for one call: the seconds since the command started, made
    to grow with every notification (the protocol asks it)."""
    last = [0.0]

    async def report(seconds: float, message: str) -> None:
        last[0] = max(seconds, last[0] + 0.001)
        await ctx.report_progress(last[0], total, message)

    return report


def registry_of(ctx: Context) -> Registry:
    # what the lifespan yields: the SDK types a lifespan's context as a dict of anything
    return cast(Registry, ctx.request_context.lifespan_context)


async def started(ctx: Context, tool: str, argv: list[str], shape: Callable[[Answer], dict], *, cwd: str | None,
                  env: dict | None, wait: bool, total: float | None = None) -> dict[str, Any]:
    """Start the command as a job: its view at once (``wait`` false), else what it
    answers, its progress notified meanwhile."""
    try:
        job = registry_of(ctx).start(tool, argv, shape, cwd=cwd, env=environment(env))
    except Refused as exc:
        raise ToolError(str(exc)) from None
    if not wait:
        return job.view()
    return await waited(job, reporter(ctx, total))


async def waited(job: Job, report: Callable) -> dict[str, Any]:
    """The job's answer, each of its messages notified as it comes.  Cancelled (by the
    client, or by the server going away), the job stops as Ctrl-C stops it."""
    seen = 0
    try:
        while True:
            said, over = await anyio.to_thread.run_sync(job.wait_said, seen, STEP, abandon_on_cancel=True)
            seen += len(said)
            for seconds, message in said:
                await report(seconds, message)
            if over:
                break
    except BaseException:
        job.cancel()
        raise
    try:
        return job.outcome()
    except Refused as exc:
        raise ToolError(str(exc)) from None


def script_line(script: str | None, args: list[str] | None, launch: list[str] | None) -> tuple[list[str], list[str]]:
    """The positional arguments and those after ``--``: the script and its arguments, or
    the user's own launch command (``-- torchrun ... train.py ...``)."""
    if launch:
        if script or args:
            raise ToolError("give script (and args) or launch, not both")
        return [], list(launch)
    if not script:
        raise ToolError("give script, or launch (your own command line, e.g. torchrun's)")
    return [script], list(args or ())


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


def reduced(answer: Answer, cwd: str | None) -> dict[str, Any]:
    """What ``reduce`` answers: the command's JSON, with the result's text (or files) and
    the extracted call's text read from where they were written."""
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


def with_text(answer: Answer, cwd: str | None) -> dict[str, Any]:
    data = answered(answer, (0, 3))
    return {**data, "text": read_text(data["output"], cwd)} if data.get("output") else data


async def run(ctx: Context, script: ScriptOrLaunch = None, args: Args = None, cwd: Cwd = None,
              timeout: Timeout = None, sync_launches: SyncLaunches = "auto", nproc_per_node: Nproc = None,
              hang_after: HangAfter = None, launch: Launch = None, env: Env = None, wait: Wait = True
              ) -> dict[str, Any]:
    """Run the script once in a fresh interpreter: its first error (class, message, the
    operator with its tensors' dtype/shape/stride), the error's family and what to check
    first. `failed` is false when it ran without error."""
    positionals, after = script_line(script, args, launch)
    opts = options(timeout=timeout, sync_launches=sync_launches, nproc_per_node=nproc_per_node,
                   hang_after=hang_after)
    return await started(ctx, "run", command("run", opts, positionals, after), partial(answered, ok=(0, 3)),
                         cwd=cwd, env=env, wait=wait)


async def reduce(
    ctx: Context,
    script: ScriptOrLaunch = None,
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
    nproc_per_node: Nproc = None,
    hang_after: HangAfter = None,
    launch: Launch = None,
    executor: Annotated[Literal["local", "ray"], Field(description="ray: candidates on the actors of a Ray "
                                                                   "cluster (`address`).")] = "local",
    address: Annotated[str | None, Field(description="The Ray cluster's address, HOST:PORT (default: "
                                                     "RAY_ADDRESS, else a local one).")] = None,
    env: Env = None,
    wait: Wait = True,
) -> dict[str, Any]:
    """Reduce the script to a small one that fails with the same first error, never
    touching the original. Answers with the result's path and text, its tokens before
    and after, the report's path, and the failing call alone (`extracted`). It takes
    minutes: with wait=false, watch it with `job`. Cancelling the call (or `cancel`)
    stops the reduction and leaves the best result so far at `output`, marked partial."""
    if keep_error is None and family is None:
        raise ToolError("say which error to keep: keep_error (a regular expression), family, or both")
    positionals, after = script_line(script, args, launch)
    opts = options(keep_error=keep_error, family=family, max_time=max_time, max_tests=max_tests, output=output,
                   strictness=strictness, propose_with=propose_with, nproc_per_node=nproc_per_node,
                   hang_after=hang_after, executor=None if executor == "local" else executor, address=address,
                   progress_json=True)
    opts += ([] if extract else ["--no-extract"]) + ([] if ablate else ["--no-ablate"])
    return await started(ctx, "reduce", command("reduce", opts, positionals, after), partial(reduced, cwd=cwd),
                         cwd=cwd, env=env, wait=wait, total=max_time)


async def extract(ctx: Context, script: ScriptOrLaunch = None, args: Args = None, cwd: Cwd = None,
                  timeout: Timeout = None,
                  output: Annotated[str | None, Field(description="Where to write (default <stem>.extracted.py).")]
                  = None, nproc_per_node: Nproc = None, hang_after: HangAfter = None, launch: Launch = None,
                  env: Env = None, wait: Wait = True) -> dict[str, Any]:
    """Write the failing call alone: a standalone script that rebuilds its arguments
    (same dtype, shape and strides), checked in a fresh interpreter. Answers with its
    path and text."""
    positionals, after = script_line(script, args, launch)
    opts = options(timeout=timeout, output=output, nproc_per_node=nproc_per_node, hang_after=hang_after)
    return await started(ctx, "extract", command("extract", opts, positionals, after), partial(with_text, cwd=cwd),
                         cwd=cwd, env=env, wait=wait)


async def verify(
    result: Annotated[str, Field(description="The x.min.py a reduction wrote (its case file is beside it).")],
    ctx: Context,
    cwd: Cwd = None,
    flow_command: Annotated[str | None, Field(description="A shell command that runs a representative part of "
                                                          "the flow; it must exit 0.")] = None,
    original: bool = True,
    timeout: Timeout = None,
    nproc_per_node: Annotated[int | None, Field(ge=1, description="Ranks of the original's run (default: as it "
                                                                  "was reduced).")] = None,
    env: Env = None,
    wait: Wait = True,
) -> dict[str, Any]:
    """After a fix: the minimal case, its neighbours, the extracted call and the original
    in fresh interpreters. `ok` is true when every check passes."""
    opts = options(command=flow_command, timeout=timeout, nproc_per_node=nproc_per_node)
    opts += [] if original else ["--no-original"]
    return await started(ctx, "verify", command("verify", opts, [result]), partial(answered, ok=(0, 4)), cwd=cwd,
                         env=env, wait=wait)


async def ablate(
    result: Annotated[str, Field(description="The x.min.py a reduction wrote.")],
    ctx: Context,
    cwd: Cwd = None,
    timeout: Timeout = None,
    env: Env = None,
    wait: Wait = True,
) -> dict[str, Any]:
    """The minimal case and the extracted call run with one change at a time (valid
    values, float32, batch 1, another device, compile backends...), each in a fresh
    interpreter, and the kind of bug read from which still fail."""
    return await started(ctx, "ablate", command("ablate", options(timeout=timeout), [result]),
                         partial(answered, ok=(0,)), cwd=cwd, env=env, wait=wait)


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
    env: Env = None,
    wait: Wait = True,
) -> dict[str, Any]:
    """Is the candidate the same bug as the original, by the rule a reduction uses (same
    class, message, operator, dtype/shape/stride at it, as often as the original fails)?
    `same_bug`, and when false, `part`: the part that differs (class, message, operator,
    dtype, shape, stride, device, arguments, keep-error, family, no error, timeout, rate)
    and `detail`. The original's runs are kept between calls."""
    opts = options(keep_error=keep_error, family=family, strictness=strictness, runs=runs, timeout=timeout,
                   no_cache=no_cache)
    return await started(ctx, "check", command("check", opts, [original, candidate], args or ()),
                         partial(answered, ok=(0, 3)), cwd=cwd, env=env, wait=wait)


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
    env: Env = None,
    wait: Wait = True,
) -> dict[str, Any]:
    """Which release broke it: the minimal case (and its extracted call) run in
    environments that differ from the user's in one package version each, built with uv
    and kept between calls. Each version: same bug (by check's rule), another error,
    passes, or could not be installed; `sentence` says it in one line ("fails the same
    way since torch 2.13.0; passes on 2.12.0"). Building a CUDA build of torch downloads
    several GB the first time: start it with wait=false."""
    if not tries and not (range_package and range_span):
        raise ToolError("say which versions: tries (NAME==VERSION, ...) or range_package with range_span")
    opts = options(keep_error=keep_error, family=family, runs=runs, timeout=timeout)
    for pin in tries or ():
        opts += ["--try", pin]
    if range_package and range_span:
        opts += ["--range", range_package, range_span]
    return await started(ctx, "versions", command("versions", opts, [case], args or ()),
                         partial(answered, ok=(0,)), cwd=cwd, env=env, wait=wait)


async def job(
    job_id: JobId,
    ctx: Context,
    wait_s: Annotated[float, Field(ge=0, le=WAIT_LIMIT, description="Wait up to this many seconds for a change "
                                                                    "(a stage, a smaller program, the end) "
                                                                    "before answering.")] = 0.0,
    cursor: Annotated[int | None, Field(description="The `cursor` of your last answer: answer at once if anything "
                                                    "changed since (default: wait for the next change).")] = None,
    text: Annotated[bool, Field(description="Include the best program so far (`progress.text`).")] = False,
) -> dict[str, Any]:
    """How a job started with wait=false goes: `state` (running, done, failed,
    cancelled), `progress` (`phase`, `best_tokens`, `tested`, ...; `text` on request),
    `seconds`, and once over `result`, exactly what the waiting call answers (or
    `error`). Poll with wait_s=25 and the last `cursor`."""
    found = _job(ctx, job_id)
    if wait_s > 0:
        await anyio.to_thread.run_sync(found.wait, cursor, wait_s, abandon_on_cancel=True)
    return found.view(text=text)


async def cancel(job_id: JobId, ctx: Context) -> dict[str, Any]:
    """Stop a job as Ctrl-C stops it: a reduction writes its best program so far at its
    output path, marked partial, and `result` says so once the state is cancelled
    (`cancelling` while it writes: call `job` again)."""
    found = _job(ctx, job_id)
    found.cancel()
    await anyio.to_thread.run_sync(found.wait_end, CANCEL_WAIT, abandon_on_cancel=True)
    return found.view()


def _job(ctx: Context, job_id: str) -> Job:
    try:
        return registry_of(ctx).get(job_id)
    except Refused as exc:
        raise ToolError(str(exc)) from None


TOOLS = (run, reduce, extract, verify, ablate, check, versions, job, cancel)


def stop(registry: Registry) -> None:
    """Every running job stopped, and waited for while it writes its best result.
    SIGTERM is held meanwhile: a client that closed our stdin sends it after a grace of
    its own (2 s for the SDK's), and until its SIGKILL the jobs are better left to write
    (a job's child stops itself when the server is killed: calls.stop_with_parent)."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN) if main else None
    try:
        registry.stop_all()
    finally:
        if main:
            signal.signal(signal.SIGTERM, before)


def build_server(registry: Registry | None = None) -> MCPServer:
    """The server, its jobs in ``registry``: stopped when the server's loop ends."""
    from shrinkgpu import __version__

    jobs = Registry() if registry is None else registry

    @asynccontextmanager
    async def lifespan(_server):
        try:
            yield jobs
        finally:
            stop(jobs)

    server = MCPServer("shrinkgpu", instructions=INSTRUCTIONS, version=__version__, lifespan=lifespan)
    for tool in TOOLS:
        server.add_tool(tool)
    return server


class Ending:
    """SIGTERM and SIGINT: every job stopped (waited for while it writes its best
    result), then the server ends, from a thread of its own.  Not by unwinding the event
    loop: the SDK reads stdin in a thread that no cancellation reaches, so the loop would
    wait for the client's next line.  A second signal changes nothing (the client's
    SIGTERM after its own grace, a second Ctrl-C): the stop is bounded by ``GRACE``."""

    def __init__(self, registry: Registry):
        self.registry = registry
        self.signum: int | None = None

    def __call__(self, signum, frame) -> None:
        if self.signum is not None:
            return
        self.signum = signum
        threading.Thread(target=self.end, name="shrinkgpu-mcp-ending", daemon=True).start()

    def end(self) -> None:
        try:
            self.registry.stop_all()
        finally:
            os._exit(128 + (self.signum or signal.SIGTERM))


def serve() -> None:
    """Serve on stdin and stdout until the client goes (or SIGTERM, SIGINT: ``Ending``),
    then stop every job still running.  SIGINT gets a handler of ours also for a server
    started with it ignored (a test runner's worker, a shell's background job): that
    would be handed on to every command it starts, and a cancelled job, whose child gets
    SIGINT, would run on to the end instead of writing its partial result."""
    registry = Registry()
    ending = Ending(registry)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, ending)
    try:
        build_server(registry).run("stdio")
    finally:
        stop(registry)
