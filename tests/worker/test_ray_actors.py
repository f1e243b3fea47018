"""ray_actors.py: what a candidate ships (the run directory against the template it links
from), paths moved to a node's and back, the clear message without Ray; then, on a real
local Ray cluster started here (two nodes on the loopback, a CPU and a logical GPU each,
no dashboard; one for the module, shut down at its end), candidates run by actors as the
local fork server runs them, a watch's outputs brought back, an actor killed or a node
removed mid-run losing nothing, a candidate that kills its worker twice counted as its
crash, and no actor left after ``close()``; and a reduction of a fixture through Ray
writing what the local executor writes though a worker is killed in the middle.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import interruptible, load_fixture
from shrinkgpu.reducer import ReduceConfig, reduce
from shrinkgpu.worker import (
    Isolation,
    RayCluster,
    RayExecutor,
    RayOptions,
    RayUnavailable,
    Runner,
    Sandbox,
    ScriptSpec,
    Watch,
)
from shrinkgpu.worker.protocol import RunStatus
from shrinkgpu.worker.ray_actors import RAY_MISSING, check_shipment, differences, snapshot_of, swap

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
       "CUDA_VISIBLE_DEVICES": "7"}

SCRIPT = textwrap.dedent("""\
    import os, sys
    import helper
    print(open("data.txt").read().strip(), sys.argv[1:], helper.VALUE)
    print("gpu", os.environ.get("CUDA_VISIBLE_DEVICES"), "cwd", os.getcwd())
    raise IndexError("Target 4 is out of bounds.")
    """)


def make_project(root: Path) -> ScriptSpec:
    (root / "work").mkdir(parents=True)
    (root / "s.py").write_text(SCRIPT)
    (root / "helper.py").write_text("VALUE = 41\n")
    (root / "work" / "data.txt").write_text("rows\n")
    return ScriptSpec(script=root / "s.py", args=("--n", "2"), cwd=root / "work", env=ENV, argv0="../s.py")


# -- without a cluster ----------------------------------------------------------------------------
def test_a_run_ships_its_program_files_and_what_it_lacks_never_the_linked_template(tmp_path):
    make_project(tmp_path / "user")
    with Sandbox(tmp_path / "user") as sandbox:
        first = sandbox.prepare({"s.py": "print(1)\n"}, omit={"s.py", "helper.py"})
        snap, ids = snapshot_of(first.root)
        assert snap.files == {"work/data.txt": b"rows\n"}  # the program files are never the snapshot's
        assert snap.dirs == ("work",)
        second = sandbox.prepare({"s.py": "print(2)\n", "helper.py": "VALUE = 1\n"}, omit={"s.py", "helper.py"})
        assert differences(second.root, ids) == ({"s.py": b"print(2)\n", "helper.py": b"VALUE = 1\n"}, ())
        (second.root / "work" / "data.txt").unlink()
        assert differences(second.root, ids) == ({"s.py": b"print(2)\n", "helper.py": b"VALUE = 1\n"},
                                                ("work/data.txt",))


def test_a_directory_too_large_to_ship_is_refused_with_its_largest_entries(tmp_path):
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "shard0.bin").write_bytes(b"x" * 3000)
    (tmp_path / "data" / "shard1.bin").write_bytes(b"x" * 3000)
    (tmp_path / "ckpt.pt").write_bytes(b"x" * 2000)
    check_shipment(tmp_path, limit=10_000)  # 8,010 bytes: shipped
    (tmp_path / "data" / "shard2.bin").write_bytes(b"x" * 3000)
    with pytest.raises(RayUnavailable) as refused:
        check_shipment(tmp_path, limit=10_000)
    message = str(refused.value)
    # the largest first, by top-level entry: what to move out or link in
    assert "its largest entries: data (0 MiB), ckpt.pt (0 MiB), train.py (0 MiB)" in message
    assert "symlink is shipped as the link" in message and "--root" in message
    # a linked data directory is shipped as the link, whatever it holds
    (tmp_path / "data").rename(tmp_path / "elsewhere")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "train.py").write_text("print(1)\n")
    (linked / "data").symlink_to(tmp_path / "elsewhere")
    check_shipment(linked, limit=10_000)


def test_paths_are_swapped_inside_strings_dicts_tuples_and_dataclasses_but_enums_stay():
    watch = Watch(written="/drv/scratch/w")
    moved = swap({"a": ("/drv/run-1/root/x", RunStatus.OK), "w": watch, "t": "File /drv/run-1/tmp-3/y"},
                 [("/drv/run-1/tmp-3", "/node/run-9/tmp-0"), ("/drv/run-1", "/node/run-9"),
                  ("/drv/scratch/w", "/node/out/0-w")])
    assert moved == {"a": ("/node/run-9/root/x", RunStatus.OK), "w": Watch(written="/node/out/0-w"),
                     "t": "File /node/run-9/tmp-0/y"}
    assert moved["a"][1] is RunStatus.OK


def test_the_local_executor_never_imports_ray():
    code = "import sys, shrinkgpu.cli, shrinkgpu.reducer, shrinkgpu.worker; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_without_ray_the_ray_executor_says_how_to_install_it(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from shrinkgpu.cli import cli

    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray imports
    with pytest.raises(RayUnavailable, match="pip install 'shrinkgpu\\[ray\\]'"):
        RayCluster()
    (tmp_path / "s.py").write_text("raise IndexError('x')\n")
    result = CliRunner().invoke(cli, ["reduce", "--executor", "ray", "-k", "x", str(tmp_path / "s.py")])
    assert result.exit_code == 2
    assert RAY_MISSING in result.output


def test_the_cluster_options_need_the_ray_executor(tmp_path):
    from click.testing import CliRunner

    from shrinkgpu.cli import cli

    (tmp_path / "s.py").write_text("raise IndexError('x')\n")
    result = CliRunner().invoke(cli, ["reduce", "--address", "local", "-k", "x", str(tmp_path / "s.py")])
    assert result.exit_code == 2
    assert "--address is for --executor ray; without it the candidates run on this machine" in result.output
    # the sizes of a worker too: given without Ray they would size nothing
    result = CliRunner().invoke(cli, ["reduce", "--cpus-per-worker", "4", "--gpus-per-worker", "0.5", "-k", "x",
                                      str(tmp_path / "s.py")])
    assert result.exit_code == 2
    assert "--gpus-per-worker and --cpus-per-worker are for --executor ray" in result.output
    assert not (tmp_path / "s.min.py").exists()


# -- on a local cluster ---------------------------------------------------------------------------
# Read by Ray when it is imported: its nodes then take the loopback address (Ray's own
# switch for the single-machine clusters of macOS and Windows), never this machine's
# network interface.
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@pytest.fixture(scope="module")
def ray_nodes():
    """Two nodes on this machine, one CPU and one logical GPU each, and this process
    connected to them: one worker per node."""
    previous = os.environ.get(LOOPBACK_ONLY)
    os.environ[LOOPBACK_ONLY] = "0"
    try:
        ray = pytest.importorskip("ray")
        from ray.cluster_utils import Cluster

        if ray.is_initialized():
            pytest.skip("a Ray connection is already open in this process")
        cluster = Cluster(initialize_head=True,
                          head_node_args={"num_cpus": 1, "num_gpus": 1, "include_dashboard": False})
        try:
            cluster.add_node(num_cpus=1, num_gpus=1)
            ray.init(address=cluster.address, log_to_driver=False)
            cluster.wait_for_nodes()
            assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}, "a node left the loopback"
            yield cluster
        finally:
            ray.shutdown()
            cluster.shutdown()
    finally:
        if previous is None:
            os.environ.pop(LOOPBACK_ONLY, None)
        else:
            os.environ[LOOPBACK_ONLY] = previous


@pytest.fixture
def ray_cluster(ray_nodes):
    import ray

    return ray


def all_released(ray, within: float = 10.0) -> bool:
    """Whether every actor gave its CPU and GPU back (the state API needs a dashboard)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        free, total = ray.available_resources(), ray.cluster_resources()
        if all(free.get(k, 0) == total.get(k, 0) for k in ("CPU", "GPU")):
            return True
        time.sleep(0.2)
    return False


