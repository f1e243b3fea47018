"""Run a corpus script (or its ideal_cut.py) and report its first error.

Usage:
    python _check.py DIR [--ideal] [--json]
    python _check.py --all      # every directory: script and ideal cut under the recorder
    python _check.py --fresh    # every script as `python SCRIPT` in a scratch copy, timed

The script runs in this interpreter, with cwd = DIR, sys.argv = [script, *args] from
DIR/fixture.toml, and sys.path[0] = DIR, under a TorchFunctionMode that records every
torch call that raised.  While the mode's handler runs torch pops the mode, so what is
recorded is the outermost torch API call (the one the user wrote).

For --all, each directory is checked in a fresh subprocess (script and ideal cut), and a
summary line is printed per directory.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import sys
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent


def op_name(func) -> str:
    name = getattr(func, "__name__", None) or repr(func)
    qual = getattr(func, "__qualname__", name)
    owner = getattr(func, "__objclass__", None)
    if owner is not None and owner.__name__ in ("TensorBase", "Tensor"):
        return f"Tensor.{name}"
    if qual.startswith(("TensorBase.", "Tensor.")):
        return "Tensor." + qual.split(".", 1)[1]
    module = getattr(func, "__module__", None)
    if qual.startswith("_VariableFunctionsClass."):
        qual = name
    return f"{module}.{qual}" if module else qual


def qualified_type(exc: BaseException) -> str:
    import torch

    cls = type(exc)
    module = cls.__module__
    if module in ("builtins", "__main__", None):
        return cls.__qualname__
    if module.startswith("torch._C") and hasattr(torch, cls.__name__):
        return f"torch.{cls.__name__}"
    return f"{module}.{cls.__qualname__}"


def run_one(directory: Path, ideal: bool) -> dict:
    import torch
    from torch.overrides import TorchFunctionMode

    fx = tomllib.loads((directory / "fixture.toml").read_text())
    script = directory / ("ideal_cut.py" if ideal else fx["script"])
    args = [] if ideal else list(fx.get("args", []))

    raised: dict[int, dict] = {}
    keep = []

    def meta(t):
        try:
            stride = list(t.stride())
        except Exception:
            stride = None
        return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}@{stride}"

    def tensors_of(args, kwargs):
        out = []

        def walk(v, depth=0):
            if isinstance(v, torch.Tensor):
                out.append(meta(v))
            elif isinstance(v, (list, tuple)) and depth < 3 and not isinstance(v, torch.Size):
                for x in v:
                    walk(x, depth + 1)
            elif isinstance(v, dict) and depth < 3:
                for x in v.values():
                    walk(x, depth + 1)

        for a in args:
            walk(a)
        for a in (kwargs or {}).values():
            walk(a)
        return out

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            try:
                return func(*args, **(kwargs or {}))
            except BaseException as e:  # noqa: BLE001
                if id(e) not in raised:
                    raised[id(e)] = {"operator": op_name(func), "tensors": tensors_of(args, kwargs)}
                    keep.append(e)
                raise

    os.chdir(directory)
    sys.argv = [str(script.name), *args]
    sys.path.insert(0, str(directory))
    t0 = time.perf_counter()
    result = {"dir": directory.name, "script": script.name, "ideal": ideal}
    try:
        with Recorder():
            runpy.run_path(str(script), run_name="__main__")
        result["status"] = "no error"
    except BaseException as exc:  # noqa: BLE001
        chain = [exc]
        while True:
            nxt = chain[-1].__cause__ or chain[-1].__context__
            if nxt is None or nxt in chain:
                break
            chain.append(nxt)
        first = None
        for e in reversed(chain):  # deepest member raised by a torch call wins
            if id(e) in raised:
                first = e
                break
        if first is None:
            first = chain[-1]
        rec = raised.get(id(first), {})
        msg = str(first)
        result.update(
            status="error",
            exception=qualified_type(first),
            message=msg,
            first_line=f"{qualified_type(first)}: {msg.splitlines()[0] if msg else ''}",
            operator=rec.get("operator", ""),
            tensors=rec.get("tensors", []),
            chain=[qualified_type(e) for e in chain],
        )
    result["seconds"] = round(time.perf_counter() - t0, 2)
    exp = fx["expect"]
    if result["status"] == "error":
        full = f"{result['exception']}: {result['message']}"
        result["keep_error_ok"] = re.search(fx["keep_error"], full) is not None
        result["exception_ok"] = result["exception"] == exp["exception"]
        result["operator_ok"] = result["operator"] == exp["operator"]
    return result


def check_all() -> int:
    bad = 0
    dirs = sorted(p.parent for p in HERE.glob("*/fixture.toml"))
    import shutil
    import tempfile

    for d in dirs:
        rows = []
        for ideal in (False, True):
            with tempfile.TemporaryDirectory() as tmp:  # outputs the scripts write stay out of the corpus
                work = Path(tmp) / d.name
                shutil.copytree(d, work, ignore=shutil.ignore_patterns("__pycache__"))
                t0 = time.perf_counter()
                cmd = [sys.executable, str(Path(__file__)), str(work), "--json"] + (["--ideal"] if ideal else [])
                p = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            try:
                r = json.loads(p.stdout.strip().splitlines()[-1])
            except Exception:
                print(d.name, "checker failed:", p.stderr[-2000:])
                bad += 1
                continue
            ok = r.get("keep_error_ok") and r.get("exception_ok") and r.get("operator_ok")
            bad += not ok
            rows.append((ideal, ok, r, wall))
        for ideal, ok, r, wall in rows:
            tag = "ideal " if ideal else "script"
            print(f"{'OK ' if ok else 'BAD'} {d.name:24s} {tag} {wall:6.1f}s  {r.get('operator','')}  "
                  f"{r.get('first_line','')[:110]}  {r.get('tensors', [])[:3]}")
    return bad


def fresh_runs() -> int:
    """Each script as a user runs it: `python SCRIPT ARGS` in a scratch copy of its directory,
    timed; the last line of stderr must match keep_error."""
    import shutil
    import tempfile

    bad = 0
    for d in sorted(p.parent for p in HERE.glob("*/fixture.toml")):
        fx = tomllib.loads((d / "fixture.toml").read_text())
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp) / d.name
            shutil.copytree(d, work, ignore=shutil.ignore_patterns("__pycache__"))
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, fx["script"], *fx.get("args", [])], cwd=work,
                               capture_output=True, text=True)
            wall = time.perf_counter() - t0
        last = (p.stderr.strip().splitlines() or [""])[-1]
        ok = p.returncode != 0 and re.search(fx["keep_error"], last) is not None
        bad += not ok
        print(f"{'OK ' if ok else 'BAD'} {d.name:24s} rc={p.returncode} {wall:6.1f}s  {last[:120]}")
    return bad


def main() -> None:
    if "--all" in sys.argv:
        sys.exit(1 if check_all() else 0)
    if "--fresh" in sys.argv:
        sys.exit(1 if fresh_runs() else 0)
    directory = Path(sys.argv[1]).resolve()
    ideal = "--ideal" in sys.argv
    as_json = "--json" in sys.argv
    real_stdout = sys.stdout
    if as_json:
        sys.stdout = open(os.devnull, "w")
    r = run_one(directory, ideal)
    sys.stdout = real_stdout
    if as_json:
        print(json.dumps(r))
    else:
        for k, v in r.items():
            if k == "message":
                v = v[:600]
            print(f"{k:15s} {v}")


if __name__ == "__main__":
    main()
