"""The one interestingness test every tool in the evaluation is judged by.

Run with the project's Python (it imports ``shrinkgpu.signature``)::

    python evaluation/oracle.py --config ORACLE.json [--no-record] [--overlay DIR] CANDIDATE

It copies the case's folder into a fresh temporary directory, puts CANDIDATE in
place of the case's script (files in ``--overlay`` go on top), runs it once with
``python -m shrinkgpu run SCRIPT --json`` (a fresh interpreter) and exits 0 -- the
candidate is *interesting* -- iff the first error is the same bug as the original's by
``Signature.same_bug`` (class, normalised message, operator, tensor metadata) and its
text matches the case's ``keep_error`` regex.  Anything else exits 1.  When
interesting it also prints ``MARKER`` (the ``--track`` string for pysource-minimize).

Unless ``--no-record`` is given, every call appends one line to ``STATE/calls.log``
(the runner's oracle-call counter) and an interesting candidate that is smaller, in
``shrinkgpu.syntax.count_tokens``, than every earlier one is kept as ``STATE/best.py``:
the best output so far for tools that keep none on disk themselves.

A candidate that does not ``compile()`` is answered at once (not interesting) without
starting a worker: shrinkgpu never runs such candidates either, and the peers should
not pay interpreter starts for them.  It is still counted as a call.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MARKER = "SHRINKGPU-BENCH-ORACLE: INTERESTING"
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.min.py", "*.min.md", "*.min", ".shrinkray")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def observe(
    case_dir: Path,
    script: str,
    files: dict[str, str],
    args: list[str],
    timeout: float,
    python: str,
    overlay: Path | None = None,
    launch: tuple[str, ...] | list[str] = (),
) -> dict:
    """Run one program (case folder copy + ``files``) via ``shrinkgpu run --json``; the JSON.
    ``launch``: how its processes start (``--nproc-per-node 2`` for torchrun's ranks)."""
    tmp = Path(tempfile.mkdtemp(prefix="sgbench-oracle-"))
    try:
        root = tmp / "root"
        shutil.copytree(case_dir, root, ignore=IGNORE, symlinks=True)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        if overlay is not None:
            for p in overlay.rglob("*"):
                if p.is_file() and "__pycache__" not in p.parts:
                    dst = root / p.relative_to(overlay)
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(p, dst)
        cmd = [python, "-m", "shrinkgpu", "run", "--json", "--timeout", f"{timeout:g}", *launch, script]
        if args:
            cmd += ["--", *args]
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        proc = subprocess.Popen(
            cmd, cwd=root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, env=env,
        )
        try:
            out, err = proc.communicate(timeout=timeout + 60)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            return {"oracle_error": "shrinkgpu run itself did not return", "timed_out": True}
        try:
            data = json.loads(out.decode("utf-8", "replace"))
        except json.JSONDecodeError:
            return {"oracle_error": f"no JSON from shrinkgpu run (rc {proc.returncode}): {err.decode()[-400:]}"}
        return data
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def judge(data: dict, reference: dict, keep_error: str, free: frozenset = frozenset()) -> tuple[bool, str, str]:
    """(interesting, verdict, error type) for one ``shrinkgpu run --json`` answer.  ``free``:
    (argument, dimension) at the operator that the original varied across its calls, as a
    reduction reported them: re-checking its output takes its rule (peers get none)."""
    from shrinkgpu.signature import Signature

    if data.get("oracle_error"):
        return False, "oracle-error", ""
    if data.get("timed_out"):
        return False, "timeout", ""
    sig_json = data.get("signature")
    if not sig_json:
        return False, "no-error", ""
    sig = Signature.from_json(sig_json)
    ref = Signature.from_json(reference)
    if not ref.same_bug(sig, free=free):
        if (sig.type, sig.normalized) == (ref.type, ref.normalized):
            return False, "same-message-other-metadata", sig.type
        return False, "other-error", sig.type
    if not re.search(keep_error, sig.keep_text()):
        return False, "keep-error-mismatch", sig.type
    return True, "interesting", sig.type


def _record_best(state: Path, text: str, tokens: int) -> None:
    lock = open(state / "best.lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        meta = state / "best.json"
        best = json.loads(meta.read_text()) if meta.exists() else None
        if best is None or tokens < best["tokens"]:
            tmp = state / f".best.{os.getpid()}.tmp"
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, state / "best.py")
            meta.write_text(json.dumps({"tokens": tokens, "time": time.time()}))
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, type=Path)
    ap.add_argument("--no-record", action="store_true", help="do not count this call or keep a best")
    ap.add_argument("--overlay", type=Path, default=None, help="files copied over the case folder's copy")
    ap.add_argument("--free", default="",
                    help="ARGUMENT:DIM,... the original varied (a reduction's varying_dimensions)")
    ap.add_argument("candidate", type=Path)
    ns = ap.parse_args(argv)
    cfg = json.loads(ns.config.read_text())

    from shrinkgpu.syntax import count_tokens

    started = time.monotonic()
    try:
        text = ns.candidate.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text, verdict = None, "unreadable"  # e.g. a tool that tries deleting the whole file
    tokens = count_tokens(text) if text is not None else 0
    interesting, etype = False, ""
    if text is not None:
        try:
            compile(text, cfg["script"], "exec")
        except (SyntaxError, ValueError):
            verdict = "syntax-error"
        else:
            data = observe(
                Path(cfg["case_dir"]), cfg["script"], {cfg["script"]: text}, cfg.get("args", []),
                float(cfg["timeout"]), cfg["python"], ns.overlay, cfg.get("launch", ()),
            )
            free = frozenset((a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in ns.free.split(",") if a)
            interesting, verdict, etype = judge(data, cfg["reference"], cfg["keep_error"], free)
    if not ns.no_record:
        state = Path(cfg["state_dir"])
        state.mkdir(parents=True, exist_ok=True)
        line = f"{time.time():.3f}\t{verdict}\t{etype}\t{tokens}\t{time.monotonic() - started:.3f}\n"
        fd = os.open(state / "calls.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        if interesting:
            _record_best(state, text, tokens)
    if interesting:
        print(MARKER, flush=True)
        return 0
    print(f"not interesting: {verdict} {etype}".rstrip(), flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