def test_actors_run_candidates_as_the_local_fork_server_does(ray_cluster, tmp_path):
    spec = make_project(tmp_path / "user")
    files = {"s.py": SCRIPT, "helper.py": "VALUE = 41\n"}
    with Runner(spec, program_files=["helper.py"], isolation=Isolation.FORK) as local:
        local.start([])
        expected = local.run(files, timeout=20)
    cluster, made = RayCluster(RayOptions(workers=2)), []

    def executors(isolation, settings):
        made.append(cluster(isolation, settings))
        return made[-1]

    with Runner(spec, program_files=["helper.py"], isolation=Isolation.FORK, executors=executors) as runner:
        report = runner.start([])
        assert report.isolation is Isolation.FORK and not report.note  # a note would say it fell back
        assert len(made[0].nodes) == 2  # a worker on each node, each with its copy of the directory
        runs = runner.run_all([(files, {})] * 4 + [({"s.py": SCRIPT}, {})], timeout=20)
        session = runner.sandbox.session
        assert not all_released(ray_cluster, within=0.5)  # the actors hold their GPUs while they live
    assert all_released(ray_cluster)
    assert expected.signature is not None
    for obs in runs[:4]:
        assert obs.status is RunStatus.EXCEPTION and obs.signature == expected.signature, obs.describe()
        assert "rows ['--n', '2'] 41" in obs.stdout
        # the cwd the script saw is said with the driver's paths, as the local run's is
        assert f"cwd {session}/run-" in obs.stdout and obs.stdout.rstrip().endswith("/root/work")
    # each actor's candidates see the GPU Ray gave it, never the reducer's own pin
    assert {line.split()[1] for obs in runs[:4] for line in obs.stdout.splitlines() if line.startswith("gpu")} \
        <= {"0", "1"}
    # a candidate without helper.py has none on the node either
    assert runs[4].signature is not None and runs[4].signature.type == "ModuleNotFoundError"


