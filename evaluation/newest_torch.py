"""The test suite on the newest torch release, as a GPU user has it: the index's build
(a CUDA build on Linux, run on the CPU), laid over this environment the way ``shrinkgpu
versions`` lays any version over a user's (versions/envs.py): only torch and what it
needs that differs, first on PYTHONPATH, everything else this checkout's environment.

    python -m evaluation.newest_torch                       # the newest release, tests/ less tests/e2e
    python -m evaluation.newest_torch --torch 2.15.0 tests/worker tests/features/test_compile_errors.py

The environment is kept in the ``versions`` cache (docs/versions.md), so a second run
downloads nothing.  What it costs (docs/benchmarks.md, *Versions*): about 3 GB of
downloads the first time (28 s here), then the suite's own time, which is the pinned
run's or more (the CUDA build imports in 8-11 s where the CPU build takes 3): too long
for a second CI step beside the first within CI's 90 minutes, so it is run by hand
before a release and after a new torch release.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from packaging.version import Version

from shrinkgpu.versions import Cache, default_cache_dir, envs
from shrinkgpu.versions.index import offers, pip_indexes, releases_between

DEFAULT_PART = ["tests", "--ignore=tests/e2e"]


def newest(indexes) -> str:
    found = releases_between(offers("torch", indexes), Version("0"), Version("9999"))
    if not found:
        raise SystemExit(f"no torch release with a wheel for this Python on {indexes.describe()}")
    return str(found[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", default=None, help="a release (default: the newest the indexes offer)")
    parser.add_argument("pytest_args", nargs="*", help="what pytest runs (default: tests/ less tests/e2e)")
    opts = parser.parse_args(argv)
    indexes = pip_indexes()
    version = opts.torch or newest(indexes)
    uv = envs.uv_binary()
    if uv is None:
        raise SystemExit("uv is needed: pip install uv")
    built = envs.build(envs.Request("torch", version), envs.installed(), indexes, Cache(default_cache_dir()), uv)
    print(f"torch {version} ({built.variant or 'build unknown'}) in {built.site} "
          f"({'reused' if built.reused else f'built in {built.seconds:.0f} s'}); also changed: "
          + (", ".join(f"{n} {a} -> {b}" for n, a, b in built.also) or "nothing"), flush=True)
    env = built.env(dict(os.environ))
    return subprocess.call([sys.executable, "-m", "pytest", *(opts.pytest_args or DEFAULT_PART)], env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
