"""The failing call alone: a standalone script that rebuilds its arguments and makes it.

Deletion keeps the program's own way to the bug, which shows where the bad values come
from.  A maintainer also wants the operator's contract on its own: ``F.cross_entropy``
with a ``float32[32, 4]`` input and an ``int64[32]`` target holding a 4.  Extraction
runs the original once more with the probe told to save the N-th call of the failing
operator just before it runs (on a GPU its values cannot be read after the kernel
failed), then writes scripts with the least data that still fails, each checked in a
fresh interpreter against the signature:

1. **metadata**: floating-point tensors random, of the same dtype, shape, strides,
   storage offset and device (tensors that shared a storage share one again), but one
   that holds a NaN or an inf exact (random numbers cannot carry that value, and would
   fail the same check for another reason); integer and bool tensors (labels, indices,
   masks) exact.  An index is never replaced by made-up values.
2. **exact**: every tensor exact.

At both levels an exact tensor is written inline, as the literal of its values, when it
is small (``syntax.values``), else loaded from the ``.pt`` beside the script: a script
that loads nothing runs alone.

The first that reproduces the same bug is kept, as ``<stem>.extracted.py`` (with
``<stem>.extracted.pt`` when it reads one).  A failure that its arguments cannot carry
(in ``backward``, the autograd graph; a call on an object that is not a tensor) is
said, with the reason.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Union

from shrinkgpu.families import Family
from shrinkgpu.results import Extraction
from shrinkgpu.signature import Signature, Target, contiguous_strides, is_compiled_callable
from shrinkgpu.syntax.values import EXACT, is_floating, tensor_source, value_source
from shrinkgpu.worker import Capture, ExecutorFactory, Isolation, Observation, Runner, ScriptSpec, Watch

MAX_LINES = 8  # beyond imports: what a maintainer reads at a glance


class ExtractionFailed(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def capture_call(runner: Runner, files: dict[str, str], sig: Signature, where: Path, timeout: float,
                 env: dict | None = None) -> dict:
    """Run ``files`` once with the failing call saved before it runs; its record."""
    capture = capture_of(sig, where / "call.pt")
    obs = runner.run(files, timeout=timeout, watch=Watch(capture=capture), env=env or {})
    if not Path(capture.path + ".json").is_file():
        raise ExtractionFailed(f"the call was not reached in the capture run ({obs.describe()})")
    return read_record(Path(capture.path))


def capture_of(sig: Signature, path: Path) -> Capture:
    """What a run is told to save of the failing call, to ``path`` (why not, when it
    cannot be)."""
    if compiled_call(sig):
        raise ExtractionFailed("the compiled function's inputs are read as its call raises (Dynamo fails before "
                               "the compiled code runs): the run did not keep them")
    if sig.op is None:
        raise ExtractionFailed("the first error was not raised by a torch call: there is no call to extract")
    if sig.call is None:
        # (a call the torch function mode saw is numbered; a check torch's Python code
        # made of a module's inputs is not, and no capture would see it)
        raise ExtractionFailed(
            f"the error is raised by {sig.op.name}'s own check of its inputs, before any operator ran: the call is "
            "not captured; the minimal example shows it"
        )
    if sig.op.name.endswith("backward"):
        raise ExtractionFailed(
            f"the error is raised in {sig.op.name}: it depends on the autograd graph that produced the tensor, "
            "which the call's arguments do not carry; the minimal example keeps that graph"
        )
    return Capture(op=sig.op.name, call=sig.call or 1, path=str(path))


def _name(where: str) -> str:
    """A variable name for an argument's place: args[0] -> x0, kwargs['weight'] -> weight."""
    if where.startswith("args["):
        inner = where[5:].replace("][", "_").replace("]", "").replace("[", "_").replace("'", "")
        return "x" + inner
    inner = where[len("kwargs['"):].replace("']", "").replace("[", "_").replace("]", "").replace("'", "")
    return inner if inner.isidentifier() else "k_" + "".join(c if c.isalnum() else "_" for c in inner)


def _extent(meta: dict) -> int:
    if not meta["shape"] or 0 in meta["shape"]:
        return meta["offset"] + 1
    return meta["offset"] + sum((s - 1) * st for s, st in zip(meta["shape"], meta["stride"])) + 1


