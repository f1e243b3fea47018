"""``shrinkgpu mcp`` driven by the MCP SDK's own client over stdio, as an agent drives it:
the tools listed, ``run`` and ``check`` on the class_index fixture, a ``reduce`` under a
small ``max_time`` that answers with its result, and a cancelled ``reduce`` that leaves
its best program so far, marked partial (issue 49).  And as a client that cuts calls at
60 s drives it (issue 56): a reduction started with ``wait: false`` and watched with
``job`` to the same answer, one cancelled half-way with ``cancel``, and the server's exit
(stdin closed, SIGTERM) stopping its jobs: no process left, the partial result kept."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
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
    assert set(tools) == {"run", "reduce", "extract", "verify", "ablate", "check", "versions", "job", "cancel"}
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


def assert_reduced(answer: dict, out: Path) -> None:
    """What a reduction of the fixture answers, waited for or watched as a job."""
    assert answer["output"] == str(out) and answer["text"] == out.read_text()
    assert answer["tokens_after"] < answer["tokens_before"] == ORIGINAL_TOKENS
    assert answer["report"] and Path(answer["report"]).is_file()
    assert answer["extracted"]["text"] and "cross_entropy" in answer["extracted"]["text"]
    assert answer["signature"]["type"] == "IndexError"
    assert answer["exit_code"] == 0


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
            "script": str(FIXTURE.path), "keep_error": KEEP, "output": str(out), "max_time": 45, "ablate": False,
        }, progress_callback=progress))

    answer = serve(tmp_path, session)
    assert tree_digest(FIXTURE.dir) == before
    assert_reduced(answer, out)
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


# -- jobs: start, watch, cancel (issue 56) ------------------------------------------------
def the_server() -> psutil.Process:
    """The server this test's client started (its child running ``shrinkgpu mcp``)."""
    [found] = [p for p in psutil.Process().children() if p.cmdline()[-3:] == ["-m", "shrinkgpu", "mcp"]]
    return found


def tree(process: psutil.Process) -> list[int]:
    """The process and all its descendants."""
    return [process.pid, *(p.pid for p in process.children(recursive=True))]


