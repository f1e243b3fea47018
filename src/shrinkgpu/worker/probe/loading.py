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
OPTIMIZER = "torch.optim.optimizer.Optimizer.load_state_dict"
TORCH_LOAD = "torch.serialization.load"
JSON_LOAD = "json.load"
# how each is spelled in words and in the extracted call
SPELLED = {STATE_DICT: "load_state_dict", OPTIMIZER: "load_state_dict", TORCH_LOAD: "torch.load",
           JSON_LOAD: "json.load"}
# torch's decorators between the user's call and the loader (``Optimizer.load_state_dict``
# runs under ``_disable_dynamo``'s wrappers; the first is what the signature names)
_WRAPPERS = ("torch/_compile.py", "torch/_dynamo/eval_frame.py", "torch/utils/_contextlib.py")


def keep_loading_call(tb, roots: tuple[str, ...], raised: tuple[str, list]) -> None:
    """With ``Watch.keep_raised``: when the error came out of a loader the user's code
    called, keep the call and what it read (a record named as the signature names its
    call: the first of torch's frames after the user's), or say why it could not be."""
    directory, records = raised
    called = _called_from_user(tb, roots)
    if called is None:
        return
    first, frame = called
    kind = _loader(frame)
    if kind is None:
        return
    # (a json.load is raised by no torch call: the signature has no operator to name it)
    op = kind if kind == JSON_LOAD else f"{first.f_globals.get('__name__', 'torch')}.{first.f_code.co_qualname}"
    entry = {"op": op, "call": None, "loading": True, "what": SPELLED[kind]}
    try:
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"raised-{len(records)}.pt")
        if kind == STATE_DICT:
            _keep_state_dict_load(frame, roots, path, op)
        elif kind == OPTIMIZER:
            _keep_optimizer_load(frame, path, op)
        else:
            _keep_file_load(frame, kind, path)
        records.append({**entry, "path": path})
    except (NoSource, _NotKept) as exc:
        records.append({**entry, "path": None, "error": str(exc)})
    except Exception as exc:  # an offer: the script's own error must stay what it was
        records.append({**entry, "path": None, "error": f"{type(exc).__name__}: {exc}"})


class _NotKept(Exception):
    pass


def _called_from_user(tb, roots: tuple[str, ...]):
    """(the frame the user's last frame called into, the loader's frame under torch's
    wrappers), when there is one."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    users = [i for i, f in enumerate(frames) if is_user_file(f.f_code.co_filename, roots)]
    if not users:
        return None
    # (the probe's own wrappers, ``json.load``'s configuration watch, are passed over)
    rest = [f for f in frames[users[-1] + 1:] if not is_under(os.path.abspath(f.f_code.co_filename), (_PROBE,))]
    if not rest:
        return None
    inner = 0
    while inner + 1 < len(rest) and rest[inner].f_code.co_filename.replace(os.sep, "/").endswith(_WRAPPERS):
        inner += 1
    return rest[0], rest[inner]


_PROBE = os.path.dirname(os.path.abspath(__file__))


def _loader(frame) -> str | None:
    code = frame.f_code
    where = code.co_filename.replace(os.sep, "/")
    if code.co_name == "load_state_dict" and where.endswith("torch/nn/modules/module.py"):
        return STATE_DICT
    if code.co_name == "load_state_dict" and where.endswith("torch/optim/optimizer.py"):
        return OPTIMIZER
    if code.co_name == "load" and where.endswith("torch/serialization.py"):
        return TORCH_LOAD
    if code.co_name == "load" and where.endswith("json/__init__.py"):
        return JSON_LOAD
    return None


def _keep_state_dict_load(frame, roots: tuple[str, ...], path: str, op: str) -> None:
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

    _save_state_dict_call(op, kwargs, path, definitions, {"name": "model", "build": build},
                          "the user's weights")


def _save_state_dict_call(op: str, kwargs: dict[str, Any], path: str, definitions: list[str],
                          receiver: dict[str, str], what: str) -> None:
    """The call saved like a failing call's (its state dict encoded, for the metadata
    level) and the state dict as it was passed, for the exact level to load as the
    user's code did."""
    import torch

    module, _, qual = op.rpartition(".")

    def stand_in(*a, **k):  # named as the signature names the call
        raise NotImplementedError

    stand_in.__module__, stand_in.__qualname__ = module, qual
    whole = path[:-len(".pt")] + ".state.pt"
    state = kwargs["state_dict"]
    torch.save(state, whole)
    save_call(stand_in, (), kwargs, path, extra={
        "loading": "state_dict", "definitions": definitions, "file": whole, "bytes": os.path.getsize(whole),
        "receiver": {**receiver, "method": "load_state_dict"}, "what": "load_state_dict",
        "holds": f"the state dict the failing call was given ({_count_tensors(state)} tensors, "
                 f"{_size(os.path.getsize(whole))}): {what}",
    })