# The public names of functions a torch function mode sees under their private module:
# they are the very same objects (``F.linear is torch._C._nn.linear``, from torch 2.1 on;
# ``torch.sparse.mm is torch._C._sparse._sparse_mm``, ``torch.linalg.inv`` is
# ``torch._C._linalg.linalg_inv``).  (A table: the parent never imports torch; the
# extracted call is checked in a fresh interpreter, so a name a release lacks is caught.)
_FUNCTIONAL = {
    "avg_pool2d": "avg_pool2d", "avg_pool3d": "avg_pool3d", "elu_": "elu_", "gelu": "gelu",
    "hardtanh_": "hardtanh_", "leaky_relu_": "leaky_relu_", "linear": "linear", "one_hot": "one_hot",
    "scaled_dot_product_attention": "scaled_dot_product_attention", "softplus": "softplus",
    "softshrink": "softshrink", "log_sigmoid": "logsigmoid",
}
_SPARSE = {"_sparse_mm": "mm", "_sparse_addmm": "addmm", "_sparse_softmax": "softmax",
           "_sparse_log_softmax": "log_softmax", "_spdiags": "spdiags", "_spsolve": "spsolve",
           "sparse_sampled_addmm": "sampled_addmm"}
# torch.fft, torch.linalg and torch.special are generated from torch._C's functions of
# the same name after a prefix: ``fft_rfft`` is ``torch.fft.rfft``.
_PREFIXED = {"torch._C._fft": ("fft_", "torch.fft"), "torch._C._linalg": ("linalg_", "torch.linalg"),
             "torch._C._special": ("special_", "torch.special")}


def public_name(op: str) -> str:
    """The name a user writes for an operator the probe recorded by its private module."""
    module, _, name = op.rpartition(".")
    if module == "torch._C._nn" and name in _FUNCTIONAL:
        return f"torch.nn.functional.{_FUNCTIONAL[name]}"
    if module == "torch._C._sparse" and name in _SPARSE:
        return f"torch.sparse.{_SPARSE[name]}"
    if module in _PREFIXED and name.startswith(_PREFIXED[module][0]) and len(name) > len(_PREFIXED[module][0]):
        prefix, public = _PREFIXED[module]
        return f"{public}.{name[len(prefix):]}"
    return op


def render(record: dict, level: str, data_name: str) -> tuple[str, bool, int]:
    """The script for a captured call at ``level``; (text, whether it loads the data
    file, lines beyond imports)."""
    meta: dict[str, dict] = record["meta"]
    body: list[str] = []
    loads = False
    bases: dict[str, str] = {}  # storage group root -> its base variable
    names: dict[str, str] = {}
    for where, m in meta.items():
        name = _name(where)
        names[where] = name
        device = "" if m["device"] == "cpu" else f".to({m['device']!r})"
        floating = is_floating(m)
        strided = m["stride"] is not None
        # Values that matter (an index, a NaN) or all of them at the exact level: inline
        # when the run recorded them (a small tensor), else from the .pt
        literal = tensor_source(m, EXACT) if level == "exact" or not floating or m.get("nonfinite") else None
        if literal is not None:
            body.append(f"{name} = {literal}")
            continue
        if level == "exact" or not floating or not strided or m.get("nonfinite"):
            loads = True
            expr = f"data[{where!r}]{device}"
        else:
            root = m.get("shares_with") or where
            group = [w for w, mm in meta.items() if (mm.get("shares_with") or w) == root]
            size = max(_extent(meta[w]) for w in group)
            dtype = "" if m["dtype"] == "float32" else f", dtype=torch.{m['dtype']}"
            plain = len(group) == 1 and m["stride"] == contiguous_strides(m["shape"]) and not m["offset"]
            if plain:  # a contiguous tensor of its own: no storage to share
                shape = ", ".join(map(str, m["shape"])) or "()"  # (a 0-d tensor: torch.randn(()))
                expr = f"torch.randn({shape}{dtype}){device}"
                if m.get("requires_grad"):
                    expr = f"{expr}.requires_grad_()"
                body.append(f"{name} = {expr}")
                continue
            if root not in bases:
                bases[root] = f"base{len(bases)}"
                body.append(f"{bases[root]} = torch.randn({size}{dtype}){device}")
            if m["shape"] == [size] and m["stride"] == [1] and not m["offset"]:
                expr = bases[root]
            else:
                expr = f"{bases[root]}.as_strided({tuple(m['shape'])!r}, {tuple(m['stride'])!r}, {m['offset']})"
        if floating and m.get("requires_grad"):
            expr = f"{expr}.detach().requires_grad_()"
        elif m.get("requires_grad") and level == "exact":
            expr = f"{expr}.requires_grad_()"
        body.append(f"{name} = {expr}")

    def code(node: dict) -> str:
        text = value_source(node, names.get)
        if text is None:
            raise ExtractionFailed(f"an argument of type {_unknown(node)} has no source form")
        return text

    args = [code(a) for a in record["args"]]
    # The keywords a wrapper passed on at their defaults say nothing: the ones the call
    # set are kept (reduction='none', ignore_index=255), and every tensor.
    nondefault = set(record.get("nondefault", record["kwargs"]))
    kwargs = [f"{k}={code(v)}" for k, v in record["kwargs"].items() if k in nondefault or "lit" not in v]
    op = record["op"]
    if op.startswith("Tensor."):
        if not args:
            raise ExtractionFailed(f"{op} was called without its tensor")
        method = op.split(".", 1)[1]
        call = f"{args[0]}.{method}({', '.join(args[1:] + kwargs)})"
    else:
        call = f"{public_name(op)}({', '.join(args + kwargs)})"
    if record.get("preamble"):  # compiled: torch._dynamo.mark_dynamic(x0, 0) and its kin
        body += [f"torch._dynamo.{call_name}({names[where]}, {dim})"
                 for where, m in meta.items() for call_name, dims in m.get("marks", {}).items() for dim in dims]
    built = record.get("module")
    if built is not None:  # a compiled module, built as it was, with its weights at the exact level
        body.append(f"{built['name']} = {built['build']}")
        if level == "exact" and built.get("state"):
            loads = True
            body.append(f"{built['name']}.load_state_dict(data['module'])")
    lines = body + [call]
    # a compiled function: its definition and what it reads, then its inputs and the call
    head = record.get("preamble") or ["import torch", ""]
    if loads:
        head += [f"data = torch.load({data_name!r})"]
    # (a compiled function's definitions count: lines beyond the imports)
    lines_count = len(lines) + loads + sum(1 for ln in record.get("preamble", ())
                                           if ln.strip() and not ln.startswith(("import ", "from ")))
    return "\n".join(head + lines) + "\n", loads, lines_count


