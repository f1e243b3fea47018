"""agents/server.py: the tools of ``shrinkgpu mcp`` (names, arguments, what they answer and
when they fail), started to wait or as jobs watched with ``job`` and stopped with
``cancel``, through the SDK's in-process client, with a stand-in for the commands
(tests/data/agents/fake_shrinkgpu.py); and the SDK kept out of the CLI and of a
reduction (tests/e2e/test_mcp.py drives the real server over stdio)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT

anyio = pytest.importorskip("anyio", reason="the agents extra (pip install 'shrinkgpu[agents]') is not installed")
pytest.importorskip("mcp", reason="the agents extra (pip install 'shrinkgpu[agents]') is not installed")

from mcp import Client  # noqa: E402

from shrinkgpu.agents import calls, server  # noqa: E402
from shrinkgpu.agents.jobs import Registry, State  # noqa: E402
from shrinkgpu.agents.server import build_server, reporter  # noqa: E402

from .helpers import FAKE_SAID, alive, fake  # noqa: E402

LONG_TOOLS = ("run", "reduce", "extract", "verify", "ablate", "check", "versions")


def session(body, registry: Registry | None = None):
    """``body(client)`` against a fresh in-process server; what it returns."""
    out = []

    async def main():
        async with Client(build_server(registry)) as client:
            out.append(await body(client))

    anyio.run(main)
    return out[0]


@pytest.fixture
def stand_in(monkeypatch, tmp_path):
    """The tools run the stand-in (in the mode the test sets) with the arguments the real
    command would get, which it echoes."""
    mode = ["end"]

    def command(name, opts, positionals, args=()):
        return fake(mode[0], tmp_path, *calls.command(name, opts, positionals, args)[3:])

    monkeypatch.setattr(server, "command", command)
    return mode


def answer(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


async def until_over(client, view: dict, times: list[float] | None = None) -> dict:
    """``job`` with the last cursor, until the job is over."""
    return await until(client, view, lambda v: v["state"] != "running", times)


async def until(client, view: dict, done, times: list[float] | None = None, text: bool = False) -> dict:
    """``job`` with the last cursor, until ``done(view)``."""
    while not done(view):
        begun = time.monotonic()
        view = answer(await client.call_tool("job", {"job_id": view["job"], "wait_s": 25, "cursor": view["cursor"],
                                                     "text": text}))
        if times is not None:
            times.append(time.monotonic() - begun)
    return view


def test_versions_takes_a_case_and_the_versions_and_refuses_a_call_without_versions():
    listed = session(lambda client: client.list_tools())
    schema = next(t for t in listed.tools if t.name == "versions").input_schema
    assert schema["required"] == ["case"]
    assert {"tries", "range_package", "range_span", "keep_error", "family", "runs"} <= set(schema["properties"])
    result = session(lambda client: client.call_tool("versions", {"case": "x.min.json"}))
    assert result.is_error and "tries" in result.content[0].text


def test_the_tools_and_the_options_an_agent_needs():
    listed = session(lambda client: client.list_tools())
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == {*LONG_TOOLS, "job", "cancel"}
    for name in LONG_TOOLS:
        assert tools[name].input_schema["properties"]["wait"]["default"] is True, name
        assert "env" in tools[name].input_schema["properties"], name
    reduce = tools["reduce"].input_schema
    assert "required" not in reduce  # a script, or a launch command
    assert {"keep_error", "family", "max_time", "max_tests", "output", "strictness", "propose_with",
            "nproc_per_node", "hang_after", "launch", "executor", "address"} <= set(reduce["properties"])
    assert reduce["properties"]["strictness"]["enum"] == ["strict", "batch", "tensors", "operator"]
    for name in ("run", "extract"):
        assert {"nproc_per_node", "hang_after", "launch"} <= set(tools[name].input_schema["properties"]), name
    assert "nproc_per_node" in tools["verify"].input_schema["properties"]
    check = tools["check"].input_schema
    assert check["required"] == ["original", "candidate"]
    assert "ctx" not in check["properties"]
    assert "same bug" in tools["check"].description
    job = tools["job"].input_schema
    assert job["required"] == ["job_id"] and job["properties"]["wait_s"]["maximum"] == 30
    assert tools["cancel"].input_schema["required"] == ["job_id"]


def test_a_job_answers_exactly_what_the_waiting_call_answers(stand_in):
    messages = []

    async def progress(value, total, message):
        messages.append((value, total, message))

    async def body(client):
        arguments = {"script": "t.py", "keep_error": "out of bounds", "max_time": 60, "args": ["--epochs", "3"]}
        waited = answer(await client.call_tool("reduce", arguments, progress_callback=progress))
        start = answer(await client.call_tool("reduce", {**arguments, "wait": False}))
        return waited, start, await until_over(client, start)

    waited, start, over = session(body)
    assert [m for _, _, m in messages] == FAKE_SAID
    assert all(total == 60 for _, total, _ in messages)
    assert start["job"] == "reduce-2" and start["state"] == "running" and "result" not in start
    assert over["state"] == "done" and over["result"] == waited
    assert waited["text"] == "x = 1\n" and waited["tokens_after"] == 3
    assert over["progress"]["best_tokens"] == 12 and over["progress"]["start_tokens"] == 30


def test_the_options_reach_the_command(stand_in, monkeypatch):
    monkeypatch.setenv("SHRINKGPU_TEST_GONE", "1")

    async def body(client):
        ran = answer(await client.call_tool("run", {
            "script": "t.py", "args": ["--epochs", "3"], "nproc_per_node": 2, "hang_after": 30,
            "env": {"SHRINKGPU_TEST_VAR": "7", "SHRINKGPU_TEST_GONE": None}}))
        launched = answer(await client.call_tool("extract", {"launch": ["torchrun", "--nproc-per-node=2", "t.py"]}))
        ray = answer(await client.call_tool("reduce", {"script": "t.py", "family": "index", "max_time": 60,
                                                       "executor": "ray", "address": "head:6379"}))
        return ran, launched, ray

    ran, launched, ray = session(body)
    assert ran["argv"] == ["run", "--sync-launches", "auto", "--nproc-per-node", "2", "--hang-after", "30.0",
                           "--json", "t.py", "--", "--epochs", "3"]
    assert ran["env"] == {"SHRINKGPU_TEST_VAR": "7", "SHRINKGPU_TEST_GONE": None,
                          "SHRINKGPU_MCP_PARENT": str(os.getpid())}
    assert launched["argv"] == ["extract", "--json", "--", "torchrun", "--nproc-per-node=2", "t.py"]
    assert ray["notes"][:12] == ["reduce", "--family", "index", "--max-time", "60.0", "--strictness", "strict",
                                "--executor", "ray", "--address", "head:6379", "--progress-json"]


def test_a_script_or_a_launch_command(stand_in):
    async def body(client):
        return (await client.call_tool("run", {"script": "t.py", "launch": ["torchrun", "t.py"]}),
                await client.call_tool("run", {}),
                await client.call_tool("reduce", {"script": "t.py"}))

    both, neither, no_error = session(body)
    assert both.is_error
    assert both.content[0].text == "Error executing tool run: give script (and args) or launch, not both"
    assert neither.is_error and neither.content[0].text.startswith("Error executing tool run: give script, or launch")
    assert no_error.is_error and "keep_error" in no_error.content[0].text


def test_a_failing_command_is_a_tool_error_and_a_failed_job(stand_in):
    stand_in[0] = "fail"

    async def body(client):
        waited = await client.call_tool("run", {"script": "t.py"})
        start = answer(await client.call_tool("run", {"script": "t.py", "wait": False}))
        return waited, await until_over(client, start)

    waited, over = session(body)
    assert waited.is_error and waited.content[0].text == "Error executing tool run: shrinkgpu exited with 2: bad option"
    assert over["state"] == "failed" and over["error"] == "shrinkgpu exited with 2: bad option"
    assert "result" not in over


def test_cancel_stops_a_job_as_ctrl_c_and_keeps_its_partial_result(stand_in, tmp_path):
    stand_in[0] = "wait"

    async def body(client):
        start = answer(await client.call_tool("reduce", {"script": "t.py", "family": "index", "wait": False}))
        watched = await until(client, start, lambda v: v["progress"]["best_tokens"] is not None, text=True)
        begun = time.monotonic()
        cancelled = answer(await client.call_tool("cancel", {"job_id": start["job"]}))
        return watched, cancelled, time.monotonic() - begun

    watched, cancelled, seconds = session(body)
    assert watched["state"] == "running" and watched["progress"]["text"] == "import torch\nx = 1\n"
    assert seconds < 10
    assert cancelled["state"] == "cancelled"
    assert cancelled["result"]["stop_reason"] == "interrupted" and cancelled["result"]["text"] == "# partial\nx = 1\n"
    assert (tmp_path / "x.min.py").read_text() == "# partial\nx = 1\n"


def test_job_waits_for_a_change_and_answers_when_there_is_one(stand_in, monkeypatch):
    stand_in[0] = "slow"
    times: list[float] = []

    async def body(client):
        start = answer(await client.call_tool("run", {"script": "t.py", "wait": False}))
        return await until_over(client, start, times)

    over = session(body)
    assert over["state"] == "done"
    assert over["progress"]["phase"] == "verifying the result in fresh interpreters"
    # every call answered at a change, well before its 25 s, and one of them waited for the slow stage
    assert all(t < 10 for t in times), times
    assert max(times) > 0.5, times


def test_an_unknown_job_is_a_tool_error():
    result = session(lambda client: client.call_tool("job", {"job_id": "reduce-7"}))
    assert result.is_error
    assert result.content[0].text.startswith("Error executing tool job: no job 'reduce-7' in this server (its jobs: "
                                             "none)")


def test_the_servers_end_stops_its_jobs_and_they_keep_their_partial_results(stand_in, tmp_path):
    stand_in[0] = "wait"
    registry = Registry()

    async def body(client):
        start = answer(await client.call_tool("reduce", {"script": "t.py", "family": "index", "wait": False}))
        return answer(await client.call_tool("job", {"job_id": start["job"], "wait_s": 25, "cursor": 0}))

    watched = session(body, registry)
    assert watched["state"] == "running"
    [job] = registry.jobs()
    assert job.state is State.CANCELLED and job.result["stop_reason"] == "interrupted"
    assert (tmp_path / "x.min.py").read_text() == "# partial\nx = 1\n"
    assert not alive(job.child.pid)


def test_progress_grows_with_every_notification():
    sent = []

    class Ctx:
        async def report_progress(self, progress, total, message):
            sent.append((progress, total, message))

    report = reporter(Ctx(), 60.0)

    async def main():
        await report(3.0, "a")
        await report(3.0, "b")
        await report(1.0, "c")

    anyio.run(main)
    assert [p for p, _, _ in sent] == sorted({p for p, _, _ in sent})
    assert all(total == 60.0 for _, total, _ in sent)


def test_the_cli_and_a_reduction_never_import_the_sdk(tmp_path):
    """The SDK is an extra for ``shrinkgpu mcp`` alone: the CLI, a reduction (the local
    fork server, the oracle) and ``check`` run without it."""
    script = tmp_path / "boom.py"
    script.write_text("import torch\ntorch.nn.functional.cross_entropy(torch.randn(3, 4), torch.tensor([0, 2, 4]))\n")
    code = textwrap.dedent(f"""\
        import sys
        from pathlib import Path
        import shrinkgpu.cli
        import shrinkgpu.check
        from shrinkgpu.reducer import ReduceConfig, reduce
        result = reduce(ReduceConfig(script=Path({str(script)!r}), keep_error="out of bounds", write=False,
                                     max_tests=3, ablate=False, extract=False, verify_runs=0, confirm=0))
        assert result.tokens_after <= result.tokens_before
        loaded = sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types")))
        print(loaded)
        sys.exit(1 if loaded else 0)
    """)
    ran = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr[-3000:]


def test_the_server_ends_on_sigint_and_sigterm_by_its_own_handler(monkeypatch):
    # Started with SIGINT ignored (a shell's background job, a CI runner's workers), the
    # server would hand that on to its jobs, and cancelling one sends it SIGINT.
    seen = []

    class Stub:
        def run(self, transport):
            seen.append((transport, signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)))

    monkeypatch.setattr(server, "build_server", lambda registry=None: Stub())
    before = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.getsignal(signal.SIGTERM)
    try:
        server.serve()
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
    [(transport, on_int, on_term)] = seen
    assert transport == "stdio" and isinstance(on_int, server.Ending) and on_term is on_int


def test_a_second_signal_changes_nothing(monkeypatch):
    ended = []
    ending = server.Ending(Registry())
    monkeypatch.setattr(server.Ending, "end", lambda self: ended.append(self.signum))
    ending(signal.SIGTERM, None)
    ending(signal.SIGINT, None)
    deadline = time.monotonic() + 10
    while not ended and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ended == [signal.SIGTERM] and ending.signum == signal.SIGTERM
