"""versions/envs.py: overlays built for real with uv, from local wheels (offline) and from
the indexes this machine's pip is configured with (NumPy 1.26.4 against the 2.x here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from shrinkgpu.versions import envs
from shrinkgpu.versions.envs import Cache, Installed, NotInstallable, Request, build
from shrinkgpu.versions.index import Indexes, offers, pip_indexes

from .wheels import make_wheel

UV = envs.uv_binary()
pytestmark = pytest.mark.skipif(UV is None, reason="uv is not installed (pip install uv)")


def seen_by_a_run(environment: envs.Environment, module: str) -> dict:
    """What a run in ``environment`` imports: the version and the file."""
    code = (f"import importlib.metadata as m, json, {module} as x; "
            f"print(json.dumps([m.version({module!r}), getattr(x, 'VERSION', x.__version__ if hasattr(x, "
            f"'__version__') else None), x.__file__]))")
    done = subprocess.run([sys.executable, "-c", code], env=environment.env(dict(os.environ)), capture_output=True,
                          text=True, check=True)
    meta, attr, where = json.loads(done.stdout)
    return {"metadata": meta, "module": attr, "file": where}


@pytest.fixture
def links(tmp_path):
    where = tmp_path / "links"
    for version in ("1.0", "2.0"):
        make_wheel(where, "demo", version, f"VERSION = {version!r}\n")
    return where


@pytest.fixture
def users_site(tmp_path, links, monkeypatch):
    """The user's demo 2.0, importable as if installed (the runs' PYTHONPATH)."""
    site = tmp_path / "users-site"
    subprocess.run([UV, "pip", "install", "--quiet", "--target", str(site), "--python", sys.executable, "--no-index",
                    "--find-links", str(links), "demo==2.0"], check=True, capture_output=True,
                   env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv")})
    monkeypatch.setenv("PYTHONPATH", str(site))
    return site


def test_an_overlay_holds_only_the_changed_package_and_the_users_copy_does_not_leak_through(tmp_path, links,
                                                                                          users_site):
    user = Installed({"demo": "2.0", "other": "1.0"}, frozenset({"demo", "other"}), {})
    cache = Cache(tmp_path / "cache")
    indexes = Indexes(no_index=True, find_links=(str(links),))
    env = build(Request("demo", "1.0"), user, indexes, cache, UV)
    assert env.changed == (("demo", "2.0", "1.0"),) and env.also == () and not env.reused
    assert sorted(p.name for p in env.site.iterdir()) == ["demo-1.0.dist-info", "demo.py"]
    assert seen_by_a_run(env, "demo") == {"metadata": "1.0", "module": "1.0", "file": str(env.site / "demo.py")}
    # the user's own, untouched, outside the overlay
    assert seen_by_a_run(envs.Environment(None, None), "demo")["module"] == "2.0"
    assert (users_site / "demo.py").read_text() == "VERSION = '2.0'\n"
    # a second call builds nothing
    again = build(Request("demo", "1.0"), user, indexes, cache, UV)
    assert again.reused and again.site == env.site and again.changed == env.changed
    assert [p.name for p in cache.envs.iterdir()] == [env.site.parent.name]


def test_what_depends_on_the_package_changes_with_it_and_is_said(tmp_path, links):
    make_wheel(links, "plug", "1.0", "", requires=("demo<2",))
    make_wheel(links, "plug", "2.0", "", requires=("demo>=2",))
    user = Installed({"demo": "2.0", "plug": "2.0"}, frozenset({"demo", "plug"}), {"plug": frozenset({"demo"})})
    env = build(Request("demo", "1.0"), user, Indexes(no_index=True, find_links=(str(links),)),
                Cache(tmp_path / "cache"), UV)
    assert env.changed == (("demo", "2.0", "1.0"), ("plug", "2.0", "1.0"))
    assert env.also == (("plug", "2.0", "1.0"),) and env.kept == ()


def test_a_dependent_with_no_release_that_fits_stays_the_users_and_is_said(tmp_path, links):
    make_wheel(links, "plug", "2.0", "", requires=("demo>=2",))
    user = Installed({"demo": "2.0", "plug": "2.0"}, frozenset({"demo", "plug"}), {"plug": frozenset({"demo"})})
    env = build(Request("demo", "1.0"), user, Indexes(no_index=True, find_links=(str(links),)),
                Cache(tmp_path / "cache"), UV)
    assert env.changed == (("demo", "2.0", "1.0"),) and env.kept == ("plug",)


def test_a_version_that_cannot_be_installed_says_why_and_leaves_nothing(tmp_path, links):
    cache = Cache(tmp_path / "cache")
    user = Installed({"demo": "2.0"}, frozenset({"demo"}), {})
    with pytest.raises(NotInstallable, match=r"demo==9\.9"):
        build(Request("demo", "9.9"), user, Indexes(no_index=True, find_links=(str(links),)), cache, UV)
    assert list(cache.envs.iterdir()) == []


def test_an_interrupted_build_leaves_nothing_a_later_run_trusts(tmp_path, links, monkeypatch):
    cache = Cache(tmp_path / "cache")
    user = Installed({"demo": "2.0"}, frozenset({"demo"}), {})
    indexes = Indexes(no_index=True, find_links=(str(links),))

    def interrupted(*_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(envs, "check_overlay", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build(Request("demo", "1.0"), user, indexes, cache, UV)
    assert list(cache.envs.iterdir()) == []
    # a build whose process died (no chance to clean up) is swept by the next run
    dead = cache.envs / f"{envs.BUILDING}999999999-x"
    (dead / "site").mkdir(parents=True)
    (dead / envs.READY).write_text("{}")
    cache.sweep()
    assert list(cache.envs.iterdir()) == []
    assert cache.ready(cache.key(Request("demo", "1.0"), user, indexes)) is None


def test_the_cache_is_trimmed_oldest_first_and_cleared(tmp_path, links):
    cache = Cache(tmp_path / "cache")
    user = Installed({"demo": "2.0"}, frozenset({"demo"}), {})
    indexes = Indexes(no_index=True, find_links=(str(links),))
    old = build(Request("demo", "1.0"), user, indexes, cache, UV)
    new = build(Request("demo", "2.0"), Installed({"demo": "1.0"}, frozenset({"demo"}), {}), indexes, cache, UV)
    os.utime(old.site.parent / envs.READY, (1, 1))  # used long ago
    cache.max_bytes = envs.size_of(cache.root) - 1
    assert cache.trim(keep={new.site.parent.name}) == [old.site.parent.name]
    assert [p.name for p in cache.envs.iterdir()] == [new.site.parent.name]
    assert cache.clear() > 0 and not cache.root.exists()


def test_numpy_1_26_from_the_configured_index_beside_the_numpy_2_installed_here(tmp_path):
    indexes = pip_indexes()
    if Version("1.26.4") not in {o.version for o in offers("numpy", indexes)}:
        pytest.skip(f"the configured indexes ({indexes.describe()}) offer no numpy 1.26.4 wheel for this Python")
    user = envs.installed()
    assert Version(user.versions["numpy"]).major >= 2
    env = build(Request("numpy", "1.26.4"), user, indexes, Cache(tmp_path / "cache"), UV)
    assert env.changed[0] == ("numpy", user.versions["numpy"], "1.26.4")
    # What else moved is only what the installed packages that need numpy 2 had to (pandas
    # 3 where the bench extra is installed), each said with its two versions.
    needs_numpy = {"pandas", "scipy", "matplotlib", "contourpy", "numba", "scikit-learn"}
    assert {name for name, _before, _after in env.changed[1:]} <= needs_numpy
    seen = seen_by_a_run(env, "numpy")
    assert seen["metadata"] == seen["module"] == "1.26.4"
    assert Path(seen["file"]).is_relative_to(env.site)
    import numpy

    assert numpy.__version__ == user.versions["numpy"]  # this process's own is untouched