def test_warm_caches_reach_the_node_and_what_a_watch_saves_there_comes_back(ray_cluster, tmp_path):
    spec = make_project(tmp_path / "user")
    warm = tmp_path / "warm"
    (warm / "torchinductor").mkdir(parents=True)
    (warm / "torchinductor" / "entry.txt").write_text("compiled before")
    text = SCRIPT.replace("raise IndexError", textwrap.dedent("""\
        print("cache", open(os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "entry.txt")).read())
        open('out.txt', 'w').write('made on the node')
        raise IndexError"""))
    kept = tmp_path / "kept"
    with Runner(spec, isolation=Isolation.FORK, executors=RayCluster(RayOptions(workers=1))) as runner:
        runner.start([])
        runner.use_warm_caches(warm)
        obs = runner.run({"s.py": text}, timeout=20, watch=Watch(written=str(kept)))
    assert "cache compiled before" in obs.stdout, obs.describe()
    assert obs.written is not None and obs.written["files"] == ["out.txt"], obs.written
    copies = [p for p in kept.rglob("out.txt")]
    assert [p.read_text() for p in copies] == ["made on the node"]
    assert all_released(ray_cluster)


def test_an_actor_killed_mid_run_loses_no_candidate_and_none_is_left(ray_cluster, tmp_path):
    spec = make_project(tmp_path / "user")
    slow = SCRIPT.replace("import helper", "import helper, time\ntime.sleep(1.5)")
    executor_of = {}

    def factory(isolation, settings):
        executor_of[isolation] = RayCluster(RayOptions(workers=2))(isolation, settings)
        return executor_of[isolation]

    with Runner(spec, isolation=Isolation.FORK, executors=factory) as runner:
        runner.start([])
        futures = [runner.submit({"s.py": slow.replace("Target 4", f"Target {i}")}, timeout=30) for i in range(3)]
        time.sleep(1.0)  # both actors are inside a candidate
        victim = executor_of[Isolation.FORK].actors[0]
        ray_cluster.kill(victim, no_restart=False)  # as a crash: Ray restarts it
        runs = [f.result(timeout=90) for f in futures]
        assert runner.alive
    assert [o.signature.message if o.signature else o.describe() for o in runs] == \
        [f"Target {i} is out of bounds." for i in range(3)]
    assert all_released(ray_cluster)


