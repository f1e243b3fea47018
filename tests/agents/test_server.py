"""agents/server.py: the tools of ``shrinkgpu mcp`` (names, arguments, what they answer and
when they fail), through the SDK's in-process client; and the SDK kept out of the CLI and
of a reduction (tests/e2e/test_mcp.py drives the real server over stdio)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

anyio = pytest.importorskip("anyio", reason="the agents extra (pip install 'shrinkgpu[agents]') is not installed")
pytest.importorskip("mcp", reason="the agents extra (pip install 'shrinkgpu[agents]') is not installed")

from mcp import Client  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

from shrinkgpu.agents.calls import Answer  # noqa: E402
from shrinkgpu.agents.server import answered, build_server, reporter  # noqa: E402


def tools() -> dict:
    async def main():
        async with Client(build_server()) as client:
            return {t.name: t for t in (await client.list_tools()).tools}

    return anyio.run(main)


def test_one_tool_per_command_with_the_options_an_agent_needs():
    listed = tools()
    assert set(listed) == {"run", "reduce", "extract", "verify", "ablate", "check", "versions"}
    reduce = listed["reduce"].input_schema
    assert reduce["required"] == ["script"]
    assert {"keep_error", "family", "max_time", "max_tests", "output", "strictness", "propose_with"} <= \
        set(reduce["properties"])
    assert reduce["properties"]["strictness"]["enum"] == ["strict", "batch", "tensors", "operator"]
    check = listed["check"].input_schema
    assert check["required"] == ["original", "candidate"]
    assert "ctx" not in check["properties"]
    assert "same bug" in listed["check"].description


def test_versions_takes_a_case_and_the_versions_and_refuses_a_call_without_versions():
    listed = tools()
    schema = listed["versions"].input_schema
    assert schema["required"] == ["case"]
    assert {"tries", "range_package", "range_span", "keep_error", "family", "runs"} <= set(schema["properties"])
    assert "same bug" in listed["versions"].description

    async def main():
        async with Client(build_server()) as client:
            return await client.call_tool("versions", {"case": "x.min.json"})

    result = anyio.run(main)
    assert result.is_error and "tries" in result.content[0].text


def test_an_exit_code_that_is_no_answer_is_a_tool_error():
    assert answered(Answer(3, {"same_bug": False}, ""), (0, 3)) == {"same_bug": False}
    with pytest.raises(ToolError, match="exited with 2: no such file"):
        answered(Answer(2, {"error": "no such file"}, ""), (0, 3))


def test_reduce_needs_an_error_to_keep():
    async def main():
        async with Client(build_server()) as client:
            return await client.call_tool("reduce", {"script": "train.py"})

    result = anyio.run(main)
    assert result.is_error and "keep_error" in result.content[0].text


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


def test_the_server_takes_sigint_back_so_that_a_cancelled_reduce_can_stop(monkeypatch):
    # Started with SIGINT ignored (a shell's background job, a CI runner's workers), the
    # server would hand that on to its reductions, and cancelling one sends it SIGINT.
    import signal

    from shrinkgpu.agents import server

    seen = []

    class Stub:
        def run(self, transport):
            seen.append((transport, signal.getsignal(signal.SIGINT)))

    monkeypatch.setattr(server, "build_server", lambda: Stub())
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        server.serve()
    finally:
        signal.signal(signal.SIGINT, before)
    assert seen == [("stdio", signal.default_int_handler)]