def gone(pids: list[int], within: float) -> list[int]:
    """Those of ``pids`` still running after ``within`` seconds (zombies count as gone)."""
    deadline = time.monotonic() + within
    while True:
        left = [p for p in pids if psutil.pid_exists(p) and _running(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class Watch:
    """``job`` called as an agent calls it: with the last cursor and ``wait_s``, each call
    timed; the views seen."""

    def __init__(self, client, start: dict):
        assert not start.get("result") and start["state"] == "running", start
        self.client = client
        self.view = start
        self.views = [start]
        self.times: list[float] = []

    async def until(self, done, text: bool = False) -> dict:
        with anyio.fail_after(600):
            while not done(self.view):
                begun = time.monotonic()
                self.view = structured(await self.client.call_tool("job", {
                    "job_id": self.view["job"], "wait_s": 25, "cursor": self.view["cursor"], "text": text}))
                self.times.append(time.monotonic() - begun)
                self.views.append(self.view)
        return self.view

    async def smaller(self) -> dict:
        """Until the search has accepted a program smaller than the original."""
        return await self.until(lambda v: (v["progress"]["best_tokens"] or ORIGINAL_TOKENS) < ORIGINAL_TOKENS
                                or v["state"] != "running", text=True)


async def started(client, **arguments) -> dict:
    begun = time.monotonic()
    start = structured(await client.call_tool("reduce", {"script": str(FIXTURE.path), "keep_error": KEEP,
                                                         "wait": False, **arguments}))
    assert time.monotonic() - begun < 10
    return start


@pytest.mark.slow
def test_a_reduction_started_without_waiting_is_watched_to_the_waiting_calls_answer(tmp_path):
    before = tree_digest(FIXTURE.dir)
    out = tmp_path / "out" / "train.min.py"
    out.parent.mkdir()

    async def session(client):
        watch = Watch(client, await started(client, output=str(out), max_tests=40, ablate=False))
        smaller = await watch.smaller()
        over = await watch.until(lambda v: v["state"] != "running")
        return watch, smaller, over

    watch, smaller, over = serve(tmp_path, session)
    assert max(watch.times) < 30, watch.times  # every call short
    assert over["state"] == "done", over
    assert_reduced(over["result"], out)  # what the waiting call answers
    assert tree_digest(FIXTURE.dir) == before
    phases = [v["progress"]["phase"] for v in watch.views]
    # (the phase may say more after it, e.g. that --max-time bounds this run too)
    assert any(p.startswith("running the original in a fresh interpreter") for p in phases), phases
    # the best program so far, on request: the size it is said to have
    best = smaller["progress"]
    assert best["best_tokens"] < ORIGINAL_TOKENS == best["start_tokens"]
    assert count_tokens(best["text"]) == best["best_tokens"]


@pytest.mark.slow
def test_a_job_cancelled_half_way_keeps_its_partial_result_and_leaves_no_process(tmp_path):
    out = tmp_path / "out" / "train.min.py"
    out.parent.mkdir()
    processes: list[int] = []

    async def session(client):
        watch = Watch(client, await started(client, output=str(out), max_time=600))
        smaller = await watch.smaller()
        assert smaller["state"] == "running", smaller
        processes.extend(tree(the_server()))  # the server, the reduction, its fork server, candidates
        begun = time.monotonic()
        cancelling = structured(await client.call_tool("cancel", {"job_id": smaller["job"]}))
        assert time.monotonic() - begun < 10
        watch.view = cancelling
        over = await watch.until(lambda v: v["state"] != "running")
        return smaller, cancelling, over, watch

    smaller, cancelling, over, watch = serve(tmp_path, session)
    assert max(watch.times, default=0) < 30
    assert over["state"] == "cancelled", over
    result = over["result"]
    assert result["stop_reason"] == "interrupted" and result["stopped_early"] is True
    assert result["exit_code"] == 130
    # written by the interrupted reduction itself, marked partial: the best so far or one found after it
    assert result["text"] == out.read_text()
    assert result["text"].startswith(f"{PARTIAL_MARK} (stopped: interrupted)"), result["text"][:200]
    assert count_tokens(result["text"]) <= smaller["progress"]["best_tokens"] < ORIGINAL_TOKENS
    assert "stopped early: interrupted" in Path(result["report"]).read_text()
    assert len(processes) >= 3
    assert not gone(processes, within=30)


@pytest.mark.slow
def test_the_servers_exit_stops_its_reduction_and_keeps_its_partial_result(tmp_path):
    """The client closes the server's stdin (an agent's session ends) while a job runs."""
    out = tmp_path / "out" / "train.min.py"
    out.parent.mkdir()
    processes: list[int] = []

    async def session(client):
        smaller = await Watch(client, await started(client, output=str(out), max_time=600)).smaller()
        assert smaller["state"] == "running", smaller
        processes.extend(tree(the_server()))
        return smaller

    smaller = serve(tmp_path, session)
    assert not gone(processes, within=30)
    text = out.read_text()
    assert text.startswith(f"{PARTIAL_MARK} (stopped: interrupted)"), text[:200]
    assert count_tokens(text) <= smaller["progress"]["best_tokens"] < ORIGINAL_TOKENS
    assert "stopped early: interrupted" in out.with_name("train.min.md").read_text()


SLEEPER = "import time\ntime.sleep(300)\n"


def a_sleeping_run(tmp_path: Path, stop) -> tuple[list[int], dict]:
    """A ``run`` job of a script that sleeps, started without waiting; ``stop(server)``
    ends the server while it runs. The processes there were, and the job's view."""
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    processes: list[int] = []

    async def session(client):
        start = structured(await client.call_tool("run", {"script": str(script), "wait": False}))
        server = the_server()
        with anyio.fail_after(120):
            # (the script runs in a fresh interpreter that runs the probe)
            while not any("shrinkgpu.worker.probe" in " ".join(p.cmdline()) for p in server.children(recursive=True)
                          if _running(p.pid)):
                await anyio.sleep(0.2)
        processes.extend(tree(server))
        view = structured(await client.call_tool("job", {"job_id": start["job"]}))
        stop(server)
        return view

    return processes, serve(tmp_path, session)


def test_closing_the_servers_stdin_stops_its_running_jobs(tmp_path):
    processes, view = a_sleeping_run(tmp_path, lambda server: None)  # the client's exit closes stdin
    assert view["state"] == "running"
    assert len(processes) >= 4  # the server, the run command, its supervisor, the script's interpreter
    assert not gone(processes, within=30)


def test_sigterm_to_the_server_stops_its_running_jobs(tmp_path):
    def terminate(server):
        server.send_signal(signal.SIGTERM)
        server.wait(30)  # exits by itself, before the client closes anything

    processes, view = a_sleeping_run(tmp_path, terminate)
    assert view["state"] == "running"
    assert not gone(processes, within=30)