def test_a_node_removed_mid_run_loses_no_candidate_and_leaves_no_actor(ray_nodes, ray_cluster, tmp_path):
    spec = make_project(tmp_path / "user")
    slow = SCRIPT.replace("import helper", "import helper, time\ntime.sleep(1.5)")
    try:
        with Runner(spec, isolation=Isolation.FORK, executors=RayCluster(RayOptions(workers=2))) as runner:
            runner.start([])
            futures = [runner.submit({"s.py": slow.replace("Target 4", f"Target {i}")}, timeout=30)
                       for i in range(4)]
            time.sleep(1.0)  # a candidate on each node
            gone = next(iter(ray_nodes.worker_nodes))
            ray_nodes.remove_node(gone)
            runs = [f.result(timeout=120) for f in futures]
            assert runner.alive  # the head's worker goes on alone
            # and it is said: which node, when, how many candidates ran again
            lost = runner.placement().lost
            assert [x["node"] for x in lost] == [gone.node_id] and lost[0]["reran"] >= 1
            assert "its node left the cluster" in runner.placement().lost_text()
        assert [o.signature.message if o.signature else o.describe() for o in runs] == \
            [f"Target {i} is out of bounds." for i in range(4)]
        # the lost worker, waiting for a node with a GPU free, was killed with the others
        assert all_released(ray_cluster), (ray_cluster.available_resources(), ray_cluster.cluster_resources())
    finally:
        ray_nodes.add_node(num_cpus=1, num_gpus=1)
        ray_nodes.wait_for_nodes()


