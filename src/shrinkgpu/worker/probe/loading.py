"""A loader's failing call kept with what it read, for the extraction to write it alone.

A failure after the training loops often reads what they wrote: ``model.load_state_dict``
of a checkpoint whose keys or shapes do not fit, ``torch.load`` of a file it cannot
unpickle, ``json.load`` of a results file written twice.  The operator-level capture
sees none of these (no torch function runs), so as the error goes up, with
``Watch.keep_raised``, the loader's own frame is read:

- ``Module.load_state_dict``: the module it was called on, written as it was built (the
  source of its class, ``compiled.module_definition``), and the state dict it was given,
  saved whole (the exact level loads it back as the user's code did) and encoded like a
  call's arguments (the metadata level writes its tensors as ``torch.randn`` of their
  layout: what the key and shape checks read);
- ``torch.load`` and ``json.load``: the file they read, copied when it is small.
"""

from __future__ import annotations

import io
import os
import shutil
from typing import Any

from shrinkgpu.worker.probe.compiled import NoSource, module_definition
from shrinkgpu.worker.probe.ops import (
    RAISED_MAX_BYTES,
    code_literal,
    same_value,
    save_call,
)
from shrinkgpu.worker.probe.paths import is_under, is_user_file

# A file is copied beside the extracted call up to GitHub's limit on a file attached to
# an issue: what a maintainer can be sent with the report.
FILE_MAX_BYTES = 25 * 2**20

STATE_DICT = "torch.nn.modules.module.Module.load_state_dict"
TORCH_LOAD = "torch.serialization.load"
JSON_LOAD = "json.load"


def keep_loading_call(tb, roots: tuple[str, ...], raised: tuple[str, list]) -> None:
    """With ``Watch.keep_raised``: when the error came out of a loader the user's code
    called, keep the call and what it read (a record named as the signature names its
    call), or say why it could not be."""
    directory, records = raised
    frame = _called_from_user(tb, roots)
    if frame is None:
        return
    kind = _loader(frame)
    if kind is None:
        return
    try:
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"raised-{len(records)}.pt")
        if kind == STATE_DICT:
            _keep_state_dict_load(frame, roots, path)
        else:
            _keep_file_load(frame, kind, path)
        records.append({"op": kind, "call": None, "path": path, "loading": True})
    except (NoSource, _NotKept) as exc:
        records.append({"op": kind, "call": None, "path": None, "loading": True, "error": str(exc)})
    except Exception as exc:  # an offer: the script's own error must stay what it was
        records.append({"op": kind, "call": None, "path": None, "loading": True,
                        "error": f"{type(exc).__name__}: {exc}"})


class _NotKept(Exception):
    pass


