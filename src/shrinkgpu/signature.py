"""The first error of a run as a value, and the rule for "same bug".

A reduction is only as faithful as its notion of sameness.  Comparing stderr text is
how general reducers slip (a usage message that happens to echo the error text matches
a substring), so shrinkgpu compares a frozen value built from structured facts the
worker recorded while the script ran:

* the exception class and message of the *root* of the exception chain that ended the
  run -- a wrapper re-raised around it or an error in cleanup code is a consequence,
  not the bug;
* the suspect operator: the outermost torch call that raised it, seen by a
  ``TorchFunctionMode``, with dtype, shape, stride and device of each tensor argument;
* on CUDA, the kernel assertion printed by the device, when there is one.

The message is compared after normalisation (numbers, addresses and paths replaced),
because the same bug legitimately reports ``Target 4`` in one candidate and the tensor
metadata, not the digits, pins the trigger down.  The source location is recorded for
the report but is not part of sameness: reductions move lines by design.

This module is plain data: it imports no torch and nothing of ours but the families
(``shrinkgpu.families``: error families and the parsers of what devices print), so the
worker (which fills it in) and the reducer (which compares) share one definition.
"""

from __future__ import annotations

import enum
import io
import re
import tokenize
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from shrinkgpu.families import (
    COMPILE_MARKERS,
    Family,
    classify_family,
    compile_identity,
    family_matches,
    parse_kernel_assertion,
    parse_native_error,
)

__all__ = [
    "PARTS",
    "contiguous_strides",
    "first_difference",
    "is_compiled_callable",
    "ExceptionRecord",
    "Family",
    "Frame",
    "OpRecord",
    "Signature",
    "Strictness",
    "Target",
    "TensorMeta",
    "batch_compatible",
    "choose_first_error",
    "classify_family",
    "normalize_message",
    "parse_kernel_assertion",
    "tensors_agree",
    "values_agree",
    "varying_dims",
]


@dataclass(frozen=True)
class TensorMeta:
    """What the trigger depends on, for one tensor argument of the suspect operator."""

    path: str  # where the tensor sat in the call: "args[0]", "kwargs['target']", "args[0][2]"
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...] | None  # None for layouts without strides (sparse, nested)
    device: str
    # Whether every value of a floating-point tensor on the CPU was finite (None: not a
    # floating-point CPU tensor, or not recorded).  Some checks take three conditions in
    # one message (multinomial's "inf, nan or element < 0"): an inf that training made
    # and a negative number a candidate made are two bugs.  Compared when both know it
    # (``values_agree``), so that a case file written before it was recorded still
    # matches.
    finite: bool | None = field(default=None, compare=False)

    def describe(self) -> str:
        shape = ", ".join(map(str, self.shape))
        stride = "n/a" if self.stride is None else ", ".join(map(str, self.stride))
        held = ", holds inf or nan" if self.finite is False else ""
        return f"{self.path}: {self.dtype}[{shape}] stride ({stride}) on {self.device}{held}"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TensorMeta":
        stride = data.get("stride")
        return cls(
            path=data["path"],
            dtype=data["dtype"],
            shape=tuple(data["shape"]),
            stride=None if stride is None else tuple(stride),
            device=data["device"],
            finite=data.get("finite"),
        )


def values_agree(mine: tuple[TensorMeta, ...], theirs: tuple[TensorMeta, ...]) -> bool:
    """No tensor at the operator holds an inf or a NaN in one run and only finite values
    in the other (where both runs know)."""
    other = {t.path: t.finite for t in theirs}
    return all(
        t.finite is None or other.get(t.path) is None or t.finite == other[t.path] for t in mine
    )


@dataclass(frozen=True)
class Frame:
    """The innermost frame of the user's own code when the error was raised."""

    file: str  # relative to the run's root directory
    line: int
    function: str
    source: str
    # The callable of the call the frame was making when the error came through it, as
    # the source spells it (``AUROC`` in ``self.auroc = AUROC(num_classes=n)``); None
    # when the line raised otherwise (``raise``, an operator) or Python does not say.
    callee: str | None = None

    def same_place(self, other: "Frame | None") -> bool:
        """Whether ``other`` raised where this frame did, for an error no torch call
        raised: in a call of the same callable when both frames were calling one (the
        statement around the call, ``self.auroc = ...`` or none, and its arguments, which
        the message speaks for, are the program's), else on the same source line."""
        if other is None:
            return False
        if self.callee is not None and other.callee is not None:
            return self.callee == other.callee
        return self.source == other.source

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Frame | None":
        return None if data is None else cls(**data)