def _unknown(node: dict) -> str:
    """The type of the first part of an encoded argument that has no source form."""
    if "unknown" in node:
        return node["unknown"]
    if "module" in node:
        return "module"
    for part in node.get("seq", ()) or node.get("map", {}).values():
        found = _unknown(part)
        if found:
            return found
    return ""


# A check's time limit, or what gives the next check's: a reduction's --max-time asks
# before each check (it raises ``ExtractionFailed`` with why a check is not started).
Timeout = Union[float, Callable[[], float]]


def _limit(timeout: Timeout) -> float:
    return timeout() if callable(timeout) else timeout


def _check(text: str, data: Path | None, data_name: str | None, target: Target, timeout: Timeout,
           env: dict | None, stem: str, executors: ExecutorFactory) -> tuple[Observation, Path]:
    """One run of ``text`` alone in an empty directory, with ``data`` beside it as
    ``data_name`` when it reads one."""
    limit = _limit(timeout)
    work = Path(tempfile.mkdtemp(prefix="shrinkgpu-extract-"))
    script = work / f"{stem}.extracted.py"
    script.write_text(text, encoding="utf-8")
    if data is not None and data_name is not None:
        shutil.copy(data, work / data_name)
    try:
        spec = ScriptSpec(script=script, cwd=work, root=work, env=env, argv0=script.name)
        with Runner(spec, isolation=Isolation.FRESH, executors=executors) as runner:
            runner.start()
            obs = runner.run({script.name: text}, timeout=limit)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return obs, script


def read_record(path: Path) -> dict:
    """The record a capture (or a kept raised call) wrote beside its tensors."""
    sidecar = Path(str(path) + ".json")
    if not sidecar.is_file():
        raise ExtractionFailed("no record of the call was written")
    record = json.loads(sidecar.read_text(encoding="utf-8"))
    if record.get("error"):
        raise ExtractionFailed(f"its tensors could not be saved: {record['error']}")
    record["_data"] = str(path)
    return record