def _called_from_user(tb, roots: tuple[str, ...]):
    """The frame the user's last frame called into (the loader), when there is one."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    users = [i for i, f in enumerate(frames) if is_user_file(f.f_code.co_filename, roots)]
    if not users:
        return None
    # (the probe's own wrappers, ``json.load``'s configuration watch, are passed over)
    rest = [f for f in frames[users[-1] + 1:] if not is_under(os.path.abspath(f.f_code.co_filename), (_PROBE,))]
    return rest[0] if rest else None


_PROBE = os.path.dirname(os.path.abspath(__file__))


def _loader(frame) -> str | None:
    code = frame.f_code
    where = code.co_filename.replace(os.sep, "/")
    if code.co_name == "load_state_dict" and where.endswith("torch/nn/modules/module.py"):
        return STATE_DICT
    if code.co_name == "load" and where.endswith("torch/serialization.py"):
        return TORCH_LOAD
    if code.co_name == "load" and where.endswith("json/__init__.py"):
        return JSON_LOAD
    return None


def _keep_state_dict_load(frame, roots: tuple[str, ...], path: str) -> None:
    import torch

    module, state = frame.f_locals.get("self"), frame.f_locals.get("state_dict")
    if not isinstance(module, torch.nn.Module) or not isinstance(state, dict):
        raise _NotKept("load_state_dict was not called on a module with a dict")
    size = _bytes(state)
    if size > RAISED_MAX_BYTES:
        raise _NotKept(f"the state dict holds {size / 2**30:.1f} GiB")
    definitions, build = module_definition(module, roots, f"the {type(module).__name__} it was called on")
    kwargs: dict[str, Any] = {"state_dict": state}
    defaults = {"strict": True, "assign": False}
    for name, default in defaults.items():
        if name in frame.f_locals and not same_value(frame.f_locals[name], default):
            kwargs[name] = frame.f_locals[name]

    def stand_in(*a, **k):  # named as the signature names the call
        raise NotImplementedError

    stand_in.__module__, stand_in.__qualname__ = "torch.nn.modules.module", "Module.load_state_dict"
    # the state dict as it was passed, for the exact level to load as the user's code did
    whole = path[:-len(".pt")] + ".state.pt"
    torch.save(state, whole)
    save_call(stand_in, (), kwargs, path, extra={
        "loading": "state_dict", "definitions": definitions, "file": whole, "bytes": os.path.getsize(whole),
        "receiver": {"name": "model", "build": build, "method": "load_state_dict"},
        "holds": f"the state dict the failing call was given ({_count_tensors(state)} tensors, "
                 f"{_size(os.path.getsize(whole))}): the user's weights",
    })


def _keep_file_load(frame, kind: str, path: str) -> None:
    import json

    given = frame.f_locals.get("fp" if kind == JSON_LOAD else "f")
    source = _file_of(given)
    if source is None:
        raise _NotKept(f"{_spelled(kind)} read a {type(given).__name__}, not a file on disk")
    size = os.path.getsize(source)
    if size > FILE_MAX_BYTES:
        raise _NotKept(f"the file it read, {os.path.basename(source)}, is {_size(size)} (more than "
                       f"{_size(FILE_MAX_BYTES)} to send with a report)")
    copy = path[:-len(".pt")] + os.path.splitext(source)[1]
    shutil.copyfile(source, copy)
    keywords = _file_keywords(frame, kind)
    record = {"op": kind, "loading": "file", "file": copy, "bytes": size, "name": os.path.basename(source),
              "keywords": keywords,
              "holds": f"`{os.path.basename(source)}` as the run wrote it ({_size(size)})"}
    if kind == JSON_LOAD:
        try:
            with open(copy, encoding="utf-8") as fh:
                record["text"] = fh.read()
        except (UnicodeDecodeError, OSError):
            pass
    else:
        record["holds"] += _weights(copy)
    with open(path + ".json", "w", encoding="utf-8") as fh:
        json.dump(record, fh)


def _file_of(given) -> str | None:
    """The path of the file a loader was given by name or as an open file."""
    if isinstance(given, (str, os.PathLike)):
        name = os.fspath(given)
    elif isinstance(given, io.IOBase) and isinstance(getattr(given, "name", None), str):
        name = given.name
    else:
        return None
    return os.path.abspath(name) if os.path.isfile(name) else None


def _file_keywords(frame, kind: str) -> list[list[str]]:
    """[name, source] of each argument of the loader that is set and has a source form;
    ``_NotKept`` for one that has none (an ``object_hook``, a ``map_location`` function):
    the call cannot be written without it."""
    out: list[list[str]] = []
    if kind == JSON_LOAD:
        given = dict(frame.f_locals.get("kw") or {})
        given.update({k: frame.f_locals.get(k) for k in ("cls", "object_hook", "parse_float", "parse_int",
                                                           "parse_constant", "object_pairs_hook")})
        for name, value in given.items():
            if value is None:
                continue
            text = code_literal(value)
            if text is None:
                raise _NotKept(f"json.load was given {name}={type(value).__name__}, which has no source form")
            out.append([name, text])
        return out
    # (torch.load resolves weights_only and mmap in its frame: only what differs from
    # what an unset argument resolves to is written, the check says whether it is enough)
    for name in ("map_location", "weights_only", "mmap"):
        value = frame.f_locals.get(name)
        if name == "map_location" and value is not None:
            text = code_literal(value)
            if text is None:
                raise _NotKept(f"torch.load was given map_location={type(value).__name__}, which has no source "
                               "form")
            out.append([name, text])
        elif name == "weights_only" and value is False:
            out.append([name, "False"])
        elif name == "mmap" and value is True:
            out.append([name, "True"])
    return out


def _weights(path: str) -> str:
    """``: the user's weights`` when the checkpoint holds tensors (read without
    unpickling code: the names in its archive)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            if any("/data/" in n for n in archive.namelist()):
                return ": it holds the user's weights"
    except (zipfile.BadZipFile, OSError):
        pass
    return ""


def _spelled(kind: str) -> str:
    return "torch.load" if kind == TORCH_LOAD else kind


def _bytes(value, depth: int = 0) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if depth < 4 and isinstance(value, dict):
        return sum(_bytes(v, depth + 1) for v in value.values())
    if depth < 4 and isinstance(value, (list, tuple)):
        return sum(_bytes(v, depth + 1) for v in value)
    return 0


def _count_tensors(value, depth: int = 0) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return 1
    if depth < 4 and isinstance(value, dict):
        return sum(_count_tensors(v, depth + 1) for v in value.values())
    if depth < 4 and isinstance(value, (list, tuple)):
        return sum(_count_tensors(v, depth + 1) for v in value)
    return 0


def _size(n: int) -> str:
    if n < 2**10:
        return f"{n} bytes"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"