@dataclass(frozen=True)
class OpRecord:
    """A torch call that raised, as the worker's TorchFunctionMode saw it."""

    name: str
    tensors: tuple[TensorMeta, ...]
    others: tuple[str, ...] = ()  # short reprs of every non-tensor argument, for the report
    # ``name=value`` of each non-tensor argument that differs from its default (or has
    # none): part of the operator's contract, kept in strict mode
    arguments: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "OpRecord | None":
        if data is None:
            return None
        return cls(
            name=data["name"],
            tensors=tuple(TensorMeta.from_json(t) for t in data.get("tensors", ())),
            others=tuple(data.get("others", ())),
            arguments=tuple(data.get("arguments", ())),
        )


@dataclass(frozen=True)
class ExceptionRecord:
    """One exception as the worker recorded it (no live objects: it crossed a process)."""

    type: str  # qualified class name, e.g. "torch.OutOfMemoryError", "IndexError"
    message: str
    frame: Frame | None = None
    op: OpRecord | None = None  # set when a torch call raised exactly this exception
    ident: int = 0  # identity inside the run, to relate chain members and torch errors
    stack: tuple[tuple[str, int], ...] = ()  # (file, line) of the user's frames, outermost first
    call: int | None = None  # the N-th call of its operator in the run
    raised_by: str | None = None  # the innermost module of torch on its traceback

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ExceptionRecord":
        return cls(
            call=data.get("call"),
            raised_by=data.get("raised_by"),
            type=data["type"],
            message=data["message"],
            frame=Frame.from_json(data.get("frame")),
            op=OpRecord.from_json(data.get("op")),
            ident=data.get("ident", 0),
            stack=tuple((f, int(n)) for f, n in data.get("stack", ())),
        )


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    """The strides of a contiguous (row-major) tensor of ``shape``."""
    stride, out = 1, []
    for size in reversed(shape):
        out.append(stride)
        stride *= max(size, 1)
    return list(reversed(out))


def _layout(t: "TensorMeta") -> tuple | None:
    """What of a tensor's strides does not depend on its sizes: the order of its
    dimensions in memory and whether they are packed without gaps."""
    stride = t.stride
    if stride is None:
        return None
    order = tuple(sorted(range(len(stride)), key=lambda d: (stride[d], -d)))
    packed, expected = True, 1
    for d in order:
        if t.shape[d] != 1 and stride[d] != expected:
            packed = False
        expected *= max(t.shape[d], 1)
    return order, packed


def batch_compatible(mine: tuple["TensorMeta", ...], theirs: tuple["TensorMeta", ...]) -> bool:
    """``Strictness.BATCH``: the same tensors but for a batch dimension that shrank."""
    if len(mine) != len(theirs):
        return False
    firsts = [t.shape[0] for t in mine if t.shape]
    batch = {n for n in firsts if firsts.count(n) > 1}
    if len(mine) == 1 and firsts:
        batch = {firsts[0]}
    new_size: dict[int, int] = {}
    for a, b in zip(mine, theirs):
        if (a.path, a.dtype, a.device, len(a.shape)) != (b.path, b.dtype, b.device, len(b.shape)):
            return False
        if not a.shape:
            continue
        if a.shape[0] in batch:
            if b.shape[0] < 1 or new_size.setdefault(a.shape[0], b.shape[0]) != b.shape[0]:
                return False  # input and target must still have as many rows as each other
        elif a.shape[0] != b.shape[0]:
            return False
        if a.shape[1:] != b.shape[1:] or _layout(a) != _layout(b):
            return False
    return True


