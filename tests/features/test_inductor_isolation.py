"""torch.compile with the Inductor backend in forked candidates (issue 23, item 4): each
run compiles into caches of its own (from nothing, or from a copy of the original's), and no
compile worker outlives it.
Real Inductor on the CPU: it needs a C++ compiler (.ci/run installs one)."""

from __future__ import annotations

import json
import shutil
import textwrap
import time

import psutil
import pytest

from shrinkgpu.worker import Isolation, Runner, ScriptSpec, Watch

pytestmark = pytest.mark.skipif(
    not (shutil.which("g++") or shutil.which("c++")), reason="Inductor on the CPU needs a C++ compiler"
)

COMPILED = textwrap.dedent("""\
    import json, os
    import torch
    from torch._dynamo.utils import counters
    from torch._inductor import config

    config.compile_threads = 2  # a pool of compile workers, as on a user's machine

    def f(x):
        return (x.sin() * 2 + 1).sum(dim=0)

    torch.compile(f, backend="inductor")(torch.ones(8, 4))
    # Inductor's pool of compile worker processes (on a GPU it compiles Triton kernels
    # there; on the CPU it starts it when asked): started, and left running at exit
    from torch._inductor.async_compile import AsyncCompile
    AsyncCompile.process_pool().submit(AsyncCompile._get_ready).result(timeout=120)
    cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    files = sorted(os.path.relpath(os.path.join(d, n), cache) for d, _, ns in os.walk(cache) for n in ns)
    workers = [p.pid for p in __import__("psutil").Process().children(recursive=True)]
    raise SystemExit(json.dumps({
        "cache": cache, "files": files, "workers": workers,
        "hits": counters["inductor"]["fxgraph_cache_hit"], "misses": counters["inductor"]["fxgraph_cache_miss"],
    }))
    """)


@pytest.fixture(scope="module")
def inductor_runner(tmp_path_factory):
    root = tmp_path_factory.mktemp("inductor")
    (root / "s.py").write_text("pass\n")
    runner = Runner(ScriptSpec(script=root / "s.py", cwd=root), isolation=Isolation.FORK)
    runner.start(["torch"])
    yield runner
    runner.close()


def test_two_candidates_compiled_with_inductor_share_no_cache_artifact_and_leave_no_worker(inductor_runner, tmp_path):
    from shrinkgpu.worker import cache_bytes, compile_caches

    def facts(obs):
        assert obs.signature is not None and obs.signature.type == "SystemExit", obs.stderr[-3000:]
        return json.loads(obs.signature.message)

    # the first leaves its caches where it is told (the calibration run that fills the
    # caches candidates start from), the second in its own directory
    template = tmp_path / "caches"
    first = facts(inductor_runner.run({"s.py": COMPILED}, timeout=240, env=compile_caches(template)))
    second = facts(inductor_runner.run({"s.py": COMPILED}, timeout=240, watch=Watch()))
    assert first["cache"] == str(template / "torchinductor") and second["cache"] != first["cache"]
    # each compiled the graph itself: a miss and no hit, the artifacts in its own cache
    assert (first["hits"], second["hits"]) == (0, 0)
    assert first["misses"] >= 1 and second["misses"] >= 1
    assert any(name.endswith(".so") for name in first["files"]), first["files"]
    assert any(name.endswith(".so") for name in second["files"]), second["files"]
    # the second run's cache went with it, and so did every process either started
    assert not __import__("os").path.exists(second["cache"])
    deadline = time.monotonic() + 5
    assert first["workers"] and second["workers"]  # the pool was running when each run ended
    alive = [pid for pid in first["workers"] + second["workers"] if psutil.pid_exists(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [pid for pid in alive if psutil.pid_exists(pid)
                 and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert alive == []

    # With warm caches a run starts with a copy of them in its own directory, and finds
    # the graph compiled; what it writes there never reaches the next run's start.  (That
    # a run asked to be fresh starts without them: tests/reducer/test_session.py.)
    before = cache_bytes(template)
    inductor_runner.use_warm_caches(template)
    try:
        warm = facts(inductor_runner.run({"s.py": COMPILED}, timeout=240))
    finally:
        inductor_runner.use_warm_caches(None)
    assert warm["cache"] not in (first["cache"], second["cache"])
    assert (warm["hits"], warm["misses"]) == (1, 0)
    assert cache_bytes(template) == before
