"""What the script did on its way to the error that passes use: what argparse returned,
what configuration reads returned, which seeding calls ran, which files it opened."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any

from shrinkgpu.worker.probe.literals import config_literal, private_literal
from shrinkgpu.worker.probe.paths import is_under, is_user_file
from shrinkgpu.worker.probe.recorder import Recorder

MAX_PARSES = 8


def watch_argparse(recorder: Recorder, parses: list[dict[str, Any]]) -> None:
    """Record what each ``parse_known_args`` (hence ``parse_args``) returned, and where it
    was called from, so a pass can replace the parser by the namespace it produced."""
    import argparse

    original = argparse.ArgumentParser.parse_known_args

    def parse_known_args(self, args=None, namespace=None):
        result = original(self, args, namespace)
        if len(parses) < MAX_PARSES:
            frame = recorder.user_frame_from_stack()
            if frame is not None:
                ns = result[0]
                parses.append(
                    {
                        "file": frame["file"],
                        "line": frame["line"],
                        "values": {k: private_literal(v, recorder.roots) for k, v in vars(ns).items()},
                        "caller": frame["source"],
                    }
                )
        return result

    argparse.ArgumentParser.parse_known_args = parse_known_args


# Functions that turn a configuration file into plain values.  Wrapped where the module
# is (or once it gets) imported, so a pass can put the values in place of the read.
CONFIG_LOADERS = {
    "json": ("load", "loads"),
    "yaml": ("safe_load", "load", "full_load", "unsafe_load"),
    "tomllib": ("load", "loads"),
    "tomli": ("load", "loads"),
}


MAX_LOADS = 16


MAX_CONFIG_TEXT = 8000  # longer is data, not a configuration


def watch_config_loads(recorder: Recorder, loads: list[dict[str, Any]]) -> None:
    """Record what each configuration read returned, as a literal, and where the user's
    code called it; a call site that returned two different values has none."""
    import functools

    sites: dict[tuple[str, int], dict[str, Any]] = {}

    def wrap(module) -> None:
        for attr in CONFIG_LOADERS.get(module.__name__, ()):
            original = getattr(module, attr, None)
            if original is None or getattr(original, "_shrinkgpu_config_watch", False):
                continue

            def make(original, qualified):
                @functools.wraps(original)
                def loading(*args, **kwargs):
                    value = original(*args, **kwargs)
                    # Only reads the user's code made itself: a library reading its own
                    # files (a model's config.json) is not the script's configuration.
                    caller = sys._getframe(1).f_code.co_filename
                    frame = recorder.user_frame_from_stack() if is_user_file(caller, recorder.roots) else None
                    if frame is not None:
                        # Written now: the program may change the value later (overrides).
                        _note_load(sites, loads, frame, qualified, value, recorder.roots)
                    return value

                loading._shrinkgpu_config_watch = True
                return loading

            try:
                setattr(module, attr, make(original, f"{module.__name__}.{attr}"))
            except (AttributeError, TypeError):
                pass

    _after_import(tuple(CONFIG_LOADERS), wrap)


def _note_load(sites, loads, frame, qualified: str, value, roots: tuple[str, ...]) -> None:
    key = (frame["file"], frame["line"])
    text = config_literal(value, roots)
    if text is not None and len(text) > MAX_CONFIG_TEXT:
        text = None
    known = sites.get(key)
    if known is not None:
        if known["literal"] != text:
            known["literal"] = None  # a loop of reads: no single value stands for them
        return
    if len(loads) >= MAX_LOADS:
        return
    record = {"file": frame["file"], "line": frame["line"], "function": qualified, "literal": text}
    sites[key] = record
    loads.append(record)


def _after_import(names: tuple[str, ...], callback) -> None:
    """Call ``callback(module)`` for each of ``names`` now if it is imported, else right
    after its first import (a finder in front of ``sys.meta_path`` that only wraps the
    loader's ``exec_module``; nothing else about importing changes)."""
    import importlib.abc

    pending = set()
    for name in names:
        module = sys.modules.get(name)
        if module is not None:
            callback(module)
        else:
            pending.add(name)
    if not pending:
        return

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if fullname not in pending:
                return None
            pending.discard(fullname)  # our own lookup below must not find us again
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
            loader = spec.loader
            if loader is None or not hasattr(loader, "exec_module"):
                return spec
            original = loader.exec_module

            def exec_module(module):
                original(module)
                try:
                    callback(module)
                except Exception:
                    pass  # watching must never break the user's import

            try:
                loader.exec_module = exec_module
            except (AttributeError, TypeError):
                pass
            return spec

    sys.meta_path.insert(0, _Finder())


def watch_seeding(recorder: Recorder, sites: list[list[Any]]) -> None:
    """Note the user's call chain at every call that seeds a global generator.

    Reductions must not cut seeding away: the candidate would still fail most of the
    time, and the result would be flaky for the maintainer.  Knowing which seeding
    calls actually ran lets passes protect exactly those.
    """
    import functools
    import random

    def wrap(owner, attr: str) -> None:
        original = getattr(owner, attr, None)
        if original is None or getattr(original, "_shrinkgpu_seed_watch", False):
            return

        @functools.wraps(original)
        def seeding(*args, **kwargs):
            if len(sites) < 256:
                stack = recorder.user_stack()
                # The innermost user frame is the seeding call itself; the rest is the
                # chain of calls that reached it.
                sites.extend([f, n, i == len(stack) - 1] for i, (f, n) in enumerate(stack))
            return original(*args, **kwargs)

        seeding._shrinkgpu_seed_watch = True
        try:
            setattr(owner, attr, seeding)
        except (AttributeError, TypeError):
            pass

    wrap(random, "seed")
    torch = sys.modules.get("torch")
    if torch is not None:
        wrap(torch, "manual_seed")
        wrap(torch, "seed")
        wrap(torch.random, "manual_seed")
        wrap(torch.random, "seed")
        cuda = getattr(torch, "cuda", None)
        if cuda is not None:
            wrap(cuda, "manual_seed")
            wrap(cuda, "manual_seed_all")
    np = sys.modules.get("numpy")
    if np is not None:
        wrap(np.random, "seed")


MAX_READS = 256


def _creates(full: str, mode, flags) -> bool:
    """Whether an ``open`` makes the file it opens (``"w"``, ``"x"``, an append to a file
    not there yet, ``os.open`` with ``O_CREAT``/``O_TRUNC``): what the run then reads of it
    is its own, not data a result needs beside it."""
    if isinstance(mode, str):
        return "w" in mode or "x" in mode or ("a" in mode and not os.path.exists(full))
    if isinstance(flags, int):
        return bool(flags & os.O_TRUNC) or (bool(flags & os.O_CREAT) and not os.path.exists(full))
    return False


def file_clock() -> int:
    """Now, in nanoseconds, as the file systems stamp a file's mtime: the kernel's coarse
    clock, up to a tick behind ``time.time()``, so that a checkpoint written just after
    the run started could carry an mtime before ``time.time()`` said it started (seen on
    CI).  Read from a file made and removed for it; ``time.time()`` less a tick where no
    file can be made."""
    try:
        fd, path = tempfile.mkstemp(prefix="shrinkgpu-clock-")
    except OSError:
        return time.time_ns() - 20_000_000
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
        os.unlink(path)


def watch_reads(roots: tuple[str, ...], reads: list[str]) -> None:
    """Note the files under the run's root the script opens (audit event ``open``): the
    data a result needs beside it, and files an output must never overwrite.  A file the
    run made itself (a checkpoint it saves, then loads) is neither: copied beside a
    result, it is what a result that makes its directory with ``os.makedirs`` finds there
    already.  torch.save writes from C++ (no audit event), so a file modified since the
    run started counts as made by it too."""
    made: set[str] = set()
    started = file_clock()

    def hook(event: str, args) -> None:
        if event != "open" or len(reads) >= MAX_READS:
            return
        try:
            path = args[0]
            if not isinstance(path, (str, bytes, os.PathLike)) or isinstance(path, int):
                return
            full = os.path.abspath(os.fsdecode(path))
            mode = args[1] if len(args) > 1 else None
            flags = args[2] if len(args) > 2 else None
        except Exception:
            return
        for root in roots:
            if is_under(full, (root,)) and "__pycache__" not in full:
                rel = os.path.relpath(full, root)
                if rel in made:
                    return
                try:
                    if _creates(full, mode, flags) or os.stat(full).st_mtime_ns >= started:
                        made.add(rel)
                        return
                except Exception:
                    pass
                reads.append(rel)
                return

    try:
        sys.addaudithook(hook)
    except Exception:
        pass
