"""versions/run.py and ``shrinkgpu versions``: a script and a case file judged across
versions of a library built on the spot (a real uv, real fresh interpreters), the
bisection's boundary, the table in the report and in ``--json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from shrinkgpu.versions import Cache, Verdict, VersionsConfig, VersionsError, envs, versions
from shrinkgpu.versions.index import Indexes
from shrinkgpu.versions.run import also_changed, requests_for

from .wheels import lib_source, make_wheel

pytestmark = pytest.mark.skipif(envs.uv_binary() is None, reason="uv is not installed (pip install uv)")
RELEASES = ("1.0", "1.1", "1.2", "1.3", "2.0")
SCRIPT = "import demo\n\nprint(demo.scale([1, 2]))\n"
KEEP = "takes a factor keyword"


@pytest.fixture
def project(tmp_path):
    """A script that fails with the user's demo 2.0 (scale() changed in 1.2), the
    releases in a find-links directory, and the user's copy on the runs' PYTHONPATH."""
    links = tmp_path / "links"
    for version in RELEASES:
        make_wheel(links, "demo", version, lib_source(version, breaks_at="1.2"))
    users = tmp_path / "users-site"
    users.mkdir()
    (users / "demo.py").write_text(lib_source("2.0", breaks_at="1.2"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(users)}
    return work, links, env


def config(project, tmp_path, **kw) -> VersionsConfig:
    work, links, env = project
    return VersionsConfig(script=work / "train.py", keep_error=KEEP, cwd=work, env=env,
                          cache=Cache(tmp_path / "cache"), indexes=Indexes(no_index=True, find_links=(str(links),)),
                          runs=1, **kw)


def test_a_range_is_bisected_to_the_release_that_broke_it(project, tmp_path):
    answer = versions(config(project, tmp_path, span=("demo", "1.0..2.0")))
    assert answer.boundary == ("1.1", "1.2")
    assert answer.sentence == "fails the same way since demo 1.2; passes on 1.1"
    judged = {r.version: r.minimal.verdict for r in answer.rows}
    assert judged["1.1"] is Verdict.PASSES and judged["1.2"] is Verdict.SAME
    assert len(answer.rows) <= 2 + 2  # both ends, then log2 of the 4 steps between
    assert [r.version for r in answer.rows] == sorted(judged)  # oldest first
    assert answer.to_json()["environments_built"] == len(answer.rows)
    # a second call over the same versions builds nothing
    again = versions(config(project, tmp_path, span=("demo", "1.0..2.0")))
    assert again.sentence == answer.sentence
    assert all(r.environment.reused for r in again.rows) and again.to_json()["environments_built"] == 0


def test_tries_say_each_version_and_one_that_cannot_be_installed(project, tmp_path):
    answer = versions(config(project, tmp_path, tries=("demo==1.0", "demo==1.3", "demo==7.0")))
    assert [(r.version, r.minimal.verdict) for r in answer.rows] == [
        ("1.0", Verdict.PASSES), ("1.3", Verdict.SAME), ("7.0", Verdict.NOT_INSTALLED)]
    assert "demo==7.0" in answer.rows[2].minimal.detail and answer.rows[2].environment is None
    assert answer.sentence == ("passes with demo 1.0; fails the same way with demo 1.3; "
                               "could not be installed with demo 7.0")


def test_another_error_is_said_with_its_class_and_message(project, tmp_path):
    work, links, env = project
    make_wheel(links, "demo", "3.0", "def scale(xs):\n    raise KeyError('gone')\n")
    answer = versions(config(project, tmp_path, tries=("demo==3.0",)))
    assert answer.rows[0].minimal.verdict is Verdict.OTHER
    assert answer.rows[0].minimal.detail == "KeyError: 'gone'"


def test_nightlies_are_refused_where_no_configured_index_serves_them(project, tmp_path):
    with pytest.raises(VersionsError, match="no index that pip is configured with serves demo nightlies"):
        versions(config(project, tmp_path, span=("demo", "nightly:2026-09-01..2026-10-15")))


def test_nightlies_by_date_where_the_index_serves_them(project, tmp_path):
    work, links, env = project
    for day in ("20260901", "20260905", "20261101"):
        make_wheel(links, "demo", f"2.1.0.dev{day}", lib_source("1.0" if day == "20260901" else "2.0", "1.2"))
    answer = versions(config(project, tmp_path, span=("demo", "nightly:2026-09-01..2026-10-15")))
    assert answer.sentence == "fails the same way since demo 2.1.0.dev20260905; passes on 2.1.0.dev20260901"


def test_the_cli_prints_one_json_object_and_writes_the_table_into_the_report(project, tmp_path):
    work, links, env = project
    from shrinkgpu.reducer import ReduceConfig, reduce

    result = reduce(ReduceConfig(script=work / "train.py", cwd=work, keep_error=KEEP, env=env, verify_runs=1,
                                 ablate=False, extract=False))
    case = result.output.with_suffix(".json")
    assert case.is_file() and result.report.is_file()
    before = {p.name: p.read_bytes() for p in work.iterdir() if p.suffix == ".py"}
    run_env = {**env, "SHRINKGPU_VERSIONS_CACHE": str(tmp_path / "cache"), "PIP_NO_INDEX": "1",
               "PIP_FIND_LINKS": str(links)}
    done = subprocess.run([sys.executable, "-m", "shrinkgpu", "versions", "--json", "--runs", "1",
                           "--try", "demo==1.1", str(case)], cwd=work, env=run_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # one object, nothing else on stdout
    assert data["sentence"] == "passes with demo 1.1" and data["exit_code"] == 0
    # pip's own configuration, as the variables set it: no index, the wheels here
    assert data["indexes"]["index_url"] is None and data["indexes"]["find_links"] == [str(links)]
    report = result.report.read_text()
    assert "#### Across demo versions (`shrinkgpu versions`)" in report and "Passes with demo 1.1." in report
    assert report.index("### Versions") < report.index("#### Across demo versions")
    # asked again, the block is replaced, not added
    subprocess.run([sys.executable, "-m", "shrinkgpu", "versions", "--runs", "1", "--try", "demo==1.3", str(case)],
                   cwd=work, env=run_env, capture_output=True, text=True, check=True)
    report = result.report.read_text()
    assert report.count("#### Across demo versions") == 1 and "Fails the same way with demo 1.3." in report
    assert {p.name: p.read_bytes() for p in work.iterdir() if p.suffix == ".py" and p.name in before} == before
    cleared = subprocess.run([sys.executable, "-m", "shrinkgpu", "versions", "--clear-cache", "--json"], env=run_env,
                             capture_output=True, text=True, check=True)
    assert json.loads(cleared.stdout)["freed_bytes"] > 0 and not (tmp_path / "cache").exists()


def test_torch_s_build_variant_is_asked_for_first_then_the_index_s_default():
    user = envs.Installed({"torch": "2.13.0+cpu", "numpy": "2.4.6"}, frozenset({"torch", "numpy"}), {})
    assert [r.pin for r in requests_for("torch", "2.12.0", user)] == ["torch==2.12.0+cpu", "torch==2.12.0"]
    assert [r.pin for r in requests_for("torch", "2.12.0+cu128", user)] == ["torch==2.12.0+cu128"]
    assert [r.pin for r in requests_for("numpy", "1.26.4", user)] == ["numpy==1.26.4"]


def test_what_else_changed_names_each_moved_package_and_counts_the_added_ones():
    changes = (("torch", "2.13.0+cpu", "2.15.0"), ("sympy", "1.14.0", "1.13.3"), ("triton", None, "3.8.0"),
               ("nvidia-cublas", None, "13.4.1.3"), ("nvidia-nccl-cu13", None, "2.30.7"),
               ("cuda-toolkit", None, "13.2"))
    assert also_changed(changes) == ("torch 2.13.0+cpu -> 2.15.0, sympy 1.14.0 -> 1.13.3, added triton 3.8.0, "
                                     "nvidia-cublas 13.4.1.3, nvidia-nccl-cu13 2.30.7 and 1 more")