def varying_dims(op: "OpRecord", seen: Mapping[str, Sequence[Sequence[int]]]) -> frozenset[tuple[str, int]]:
    """(argument, dimension) of the failing operator's tensors whose size took more than one
    value across the original run's calls of that operator (``seen``: the shapes each
    argument had, of its calls): a sequence a loop grows, a batch that is short at the end.
    Such a dimension is the program's, not the bug's."""
    out = set()
    for t in op.tensors:
        shapes = [tuple(s) for s in seen.get(t.path, ()) if len(s) == len(t.shape)]
        for d in range(len(t.shape)):
            if len({s[d] for s in shapes}) > 1:
                out.add((t.path, d))
    return frozenset(out)


def tensors_agree(mine: tuple["TensorMeta", ...], theirs: tuple["TensorMeta", ...],
                  free: frozenset[tuple[str, int]]) -> bool:
    """The same tensors at the operator, but for the dimensions in ``free`` (whose sizes
    may differ; the memory layout of such a tensor is compared instead of its strides)."""
    if not free:
        return mine == theirs
    if len(mine) != len(theirs):
        return False
    for a, b in zip(mine, theirs):
        if (a.path, a.dtype, a.device, len(a.shape)) != (b.path, b.dtype, b.device, len(b.shape)):
            return False
        loose = {d for path, d in free if path == a.path}
        if any(a.shape[d] != b.shape[d] for d in range(len(a.shape)) if d not in loose):
            return False
        if loose:
            if _layout(a) != _layout(b):
                return False
        elif a.stride != b.stride:
            return False
    return True


class Strictness(str, enum.Enum):
    # class, message, operator, tensor metadata and the operator's other arguments
    # (those that differ from their defaults: reduction='none', ignore_index=255, dim=1)
    STRICT = "strict"
    # as strict, but a batch dimension may shrink: the first dimension shared by several
    # tensor arguments (the rows of an input and of its target; the first dimension of a
    # lone tensor argument), changed consistently, with the same dtype, device and
    # memory layout (stride order and contiguity); every other dimension stays
    BATCH = "batch"
    TENSORS = "tensors"  # the other arguments may change
    OPERATOR = "operator"  # tensor metadata may change too; class, message and operator may not


# Lines that torch appends to CUDA errors: advice, not part of the error's identity, and
# they vary with build flags and environment.
_BOILERPLATE = re.compile(
    r"^\s*((CUDA|HIP) kernel errors might be asynchronously reported"
    r"|For debugging consider passing ((CUDA|HIP)_LAUNCH_BLOCKING|AMD_SERIALIZE_KERNEL)"
    r"|Compile with `TORCH_USE_(CUDA|HIP)_DSA`"
    r"|Search for `(cuda|hip)\w+' in https?://"
    r"|For more detailed error information, run with CUDA_LOG_FILE"
    r"|Device-side assertions were explicitly omitted"
    r"|Exception raised from "
    r"|frame #\d+"
    r"|Device-side assertion tracking was not enabled"
    r"|If reporting a bug to PyTorch"
    r")",
)
# A gloo peer that went away, said two ways as TCP happens to end it (a FIN: "closed";
# an RST after its process exited without closing: "Read error ... reset"): one fact
# about the peer, whichever, with the advice gloo appends.
_PEER_GONE = re.compile(
    r"\[[^\]]*pair\.cc:\d+\]\s*(?:Read error \S*: )?Connection (?:closed|reset) by peer\S*.*", re.S)
_PATH = re.compile(r"(?:[A-Za-z]:\\|~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+")
_DIMS = re.compile(r"\b\d+(?:x\d+)+\b")  # "2x4" in shape messages
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w)")
_SPACE = re.compile(r"[ \t]+")
# The operator's name ahead of a check's message, as newer releases put it there
# (``addmm: mat1 and mat2 shapes cannot be multiplied`` where 2.13 says ``mat1 and mat2
# ...``): which release wrote the message, not which bug; the operator is compared apart.
_OP_PREFIX = re.compile(r"\A[a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)?: (?=\S)")


# An allocator's out-of-memory message goes on with the state of the device's memory
# ("Tried to allocate 20.00 MiB. GPU 0 has a total capacity of ... of which ... is free.
# Including non-PyTorch memory, ..."): byte counts and wording vary from run to run and
# release to release; the bug is the first sentence.
_OOM_HEAD = re.compile(r"^(.*?\bout of memory\b\.?)", re.I | re.S)


