"""Run a corpus-compile script (or its ideal_cut.py) in a scratch copy and report its first error.

Usage:
    python _check.py DIR [--ideal] [--plain] [--json]
    python _check.py --all [--plain]    # every directory, script and ideal cut, each in a fresh process

Like ../corpus/_check.py, but the exception chain is walked the way Python displays it (and
shrinkgpu's probe records it): ``__cause__``, else ``__context__`` unless ``raise ... from
None`` suppressed it.  Dynamo raises its user-facing errors with the internal context
suppressed, so ../corpus/_check.py (which always follows ``__context__``) names a different
"root" for some of these scripts.  The first error is the deepest displayed member raised by
a torch call, else the displayed root.

By default the script runs under a TorchFunctionMode that records the outermost torch call
that raised (as ../corpus/_check.py and shrinkgpu's probe do); --plain runs it without the
mode.  Dynamo traces an active TorchFunctionMode, which changes some messages (see README).
Each run happens in a temporary copy of DIR, so nothing is written here.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # importing ../corpus/_check.py must not write there
sys.path.insert(0, str(HERE.parent / "corpus"))
from _check import op_name, qualified_type  # noqa: E402


def displayed_chain(exc: BaseException) -> list[BaseException]:
    out, cur = [], exc
    while cur is not None and cur not in out:
        out.append(cur)
        if cur.__cause__ is not None:
            cur = cur.__cause__
        elif cur.__suppress_context__:
            cur = None
        else:
            cur = cur.__context__
    return out


def run_here(directory: Path, ideal: bool, plain: bool) -> dict:
    import torch
    from torch.overrides import TorchFunctionMode

    fx = tomllib.loads((directory / "fixture.toml").read_text())
    script = directory / ("ideal_cut.py" if ideal else fx["script"])
    raised: dict[int, str] = {}

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            try:
                return func(*args, **(kwargs or {}))
            except BaseException as e:  # noqa: BLE001
                raised.setdefault(id(e), op_name(func))
                raise

    os.chdir(directory)
    sys.argv = [script.name, *([] if ideal else fx.get("args", []))]
    sys.path.insert(0, str(directory))
    result = {"dir": directory.name, "script": script.name, "ideal": ideal, "plain": plain}
    t0 = time.perf_counter()
    try:
        if plain:
            runpy.run_path(str(script), run_name="__main__")
        else:
            with Recorder():
                runpy.run_path(str(script), run_name="__main__")
        result["status"] = "no error"
    except BaseException as exc:  # noqa: BLE001
        chain = displayed_chain(exc)
        first = next((e for e in reversed(chain) if id(e) in raised), chain[-1])
        msg = str(first)
        result.update(status="error", exception=qualified_type(first), message=msg,
                      first_line=f"{qualified_type(first)}: {msg.strip().splitlines()[0] if msg.strip() else ''}",
                      operator=raised.get(id(first), "none"), chain=[qualified_type(e) for e in chain])
        full = f"{result['exception']}: {msg}"
        exp = fx["expect"]
        result["keep_error_ok"] = re.search(fx["keep_error"], full) is not None
        result["exception_ok"] = result["exception"] == exp["exception"]
        result["operator_ok"] = plain or result["operator"] == exp["operator"]
    result["seconds"] = round(time.perf_counter() - t0, 2)
    return result


def run_fresh(d: Path, ideal: bool, plain: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / d.name
        shutil.copytree(d, work, ignore=shutil.ignore_patterns("__pycache__", "inductor_cache", ".inductor-cache"))
        cmd = [sys.executable, str(Path(__file__)), str(work), "--json", "--here"]
        cmd += ["--ideal"] * ideal + ["--plain"] * plain
        p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:  # noqa: BLE001
        return {"dir": d.name, "status": "checker failed", "stderr": p.stderr[-2000:]}


def main() -> int:
    argv = sys.argv[1:]
    ideal, plain, as_json = "--ideal" in argv, "--plain" in argv, "--json" in argv
    if "--here" in argv:
        target = Path([a for a in argv if not a.startswith("--")][0]).resolve()
        print(json.dumps(run_here(target, ideal, plain)))
        return 0
    dirs = (sorted(p.parent for p in HERE.glob("*/fixture.toml")) if "--all" in argv
            else [Path([a for a in argv if not a.startswith("--")][0]).resolve()])
    bad = 0
    for d in dirs:
        for which in ((False, True) if "--all" in argv else (ideal,)):
            r = run_fresh(d, which, plain)
            ok = r.get("keep_error_ok") and r.get("exception_ok") and r.get("operator_ok")
            bad += not ok
            if as_json:
                print(json.dumps(r))
            else:
                tag = "ideal " if which else "script"
                print(f"{'OK ' if ok else 'BAD'} {d.name:30s} {tag} {r.get('seconds', 0):6.1f}s  "
                      f"{r.get('operator', '')}  {r.get('first_line', r.get('status', ''))[:150]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