def raised_record(raised: tuple[dict, ...], sig: Signature) -> dict | None:
    """The record of the failing call among the calls a run kept as they raised
    (``Watch.keep_raised``): the one of the signature's operator and call number, when
    its tensors could be read.  For a compiled function's failure, the function the run
    kept, or ExtractionFailed saying why it could not be written."""
    if compiled_call(sig):
        return compiled_record(raised)
    loading = _loading_entry(raised, sig)
    if loading is not None:
        if not loading.get("path"):
            raise ExtractionFailed(f"the failing {loading.get('what', loading['op'])} call could not be kept: "
                                   f"{loading.get('error')}")
        return read_record(Path(loading["path"]))
    if sig.op is None or sig.op.name.endswith("backward"):
        return None  # (a backward needs its autograd graph: capture_of says so)
    found = _raised_op(raised, sig)
    # A torch function a module of torch called, whose own check raised: the module
    # called on its inputs is what the user wrote (``MultiheadAttention(32, 4)(q, k, v)``
    # rather than the function with its weights); the function stays to fall back on
    module = next((e for e in raised if e.get("within") == [sig.op.name, sig.call] and e.get("path")), None)
    if module is not None:
        try:
            record = read_record(Path(module["path"]))
        except (ExtractionFailed, OSError, ValueError):
            return found
        if found is not None:
            record["_instead"] = found
        return record
    return found


def _raised_op(raised: tuple[dict, ...], sig: Signature) -> dict | None:
    """The record the run kept of the signature's own call."""
    for entry in raised:
        if entry.get("within"):
            continue
        op = entry.get("op") or ""
        # a module whose own check raised is kept under the call that builds it
        # (``torch.nn.LSTM(8, 16)``) and is not numbered
        same = (op == sig.op.name and entry.get("call") == (sig.call or 1)) or (
            sig.call is None and entry.get("call") is None and op.split("(", 1)[0] == sig.op.name)
        if same and entry.get("path"):
            try:
                return read_record(Path(entry["path"]))
            except (ExtractionFailed, OSError, ValueError):
                return None
    return None


# the last line of a loader's failing call alone (``worker.probe.loading``)
_LOADER_CALL = re.compile(r"^(model\.load_state_dict|optimizer\.load_state_dict|torch\.load|json\.load)\(", re.M)
INLINE_TEXT = 1000  # characters of a text file written into the extracted call instead of beside it


def _loading_entry(raised: tuple[dict, ...], sig: Signature) -> dict | None:
    """The entry a run kept of a loader's failing call, when the signature's is one: its
    operator (``load_state_dict``, ``torch.load``), or, raised by no torch call, a
    ``json.load`` the user's line was calling."""
    for entry in raised:
        if not entry.get("loading"):
            continue
        if sig.op is not None and entry.get("op") == sig.op.name:
            return entry
        callee = sig.frame.callee if sig.frame is not None else None
        if sig.op is None and entry.get("op") == "json.load" and callee and callee.rsplit(".", 1)[-1] == "load":
            return entry
    return None


def _loading_scripts(record: dict, data_name: str) -> list[tuple[str, str, bool]]:
    """The scripts that make a loader's failing call, in the order they are tried:
    (level, text, whether it reads the file beside it).  ``load_state_dict``: the
    module built as it was, given a state dict of random tensors of the same layouts
    ("metadata": the keys and shapes are what its checks read), then the state dict as
    it was passed, loaded from the file; ``json.load``: a small file's text inline, then
    the file; ``torch.load``: the file."""
    if record.get("loading") == "state_dict":
        receiver = record["receiver"]
        head = list(record["definitions"])
        build = f"{receiver['name']} = {receiver['build']}"
        options = [f"{k}={v['lit']}" for k, v in record["kwargs"].items() if k != "state_dict" and "lit" in v]
        out = []
        state = _state_dict_source(record["kwargs"]["state_dict"], record["meta"])
        if state is not None:
            call = f"{receiver['name']}.{receiver['method']}({', '.join(['state_dict'] + options)})"
            out.append(("metadata", "\n".join(head + [build, f"state_dict = {state}", call]) + "\n", False))
        call = f"{receiver['name']}.{receiver['method']}({', '.join([f'torch.load({data_name!r})'] + options)})"
        out.append(("exact", "\n".join(head + [build, call]) + "\n", True))
        return out
    keywords = "".join(f", {k}={v}" for k, v in record.get("keywords", ()))
    if record["op"] == "json.load":
        out = []
        text = record.get("text")
        if text is not None and len(text) <= INLINE_TEXT:
            out.append(("exact", f"import io\nimport json\n\njson.load(io.StringIO({text!r}){keywords})\n", False))
        out.append(("exact", f"import json\n\njson.load(open({data_name!r}){keywords})\n", True))
        return out
    return [("exact", f"import torch\n\ntorch.load({data_name!r}{keywords})\n", True)]