# A traceback inside a message: a DataLoader worker's error re-raised in the main process
# ("Caught ValueError in DataLoader worker process 0.\nOriginal Traceback (most recent call
# last): ..."), a rank's under torch.multiprocessing.spawn ("-- Process 0 terminated with
# the following error:\nTraceback ...").
_TRACEBACK_HEAD = re.compile(r"^[ \t]*(?:Original )?Traceback \(most recent call last\):[ \t]*$", re.M)
_CARETS = re.compile(r"^[\s^~]+$")


def _code_only(line: str) -> str:
    """A source line without its comment."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return line
    comment = next((t for t in tokens if t.type == tokenize.COMMENT), None)
    return line[:comment.start[1]].rstrip() if comment is not None else line


def fold_tracebacks(message: str) -> str:
    """Each traceback quoted in a message reduced to what identifies the bug: the
    expression that raised (what Python marks under the innermost frame's source line,
    else that line without its comment) and the exception it ended with.  The frames between
    quote the program's lines and line numbers (``unit, ts, label, values =
    self.parse(self.lines[i])``), and inlining ``parse`` or editing a comment there is not
    another bug."""
    for _ in range(8):  # a chain quotes one traceback per exception
        head = _TRACEBACK_HEAD.search(message)
        if head is None:
            break
        lines = message[head.end():].split("\n")
        source, tail, last = None, len(lines), ""
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            if line[:1] not in (" ", "\t"):
                tail = i
                break
            text = line.strip()
            if _CARETS.match(line) and last:
                # Python's marks under the source line: the very expression that raised
                marked = "".join(c for c, m in zip(last, line) if m in "^~").strip()
                source = marked or source
            elif not (text.startswith("File ") or text.startswith("[Previous line repeated")):
                last, source = line, _code_only(text)
        where = f"raised at: {source}" if source else "raised"
        message = message[:head.start()] + f"<traceback {where}>\n" + "\n".join(lines[tail:])
    return message


def normalize_message(message: str) -> str:
    """The part of a message that names the bug, without the values that vary with it
    (and, for a torch.compile error, without what quotes the program: ``compile_identity``;
    for a traceback quoted in it, its frames: ``fold_tracebacks``)."""
    if COMPILE_MARKERS.search(message):
        message = compile_identity(message)
    message = fold_tracebacks(message)
    message = _OP_PREFIX.sub("", message.lstrip(), count=1)
    message = _PEER_GONE.sub("gloo: the connection to a peer ended", message)
    lines = [ln for ln in message.splitlines() if ln.strip() and not _BOILERPLATE.match(ln)]
    text = "\n".join(lines)
    oom = _OOM_HEAD.match(text)
    if oom is not None and "Tried to allocate" in text:
        text = oom.group(1)
    text = _PATH.sub("<path>", text)
    text = _HEX.sub("<addr>", text)
    text = _DIMS.sub(lambda m: "x".join("<n>" for _ in m.group().split("x")), text)
    text = _NUMBER.sub("<n>", text)
    return _SPACE.sub(" ", text).strip()


def choose_first_error(
    chain: Sequence[ExceptionRecord], torch_errors: Sequence[ExceptionRecord]
) -> ExceptionRecord | None:
    """Pick the first error of a failed run.

    ``chain`` runs from the exception that ended the run to the root of its
    ``__cause__``/``__context__`` chain; ``torch_errors`` lists, in order, exceptions that
    torch calls raised during the run, caught by the script or not.

    The deepest chain member raised by a torch call is preferred over the plain root: a
    handler that failed while handling an unrelated, harmless exception (a missing
    checkpoint, say) makes that harmless exception the root of the chain.  Then CUDA's
    sticky errors: once a kernel failed, every later call reports the same error, so a
    script that caught the first report and carried on dies at an innocent call; an
    earlier torch error with the same class and normalised message is the real first one.
    torch.compile's own entry (a ``torch._dynamo`` wrapper around the compiled callable)
    is no operator: Dynamo re-raising its tracing error from there
    (``FailOnRecompileLimitHit`` from ``Unsupported: Dynamo recompile limit exceeded``)
    leaves the root first, as Python displays it.
    """
    if not chain:
        return None
    from_torch = [rec for rec in chain if rec.op is not None and not is_compiled_callable(rec.op)]
    first = from_torch[-1] if from_torch else chain[-1]
    key = (first.type, normalize_message(first.message))
    for rec in torch_errors:
        if rec.ident == first.ident:
            break
        if (rec.type, normalize_message(rec.message)) == key:
            return rec
    return first


@dataclass(frozen=True)
class Signature:
    """The first error of a run, reduced to what identifies the bug.

    ``same_bug`` is the one equality rule; everything else here is for people.
    """

    type: str
    message: str
    normalized: str
    op: OpRecord | None
    frame: Frame | None
    kernel_assertion: str | None = None
    family: Family = Family.OTHER
    caught_earlier: tuple[str, ...] = field(default=(), compare=False)
    # Where the error happened in the user's code (call chain): facts for passes, not identity.
    stack: tuple[tuple[str, int], ...] = field(default=(), compare=False)
    # A death by signal: the last lines the process printed on stderr, normalised (what a
    # dying runtime says), compared when no kernel assertion identifies the crash.
    crash_tail: tuple[str, ...] = ()
    call: int | None = field(default=None, compare=False)  # the N-th call of the operator (the report)
    # ``Class: message`` of what a ``raise ... from None`` hid under the first error (what
    # the code was handling): not shown by Python, so not the first error, but text a
    # user may copy into --keep-error, and the report shows it.
    suppressed: str | None = field(default=None, compare=False)
    # The innermost module of torch the error's traceback passed through (the family and
    # the compile stage read it: AOT autograd's runtime raising in a compiled backward).
    raised_by: str | None = field(default=None, compare=False)

    @classmethod
    def from_record(
        cls,
        rec: ExceptionRecord,
        *,
        output: str = "",
        caught_earlier: Iterable[str] = (),
        suppressed: "ExceptionRecord | None" = None,
    ) -> "Signature":
        return cls(
            type=rec.type,
            message=rec.message,
            normalized=normalize_message(rec.message),
            op=rec.op,
            frame=rec.frame,
            kernel_assertion=(kernel := parse_kernel_assertion(output) or parse_kernel_assertion(rec.message)),
            family=classify_family(rec.type, rec.message, kernel, rec.raised_by),
            caught_earlier=tuple(caught_earlier),
            stack=rec.stack,
            call=rec.call,
            suppressed=f"{suppressed.type}: {suppressed.message}" if suppressed is not None else None,
            raised_by=rec.raised_by,
        )

    @classmethod
    def for_signal(
        cls, signum: int, name: str, output: str = "", stderr: str = "", frame: Frame | None = None
    ) -> "Signature":
        """A process killed by a signal: what identifies it is the kernel assertion the
        device printed, or else the last user frame (from faulthandler) together with
        the last lines on stderr; never the signal number alone."""
        native = parse_native_error(output)
        message = f"killed by signal {signum} ({name})"
        normalized = f"killed by signal {name}"
        if native is not None:
            message += f": {native[0]}: {native[1]}"
            normalized += f": {native[0]}: {normalize_message(native[1])}"
        return cls(
            type=f"signal.{name}",
            message=message,
            normalized=normalized,
            op=None,
            frame=frame,
            kernel_assertion=parse_kernel_assertion(output),
            family=Family.CRASH,
            crash_tail=crash_tail(stderr),
        )

    @property
    def on_gpu(self) -> bool:
        """Whether the bug showed on a GPU: a tensor of the failing operator on one, a
        kernel's assertion, or an error of the CUDA or HIP runtime."""
        if self.kernel_assertion:
            return True
        if self.op is not None and any(t.device.startswith(("cuda", "hip")) for t in self.op.tensors):
            return True
        return bool(re.search(r"\b(CUDA|HIP|cuDNN|CUBLAS|cuBLAS) (error|failure)|device-side assert", self.message))

    @property
    def headline(self) -> str:
        """``Class: first line of the message``, and its next line when the first ends
        with a colon (``Error(s) in loading state_dict for Net:`` says nothing without
        ``size mismatch for fc.weight: ...``, Inductor's ``backend='inductor' raised:``
        nothing without the error it raised)."""
        lines = [ln.strip() for ln in self.message.strip().splitlines() if ln.strip()]
        first = lines[0] if lines else ""
        if first.endswith(":") and len(lines) > 1:
            first = f"{first} {lines[1]}"
        return f"{self.type}: {first}" if first else self.type

    def keep_text(self) -> str:
        """All text a ``--keep-error`` pattern may match: class and message (every line of
        it), the kernel assertion, and what a ``raise ... from None`` hid under it."""
        parts = [f"{self.type}: {self.message}"]
        if self.kernel_assertion:
            parts.append(self.kernel_assertion)
        if self.suppressed:
            parts.append(self.suppressed)
        return "\n".join(parts)

    def same_bug(self, other: "Signature", strictness: Strictness = Strictness.STRICT,
                 free: frozenset[tuple[str, int]] = frozenset()) -> bool:
        """The one equality rule.  ``free``: (argument, dimension) at the operator whose
        size the original program itself varied (``varying_dims``): not the bug's."""
        if (self.type, self.normalized) != (other.type, other.normalized):
            return False
        if self.kernel_assertion != other.kernel_assertion:
            return False
        if self.type.startswith("signal."):
            if self.kernel_assertion is not None:
                return True  # the device said which kernel and which check
            # Any two aborts are not one bug: the same last frame and the same last words.
            return (
                self.frame is not None
                and other.frame is not None
                and self.frame.source == other.frame.source
                and _tails_agree(self.crash_tail, other.crash_tail)
            )
        if (self.family is Family.COMPILE and other.family is Family.COMPILE
                and is_compiled_callable(self.op) and is_compiled_callable(other.op)):
            # Raised by torch.compile's entry (``OptimizedModule.__call__`` for a compiled
            # module, ``compile_wrapper`` for a compiled function) or by no torch call:
            # which wrapper Dynamo put around the callable, and the line that called it,
            # are how the program happened to compile and call it, not the bug; the
            # message's head and graph-break id name it.
            return True
        if self.op is None or other.op is None:
            # An error no torch call raised: all that identifies its place is the call
            # (or else the statement) that raised it.
            if self.op is not other.op:
                return False
            if self.frame is None or other.frame is None:
                return self.frame is other.frame
            return self.frame.same_place(other.frame)
        if self.op.name != other.op.name:
            return False
        if strictness is Strictness.OPERATOR:
            return True
        if not values_agree(self.op.tensors, other.op.tensors):
            return False
        if strictness is Strictness.BATCH:
            return batch_compatible(self.op.tensors, other.op.tensors) and self.op.arguments == other.op.arguments
        if not tensors_agree(self.op.tensors, other.op.tensors, free):
            return False
        return strictness is Strictness.TENSORS or self.op.arguments == other.op.arguments

    def differences(self, other: "Signature") -> list[str]:
        """Why ``other`` is not the same bug, in words, for progress logs and errors."""
        out = []
        if self.type != other.type:
            out.append(f"class {other.type} instead of {self.type}")
        if self.normalized != other.normalized:
            out.append(f"message {other.headline!r}")
        if self.kernel_assertion != other.kernel_assertion:
            out.append("different kernel assertion")
        mine, theirs = self.op, other.op
        if mine is None and theirs is None:
            a = self.frame.source if self.frame else None
            b = other.frame.source if other.frame else None
            if not (self.frame.same_place(other.frame) if self.frame else other.frame is None):
                out.append(f"raised by {b!r} instead of {a!r}")
        if (mine is None) != (theirs is None) or (mine and theirs and mine.name != theirs.name):
            out.append(f"operator {theirs.name if theirs else None} instead of {mine.name if mine else None}")
        elif mine and theirs and mine.tensors != theirs.tensors:
            out.append("different tensor dtype/shape/stride/device at the operator")
        elif mine and theirs and mine.arguments != theirs.arguments:
            out.append(
                "different arguments at the operator ("
                + (", ".join(theirs.arguments) or "all defaults")
                + " instead of "
                + (", ".join(mine.arguments) or "all defaults")
                + ")"
            )
        if self.type.startswith("signal.") and self.kernel_assertion is None:
            if (self.frame and self.frame.source) != (other.frame and other.frame.source):
                out.append("a different last frame")
            if not _tails_agree(self.crash_tail, other.crash_tail):
                out.append("different last lines on stderr")
        return out

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["family"] = self.family.value
        data["headline"] = self.headline
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Signature":
        return cls(
            type=data["type"],
            message=data["message"],
            normalized=data["normalized"],
            op=OpRecord.from_json(data.get("op")),
            frame=Frame.from_json(data.get("frame")),
            kernel_assertion=data.get("kernel_assertion"),
            family=Family(data.get("family", Family.OTHER.value)),
            caught_earlier=tuple(data.get("caught_earlier", ())),
            stack=tuple((f, int(n)) for f, n in data.get("stack", ())),
            crash_tail=tuple(data.get("crash_tail", ())),
            call=data.get("call"),
            suppressed=data.get("suppressed"),
            raised_by=data.get("raised_by"),
        )

    def describe(self) -> str:
        lines = [self.headline, f"  family: {self.family.value}"]
        if self.op is not None:
            lines.append(f"  operator: {self.op.name}")
            for t in self.op.tensors:
                lines.append(f"    {t.describe()}")
            for o in self.op.others:
                lines.append(f"    {o}")
            if self.op.arguments:
                lines.append(f"  kept arguments: {', '.join(self.op.arguments)}")
        else:
            lines.append("  operator: none (not raised by a torch call)")
        if self.kernel_assertion:
            lines.append(f"  kernel assertion: {self.kernel_assertion}")
        if self.frame is not None:
            lines.append(f"  at {self.frame.file}:{self.frame.line} in {self.frame.function}: {self.frame.source}")
        if self.suppressed:
            hidden = self.suppressed.strip().splitlines()[0]
            lines.append(f"  raised while handling (hidden by `raise ... from None`): {hidden}")
        for c in self.caught_earlier:
            lines.append(f"  note: the script caught an earlier torch error: {c}")
        return "\n".join(lines)