def _keep_optimizer_load(frame, path: str, op: str) -> None:
    """An optimizer of torch's, built over zeros of its parameters' shapes, group by
    group, with the settings that differ from its defaults: what its
    ``load_state_dict`` checks (the number of groups and of parameters in each)."""
    import inspect

    import torch

    optimizer, state = frame.f_locals.get("self"), frame.f_locals.get("state_dict")
    cls = type(optimizer)
    if getattr(torch.optim, cls.__name__, None) is not cls:
        raise _NotKept(f"the optimizer is a {cls.__qualname__}, not one of torch.optim's")
    if not isinstance(state, dict):
        raise _NotKept("load_state_dict was not given a dict")
    size = _bytes(state)
    if size > RAISED_MAX_BYTES:
        raise _NotKept(f"the state dict holds {size / 2**30:.1f} GiB")
    signature = inspect.signature(cls.__init__).parameters
    defaults = {k: p.default for k, p in signature.items() if p.default is not inspect.Parameter.empty}
    try:  # what a construction sets in a group beside its arguments (AdamW's decoupled_weight_decay)
        fresh = cls([torch.zeros(1, requires_grad=True)]).param_groups[0]
        defaults = {**{k: v for k, v in fresh.items() if k != "params"}, **defaults}
    except Exception:  # (an optimizer that needs an argument without a default)
        pass

    def params(group) -> str:
        shapes = [tuple(p.shape) for p in group["params"]]
        dtypes = {p.dtype for p in group["params"]}
        dtype = "" if dtypes <= {torch.float32} else f", dtype={code_literal(next(iter(dtypes)))}"
        if len(dtypes) > 1:
            raise _NotKept("a parameter group mixes dtypes")
        return f"[torch.zeros(s{dtype}) for s in {shapes!r}]"

    def settings(group, given: dict) -> list[str]:
        out = []
        for key, value in group.items():
            if key == "params" or (key in given and same_value(value, given[key])):
                continue
            text = code_literal(value)
            if text is None:
                raise _NotKept(f"the optimizer's {key}= is a {type(value).__name__}, which has no source form")
            out.append((key, text))
        return out

    groups = optimizer.param_groups
    first = settings(groups[0], defaults)
    plain = len(groups) == 1 and all(k in signature for k, _ in first)
    if plain:
        build = f"torch.optim.{cls.__name__}({', '.join([params(groups[0])] + [f'{k}={v}' for k, v in first])})"
    else:
        items = []
        for group in groups:
            parts = [f"'params': {params(group)}"] + [f"{k!r}: {v}" for k, v in settings(group, defaults)]
            items.append("    {" + ", ".join(parts) + "},")
        build = f"torch.optim.{cls.__name__}([\n" + "\n".join(items) + "\n])"
    _save_state_dict_call(op, {"state_dict": state}, path, ["import torch", ""], {"name": "optimizer", "build": build},
                          "the optimizer's state from the user's training (its moments, its step)")


def _keep_file_load(frame, kind: str, path: str) -> None:
    import json

    given = frame.f_locals.get("fp" if kind == JSON_LOAD else "f")
    source = _file_of(given)
    if source is None:
        raise _NotKept(f"{SPELLED[kind]} read a {type(given).__name__}, not a file on disk")
    size = os.path.getsize(source)
    if size > FILE_MAX_BYTES:
        raise _NotKept(f"the file it read, {os.path.basename(source)}, is {_size(size)} (more than "
                       f"{_size(FILE_MAX_BYTES)} to send with a report)")
    copy = path[:-len(".pt")] + os.path.splitext(source)[1]
    shutil.copyfile(source, copy)
    keywords = _file_keywords(frame, kind)
    name = os.path.basename(source)
    record = {"op": kind, "loading": "file", "what": SPELLED[kind], "file": copy, "bytes": size, "name": name,
              "keywords": keywords, "holds": f"`{name}` as the run wrote it ({_size(size)})"}
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


def _tensors(value, depth: int = 0):
    """The tensors a state dict holds, nested in dicts and lists."""
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 4 and isinstance(value, (dict, list, tuple)):
        for item in (value.values() if isinstance(value, dict) else value):
            yield from _tensors(item, depth + 1)


def _bytes(value) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(value))


def _count_tensors(value) -> int:
    return sum(1 for _ in _tensors(value))


def _size(n: int) -> str:
    if n < 2**10:
        return f"{n} bytes"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"