def _state_dict_source(node: dict, meta: dict[str, dict], indent: str = "") -> str | None:
    """A state dict as source, one entry a line: floating-point tensors random of their
    dtype and shape, the others (a BatchNorm's step count, an index) exact when the run
    recorded their values; None when an entry has no source form."""
    if "map" not in node:
        if "t" not in node:
            return value_source(node, lambda _w: None)
        m = meta[node["t"]]
        device = "" if m["device"] == "cpu" else f".to({m['device']!r})"
        if is_floating(m) and not m.get("nonfinite"):
            dtype = "" if m["dtype"] == "float32" else f", dtype=torch.{m['dtype']}"
            shape = ", ".join(map(str, m["shape"])) or "()"
            return f"torch.randn({shape}{dtype}){device}"
        literal = tensor_source(m, EXACT)
        return None if literal is None else f"{literal}{device}"
    inner = indent + "    "
    items = []
    for key, value in node["map"].items():
        text = _state_dict_source(value, meta, inner)
        if text is None:
            return None
        items.append(f"{inner}{key!r}: {text},")
    return "{}" if not items else "{\n" + "\n".join(items) + f"\n{indent}}}"


def _extract_loading(record: dict, target: Target, output_stem: Path, timeout: Timeout, env: dict | None,
                     executors: ExecutorFactory, say: Callable[[str], None]) -> Extraction:
    """A loader's failing call alone, the first of its scripts that fails the same way
    in a fresh interpreter, written with the file it reads beside it when it reads one."""
    stem = output_stem.name
    data = Path(record["file"])
    data_name = f"{stem}.extracted{data.suffix or '.data'}"
    reasons = []
    for level, text, reads in _loading_scripts(record, data_name):
        obs, _ = _check(text, data if reads else None, data_name, target, timeout, env, stem, executors)
        if not target.matches(obs.signature):
            reasons.append(f"{level}{' with the file' if reads else ''}: {obs.describe()}")
            continue
        lines = sum(1 for ln in text.splitlines() if ln.strip() and not ln.startswith(("import ", "from ")))
        say(f"extracted the failing {record.get('what', record['op'])} call ({level}): {lines} lines"
            + (f", reading {data_name}" if reads else ""))
        path = output_stem.with_name(f"{stem}.extracted.py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        out_data = output_stem.with_name(data_name) if reads else None
        if out_data is not None:
            shutil.copy(data, out_data)
        return Extraction(path, out_data, text, level, lines, obs.signature, None, record["op"],
                          holds=record.get("holds") if reads else None, loader=True)
    raise ExtractionFailed(f"the {record.get('what', record['op'])} call alone did not fail the same way ("
                           + "; ".join(reasons) + "): the bug needs more of the program than the call and what it "
                           "read")


def compiled_call(sig: Signature) -> bool:
    """Whether the failure is a compiled function's (raised at its entry, or by no torch
    call): what is extracted is the function alone, compiled as it was, with the inputs
    it was given."""
    return sig.family is Family.COMPILE and is_compiled_callable(sig.op)


def compiled_record(raised: tuple[dict, ...]) -> dict:
    """The record of the compiled function a run kept as its call raised (the probe's
    ``keep_compiled_call``); why there is none when it could not be written."""
    for entry in raised:
        if not entry.get("compiled"):
            continue
        if entry.get("path"):
            return read_record(Path(entry["path"]))
        raise ExtractionFailed(entry.get("error") or "the compiled function was not saved")
    raise ExtractionFailed("the error did not come out of a compiled function's call (a compiled module, "
                           "or an error raised where torch.compile was called): the minimal example shows it")


def extract(runner: Runner, files: dict[str, str], target: Target, output_stem: Path, timeout: float,
            env: dict | None = None, on_event: Callable[[str], None] | None = None) -> Extraction:
    """Capture the failing call in a run of ``files`` and write the smallest standalone
    script that reproduces ``target`` beside ``output_stem`` (``<dir>/<stem>``)."""
    work = Path(tempfile.mkdtemp(prefix="shrinkgpu-capture-"))
    try:
        record = capture_call(runner, files, target.signature, work, timeout, env)
        return extract_record(record, target, output_stem, timeout, env, runner.executors, on_event)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_extracted(path: Path, target: Target, timeout: Timeout, env: dict | None,
                    executors: ExecutorFactory) -> Extraction | None:
    """An extracted call written earlier (``path``, with its ``.pt`` when it loads one),
    when it still fails as ``target`` in a fresh interpreter (--resume keeps it).  Its
    level is read back from its text: random floating-point tensors are "metadata"."""
    text = path.read_text(encoding="utf-8")
    stem = path.name.removesuffix(".extracted.py")
    # (the tensors it loads, or the file a loader's call reads: named in its text)
    data = next((p for p in sorted(path.parent.glob(f"{stem}.extracted.*"))
                 if p.suffix != ".py" and repr(p.name) in text), None)
    loads = data is not None
    obs, _ = _check(text, data, data.name if data else None, target, timeout, env, stem, executors)
    if not target.matches(obs.signature):
        return None
    body = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("import ", "from "))]
    level = "metadata" if "torch.randn(" in text or not loads else "exact"
    # What the ablation changes, from the check's own record of the call (its values
    # were not kept: a valid-values change clamps without knowing which are out of range).
    op = obs.signature.op
    arguments = () if op is None else tuple(
        (t.path, _name(t.path), {"dtype": t.dtype, "shape": list(t.shape),
                                 "stride": list(t.stride) if t.stride is not None else None, "offset": 0,
                                 "device": t.device, "nonfinite": t.finite is False})
        for t in op.tensors)
    name = op.name if op is not None else (obs.signature.frame.callee if obs.signature.frame else None)
    last = body[-1] if body else ""
    if last.startswith("torch.compile("):  # the compiled code alone: named by its compile call
        name = ast.get_source_segment(last, ast.parse(last).body[0].value.func)
    if _LOADER_CALL.search(text):  # a loader's call and what it reads: no operator's tensors to change
        return Extraction(path, data, text, "metadata" if "torch.randn(" in text else "exact", len(body),
                          obs.signature, None, name, loader=True)
    return Extraction(path, data if loads else None, text, level, len(body), obs.signature, None, name, arguments)