CRASH_TAIL_LINES = 3
# What the dying process printed last is what tells crashes apart; progress and warnings
# are not that, and the faulthandler dump goes to its own file.
_NOISE = re.compile(r"^\s*(\d+%\||Epoch \d|warnings\.warn|.*Warning: )")


def is_compiled_callable(op: "OpRecord | None") -> bool:
    """Whether the suspect is torch.compile's own entry point (or there is none): a
    Dynamo wrapper, not an operator of the user's call."""
    return op is None or op.name.startswith("torch._dynamo.")


@dataclass(frozen=True)
class Target:
    """The bug to keep: the original's first error, and what the user said to keep.

    The one same-bug decision: the first run's checks, the oracle's verdicts, the final
    checks and ``verify`` all ask it."""

    signature: Signature
    pattern: re.Pattern[str] | None = None  # --keep-error
    strictness: Strictness = Strictness.STRICT
    family: Family | None = None  # --family: the first error must be a face of it
    # (argument, dimension) at the operator that the original program varied across its
    # calls (``varying_dims``): a candidate that differs only there is the same bug
    free: frozenset[tuple[str, int]] = frozenset()

    def mismatch(self, sig: Signature | None) -> str | None:
        """Why ``sig`` is not the bug to keep, or None when it is: ``"no error"``,
        ``"keep-error"`` (the pattern does not match), ``"family"`` (not a face of the
        family asked for) or ``"other bug"`` (not the same bug as the original's)."""
        if sig is None:
            return "no error"
        if self.pattern is not None and not self.pattern.search(sig.keep_text()):
            return "keep-error"
        if self.family is not None and not family_matches(self.family, sig.family, sig.kernel_assertion):
            return "family"
        if not self.signature.same_bug(sig, self.strictness, self.free):
            return "other bug"
        return None

    def matches(self, sig: Signature | None) -> bool:
        return self.mismatch(sig) is None


