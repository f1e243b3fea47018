"""``shrinkgpu mcp`` driven by the MCP SDK's own client over stdio, as an agent drives it:
the tools listed, ``run`` and ``check`` on the class_index fixture, a ``reduce`` under a
small ``max_time`` that answers with its result, and a cancelled ``reduce`` that leaves
its best program so far, marked partial (issue 49)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from conftest import load_fixture, tree_digest
from shrinkgpu.syntax import count_tokens

anyio = pytest.importorskip("anyio", reason="the agents extra (pip install 'shrinkgpu[agents]') is not installed")
mcp = pytest.importorskip("mcp", reason="the agents extra (pip install 'shrinkgpu[agents]') is not installed")

from mcp import Client, StdioServerParameters  # noqa: E402

FIXTURE = load_fixture("class_index")
KEEP = r"Target \d+ is out of bounds"
PARTIAL_MARK = "# shrinkgpu: partial result"
ORIGINAL_TOKENS = count_tokens(FIXTURE.path.read_text())


def tokens_of(message: str) -> int:
    return int(message.split(":", 1)[1].split("tokens")[0])


def server(tmp_path: Path) -> StdioServerParameters:
    env = {**os.environ, "SHRINKGPU_CACHE_DIR": str(tmp_path / "cache")}
    return StdioServerParameters(command=sys.executable, args=["-m", "shrinkgpu", "mcp"], env=env, cwd=str(tmp_path))


def serve(tmp_path: Path, session) -> object:
    """Run ``session(client)`` against a fresh server; its return value."""
    out = []

    async def main():
        async with Client(server(tmp_path), read_timeout_seconds=600) as client:
            out.append(await session(client))

    anyio.run(main)
    return out[0]


def structured(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


def test_the_tools_mirror_the_commands(tmp_path):
    async def session(client):
        return {t.name: t for t in (await client.list_tools()).tools}

    tools = serve(tmp_path, session)
    assert set(tools) == {"run", "reduce", "extract", "verify", "ablate", "check", "versions"}
    assert "max_time" in tools["reduce"].input_schema["properties"]
    assert {"original", "candidate", "keep_error", "strictness"} <= set(tools["check"].input_schema["properties"])


def test_run_and_check_answer_with_the_json_of_the_commands(tmp_path):
    dtype_cut = tmp_path / "cut_float64.py"
    dtype_cut.write_text((FIXTURE.dir / "ideal_cut.py").read_text().replace(
        "nn.Linear(32, 4)(torch.randn(32, 32))", "nn.Linear(32, 4).double()(torch.randn(32, 32).double())"))

    async def session(client):
        ran = structured(await client.call_tool("run", {"script": str(FIXTURE.path)}))
        same = structured(await client.call_tool("check", {
            "original": str(FIXTURE.path), "candidate": str(FIXTURE.dir / "ideal_cut.py"), "keep_error": KEEP}))
        other = structured(await client.call_tool("check", {
            "original": str(FIXTURE.path), "candidate": str(dtype_cut), "keep_error": KEEP}))
        return ran, same, other

    ran, same, other = serve(tmp_path, session)
    assert ran["failed"] is True and ran["exit_code"] == 1
    assert ran["signature"]["type"] == "IndexError"
    assert ran["signature"]["op"]["name"] == FIXTURE.operator
    assert ran["advice"]["family"] == ran["signature"]["family"]
    assert same["same_bug"] is True and same["exit_code"] == 0, same
    assert same["original"]["cached"] is False
    assert other["same_bug"] is False and other["part"] == "dtype" and other["exit_code"] == 3, other
    assert other["original"]["cached"] is True  # the original was paid for once


def test_a_tool_error_says_what_is_wrong(tmp_path):
    async def session(client):
        return await client.call_tool("reduce", {"script": str(FIXTURE.path)})

    result = serve(tmp_path, session)
    assert result.is_error
    assert "keep_error" in result.content[0].text


@pytest.mark.slow
def test_reduce_under_a_small_max_time_answers_with_its_result(tmp_path):
    before = tree_digest(FIXTURE.dir)
    out = tmp_path / "out" / "train.min.py"
    out.parent.mkdir()
    messages: list[str] = []

    async def progress(value, total, message):
        messages.append(message or "")

    async def session(client):
        return structured(await client.call_tool("reduce", {
            "script": str(FIXTURE.path), "keep_error": KEEP, "output": str(out), "max_time": 90, "ablate": False,
        }, progress_callback=progress))

    answer = serve(tmp_path, session)
    assert tree_digest(FIXTURE.dir) == before
    assert answer["output"] == str(out) and answer["text"] == out.read_text()
    assert answer["tokens_after"] < answer["tokens_before"]
    assert answer["report"] and Path(answer["report"]).is_file()
    assert answer["extracted"]["text"] and "cross_entropy" in answer["extracted"]["text"]
    assert answer["signature"]["type"] == "IndexError"
    assert any(m.startswith("running the original") for m in messages), messages
    assert any(m.startswith("best so far") for m in messages), messages


@pytest.mark.slow
def test_a_cancelled_reduce_stops_and_leaves_its_partial_result(tmp_path):
    out = tmp_path / "out" / "train.min.py"
    out.parent.mkdir()
    report = out.with_name("train.min.md")
    found = []

    async def session(client):
        improved = anyio.Event()

        async def progress(value, total, message):
            # ("best so far: 1612 tokens, 200 lines"): the first accepted programs may be
            # smaller by the search's order only (a loop cut to its first iteration)
            if (message or "").startswith("best so far") and tokens_of(message) < ORIGINAL_TOKENS:
                found.append(tokens_of(message))
                improved.set()

        async with anyio.create_task_group() as group:
            async def reduction():
                await client.call_tool("reduce", {"script": str(FIXTURE.path), "keep_error": KEEP,
                                                  "output": str(out), "max_time": 600},
                                       progress_callback=progress)
                pytest.fail("the reduction ended before it was cancelled")

            group.start_soon(reduction)
            with anyio.fail_after(300):
                await improved.wait()
            group.cancel_scope.cancel()
        # The server interrupts the reduction as Ctrl-C would: it writes its best program,
        # its report and case file, then stops.
        with anyio.fail_after(180):
            while not report.is_file():
                await anyio.sleep(0.5)
        return True

    serve(tmp_path, session)
    assert found
    text = out.read_text()
    # written by the interrupted reduction itself (not only the copy the search keeps)
    assert text.startswith(f"{PARTIAL_MARK} (stopped: interrupted)"), (text[:200], report.read_text()[:3000])
    assert count_tokens(text) <= found[-1] < ORIGINAL_TOKENS  # the best so far, or one found after it
    assert "stopped early: interrupted" in report.read_text()