def extract_record(record: dict, target: Target, output_stem: Path, timeout: Timeout, env: dict | None,
                   executors: ExecutorFactory, on_event: Callable[[str], None] | None = None) -> Extraction:
    """The smallest standalone script for a captured call that reproduces ``target``,
    each level checked in a fresh interpreter (through ``executors``), written beside
    ``output_stem``."""
    say = on_event or (lambda _m: None)
    if record.get("loading"):
        return _extract_loading(record, target, output_stem, timeout, env, executors, say)
    data = Path(record["_data"])
    stem = output_stem.name
    data_name = f"{stem}.extracted.pt"
    reasons = []
    for level in ("metadata", "exact"):
        text, loads, lines = render(record, level, data_name)
        obs, _ = _check(text, data if loads else None, data_name, target, timeout, env, stem, executors)
        if target.matches(obs.signature):
            what = "the compiled code alone" if record.get("preamble") else "the failing call"
            say(f"extracted {what} ({level}): {lines} lines")
            path = output_stem.with_name(f"{stem}.extracted.py")
            out_data = output_stem.with_name(data_name) if loads else None
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            if out_data is not None:
                shutil.copy(data, out_data)
            note = None
            if lines > MAX_LINES and not record.get("preamble"):  # (a compiled function's length is its own)
                note = (f"{lines} lines: the call has {len(record['meta'])} tensor arguments, one line each "
                        f"(more than {MAX_LINES})")
            arguments = tuple((where, _name(where), meta) for where, meta in record["meta"].items())
            return Extraction(path, out_data, text, level, lines, obs.signature, note, record["op"], arguments)
        reasons.append(f"{level}: {obs.describe()}")
    if record.get("_instead") is not None:
        return extract_record(record["_instead"], target, output_stem, timeout, env, executors, on_event)
    if record.get("preamble"):
        raise ExtractionFailed(
            "the compiled code alone did not fail the same way (" + "; ".join(reasons) + "): the bug needs the "
            "calls before it (a recompilation, with the guards an earlier call set) or state its inputs do not carry"
        )
    raise ExtractionFailed(
        "the call alone did not fail the same way (" + "; ".join(reasons) + "): the bug needs state its "
        "arguments do not carry (a generator, a module's hooks, the order of earlier calls)"
    )


__all__ = ["Extraction", "ExtractionFailed", "capture_call", "capture_of", "check_extracted", "compiled_call",
           "compiled_record", "extract", "extract_record", "raised_record", "read_record", "render"]