# The parts of a first error that ``Signature.same_bug`` compares, in the order
# ``first_difference`` names the first one that differs.
PARTS = ("class", "message", "kernel assertion", "crash", "operator", "statement", "values", "tensors", "dtype",
         "device", "shape", "stride", "arguments")


def first_difference(original: Signature, other: Signature, strictness: Strictness = Strictness.STRICT,
                     free: frozenset[tuple[str, int]] = frozenset()) -> str | None:
    """The first part of ``PARTS`` in which ``other`` is not ``original``'s bug by
    ``original.same_bug(other, strictness, free)``, or None when it is the same bug.

    For whoever must say *why* a rewrite is another bug (``shrinkgpu check``): the class,
    the message (normalised), the kernel assertion, the crash (a death by signal: its
    last frame and last words), the operator (or none where there was one), the
    statement (an error no torch call raised: the one that raised it), the values
    (inf/NaN at the operator), the tensors (how many, which arguments), then their
    dtype, device, shape and stride, and the operator's other arguments."""
    if original.type != other.type:
        return "class"
    if original.normalized != other.normalized:
        return "message"
    if original.kernel_assertion != other.kernel_assertion:
        return "kernel assertion"
    if original.type.startswith("signal."):
        return None if original.same_bug(other, strictness, free) else "crash"
    if (original.family is Family.COMPILE and other.family is Family.COMPILE
            and is_compiled_callable(original.op) and is_compiled_callable(other.op)):
        return None
    mine, theirs = original.op, other.op
    if mine is None or theirs is None:
        if mine is not theirs:
            return "operator"
        return None if original.same_bug(other, strictness, free) else "statement"
    if mine.name != theirs.name:
        return "operator"
    if strictness is Strictness.OPERATOR:
        return None
    if not values_agree(mine.tensors, theirs.tensors):
        return "values"
    if strictness is Strictness.BATCH:
        if not batch_compatible(mine.tensors, theirs.tensors):
            return _tensor_part(mine.tensors, theirs.tensors, frozenset(), batch=True)
    elif not tensors_agree(mine.tensors, theirs.tensors, free):
        return _tensor_part(mine.tensors, theirs.tensors, free)
    if strictness is not Strictness.TENSORS and mine.arguments != theirs.arguments:
        return "arguments"
    return None