def test_a_node_lost_during_a_reduction_keeps_stdout_one_json_object_and_is_named(ray_nodes, ray_cluster, tmp_path):
    # Ray's driver prints a lost node's raylet log on stdout from a thread of its own: under
    # --json that would come before the JSON object, and an agent reading it fails.
    import json
    import subprocess
    import sys
    import threading

    script = tmp_path / "s.py"
    # (the sleep is the bug's: every candidate takes a second, and the search lasts)
    script.write_text("import time\nt = time.time()\ntime.sleep(1.0)\n" + "".join(f"v{i} = {i}\n" for i in range(12))
                      + "if time.time() - t > 0.5:\n    raise IndexError('Target 4 is out of bounds.')\n")
    gone = next(iter(ray_nodes.worker_nodes))
    proc = subprocess.Popen(
        [sys.executable, "-m", "shrinkgpu", "reduce", "--executor", "ray", "--address", ray_nodes.address,
         "--workers", "2", "-k", "Target 4", "--json", "--no-extract", "--no-ablate", "--verify", "1",
         "--confirm", "0", str(script)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    searching, err = threading.Event(), []

    def read_stderr():
        for line in proc.stderr:
            err.append(line)
            if "reducing" in line:
                searching.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert searching.wait(120), "".join(err)
        time.sleep(1.5)  # a candidate on each node
        ray_nodes.remove_node(gone)
        out, _ = proc.communicate(timeout=300)
        reader.join(10)
        assert proc.returncode == 0, "".join(err)
        summary = json.loads(out)  # the whole of stdout, nothing before or after
        assert [x["node"] for x in summary["lost"]] == [gone.node_id], "".join(err)
        report = (tmp_path / "s.min.md").read_text()
        assert f"a worker on node {gone.node_id} was lost" in report
        assert any("the cluster lost workers during the search" in n for n in summary["notes"])
    finally:
        if proc.poll() is None:
            proc.kill()
        ray_nodes.add_node(num_cpus=1, num_gpus=1)
        ray_nodes.wait_for_nodes()


def test_a_candidate_that_kills_its_worker_twice_is_its_own_crash(ray_cluster, tmp_path):
    spec = make_project(tmp_path / "user")
    marker = tmp_path / "killed-once"
    # the candidate's parent is its fork server; the server's parent is the actor
    kill = textwrap.dedent(f"""\
        import os, signal, psutil
        marker = {str(marker)!r}
        if {{once}} and os.path.exists(marker):
            raise IndexError("Target 4 is out of bounds.")
        open(marker, "a").close()
        os.kill(psutil.Process(os.getppid()).ppid(), signal.SIGKILL)
        """)
    with Runner(spec, isolation=Isolation.FORK, executors=RayCluster(RayOptions(workers=2))) as runner:
        runner.start([])
        once = runner.run({"s.py": kill.format(once=True)}, timeout=30)
        twice = runner.run({"s.py": kill.format(once=False)}, timeout=30)
        after = runner.run({"s.py": SCRIPT}, timeout=30)
    assert once.signature is not None and once.signature.message == "Target 4 is out of bounds."
    assert twice.status is RunStatus.SIGNAL and twice.infra_error is None
    assert "died, 2 times" in twice.stderr
    assert after.signature is not None and after.signature.type == "IndexError"  # the workers were restarted
    assert all_released(ray_cluster)


def test_the_command_line_reduces_on_the_cluster_it_is_connected_to_and_leaves_it_running(ray_cluster, tmp_path):
    import json

    from click.testing import CliRunner

    from shrinkgpu.cli import cli

    script = tmp_path / "s.py"
    script.write_text("import os\nrows = [1, 2, 3]\nname = os.sep\nraise IndexError('Target 4 is out of bounds.')\n")
    result = CliRunner().invoke(cli, ["reduce", "--executor", "ray", "--workers", "2", "-k", "Target 4", "--json",
                                      "--no-extract", "--no-ablate", "--verify", "1", "--confirm", "0",
                                      str(script)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{"):])
    assert any(n.startswith("--executor ray: candidates on 2 Ray worker(s), 2 at once") for n in summary["notes"])
    # the batches are as wide as the workers; one worker per node (each asks for its GPU)
    assert summary["executor"] == "ray" and summary["workers"] == 2 and summary["jobs"] == 2
    assert len(summary["nodes"]) == 2
    assert set(summary["speculation"]) == {"unused_runs", "share"}
    assert (tmp_path / "s.min.py").read_text().strip() == "raise IndexError('Target 4 is out of bounds.')"
    assert ray_cluster.is_initialized()  # a connection it did not open is not its to close
    assert all_released(ray_cluster)


# The thresholds that read the clock (a loop's share of the original's time, a long
# original's saved state): set out of reach, as evaluation/pinned.py does, so that the two
# reductions decide alike whatever the load of the machine beside them.
CLOCK_THRESHOLDS = (
    ("shrinkgpu.reducer.facts", "HOT_SHARE"),
    ("shrinkgpu.reducer.state", "LONG_RUN"),
)


@pytest.mark.slow
def test_a_reduction_through_ray_writes_what_the_local_executor_writes_though_a_worker_dies(ray_cluster, tmp_path,
                                                                                             monkeypatch):
    for module, name in CLOCK_THRESHOLDS:
        m = importlib.import_module(module)
        if hasattr(m, name):
            monkeypatch.setattr(m, name, 1e12)
    fx = load_fixture("view_noncontig")
    before = {p: p.read_bytes() for p in fx.dir.rglob("*") if p.is_file()}

    def reduced(where: str, executors=None):
        out = tmp_path / where / "har_train.min.py"
        out.parent.mkdir()
        # A test budget, a hash seed and two candidates at once: the same search wherever it runs.
        config = ReduceConfig(script=fx.path, args=fx.args, keep_error=fx.keep_error, output=out, cwd=fx.dir,
                              env={**os.environ}, jobs=2, max_tests=120, hash_seed=1, verify_runs=1, confirm=0,
                              extract=False, ablate=False, cut_library=False, save_objects=False,
                              observed_sizes=False, replay_state=False)
        result = reduce(config) if executors is None else reduce(config, executors=executors)
        return result, out.read_text()

    local, local_text = reduced("local")
    cluster, made, killed = RayCluster(RayOptions(workers=2)), [], []

    def executors(isolation, settings):
        made.append(cluster(isolation, settings))
        return made[-1]

    def kill_a_worker_mid_search():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            workers = [e for e in made if isinstance(e, RayExecutor) and e.nodes and e.actors]
            if workers:
                time.sleep(2.0)  # the search is under way
                ray_cluster.kill(workers[0].actors[0], no_restart=False)  # as a crash: Ray restarts it
                killed.append(True)
            time.sleep(0.1)

    killer = threading.Thread(target=kill_a_worker_mid_search, daemon=True)
    killer.start()
    remote, remote_text = reduced("ray", executors)
    killer.join()
    assert killed, "no worker was killed"
    assert remote.isolation is Isolation.FORK
    assert remote.placement.executor == "ray" and local.placement.executor == "local"
    # a candidate lost with its worker would have been an infrastructure failure, and the
    # search would have gone another way
    assert remote.candidates_tested == local.candidates_tested
    assert remote.signature == local.signature
    assert remote_text == local_text and remote.tokens_after < remote.tokens_before
    assert {p: p.read_bytes() for p in fx.dir.rglob("*") if p.is_file()} == before
    assert all_released(ray_cluster)


def test_the_driver_interrupted_writes_the_best_result_and_leaves_nothing_in_the_cluster(ray_nodes, ray_cluster,
                                                                                          tmp_path):
    import json
    import signal

    script = tmp_path / "slow.py"
    script.write_text("import torch\nprint('noise')\na0 = 5\n"
                      + "".join(f"a{i} = a{i - 1} + 1\n" for i in range(1, 120))
                      + "torch.gather(torch.zeros(2, 3), 1, torch.tensor([[a119], [0]]))\n")
    proc, lines = interruptible([sys.executable, "-m", "shrinkgpu", "reduce", "--executor", "ray", "--address",
                                 ray_nodes.address, "--workers", "2", "-k", "index 124 is out of bounds", "--json",
                                 "--no-extract", "--no-ablate", script.name], tmp_path)
    # interrupted as the search starts: the actors are taking its first candidates
    deadline = time.time() + 300
    while time.time() < deadline and not any("reducing" in line for line in lines) and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout = proc.stdout.read()
    proc.wait(timeout=120)
    assert proc.returncode == 130, "".join(lines)
    data = json.loads(stdout)
    result = tmp_path / "slow.min.py"
    if data.get("error"):  # nothing smaller found yet: nothing written, as on this machine
        assert "interrupted" in data["error"] and not result.exists()
    else:  # the best so far (the original, if the search had accepted nothing yet), written
        assert data["stop_reason"] == "interrupted" and data["executor"] == "ray"
        assert result.exists() and data["tokens_after"] <= data["tokens_before"]
    # every actor of the reduction killed: the cluster has all its CPUs and GPUs back
    assert all_released(ray_cluster, within=30.0)