def _tensor_part(mine: tuple[TensorMeta, ...], theirs: tuple[TensorMeta, ...], free: frozenset[tuple[str, int]],
                 batch: bool = False) -> str:
    """Which part of the tensors at the operator differs, the part first and the tensor
    second: a cut that made every tensor float64 changed the dtype, not a shape."""
    if len(mine) != len(theirs) or any(a.path != b.path for a, b in zip(mine, theirs)):
        return "tensors"
    pairs = list(zip(mine, theirs))
    if any(a.dtype != b.dtype for a, b in pairs):
        return "dtype"
    if any(a.device != b.device for a, b in pairs):
        return "device"

    def loose(a: TensorMeta) -> set[int]:
        if batch:
            return {0}  # batch_compatible decides the batch dimension itself
        return {d for path, d in free if path == a.path}

    for a, b in pairs:
        if len(a.shape) != len(b.shape):
            return "shape"
        if any(a.shape[d] != b.shape[d] for d in range(len(a.shape)) if d not in loose(a)):
            return "shape"
    for a, b in pairs:
        if (_layout(a) != _layout(b)) if loose(a) else (a.stride != b.stride):
            return "stride"
    # what is left: a batch that shrank in one tensor and not in another
    return "shape"


def crash_tail(stderr: str) -> tuple[str, ...]:
    """The last few lines a crashed process wrote on stderr, normalised."""
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not _NOISE.match(ln)]
    return tuple(normalize_message(ln) for ln in lines[-CRASH_TAIL_LINES:])


def _tails_agree(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """The last lines two crashes printed agree as far as both go: a reduction may remove
    a line the script printed before dying, never the dying words themselves."""
    n = min(len(a), len(b))
    if n == 0:
        return not a and not b
    return a[len(a) - n :] == b[len(b) - n :]
