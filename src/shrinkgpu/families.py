"""Error families and the faces of GPU errors: what a run's output says, read as a value.

The field guide's rule 3: read the error family, do not jump to conclusions.  Each
family has a first check and a conclusion to avoid, for the user (``shrinkgpu run``) and
the maintainer (the report).  A family also links the CPU and GPU faces of one bug: a
class index out of range is ``IndexError: Target 4 is out of bounds.`` on the CPU and a
device-side assert with the kernel assertion ``t >= 0 && t < n_classes`` on CUDA, so a
reduction can keep "an index error" on either.

The parsers here read what the device and the native runtime print, in every form seen
in public reports (tests/data/gpu_transcripts/: the classic per-thread assertion line,
its Windows form without a function, the ``[CUDA_KERNEL_ASSERT]`` form of newer builds,
ROCm's ``Device-side assertion ... failed``, the device-side-assertion-tracking report
inside an exception message, C++ ``terminate`` aborts and HSA exceptions).

Plain data and regular expressions: nothing of ours, no torch.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

__all__ = [
    "Advice",
    "COMPILE_MARKERS",
    "Family",
    "advice_for",
    "classify_family",
    "compile_identity",
    "compile_stage",
    "is_compile_error",
    "family_by_name",
    "family_matches",
    "is_asynchronous",
    "parse_kernel_assertion",
    "parse_native_error",
]


class Family(str, enum.Enum):
    """The error families of the field guide, and the kinds of operator contract errors a
    reduction meets most; each calls for a different first check."""

    DEVICE_ASSERT = "device-side assert"
    OUT_OF_MEMORY = "out of memory"
    MISSING_KERNEL = "operator or kernel not available"
    DEVICE_MISMATCH = "tensors on different devices"
    INDEX = "index out of range"
    SHAPE = "shape mismatch"
    VIEW = "view or stride"
    DTYPE = "dtype mismatch"
    INPLACE = "in-place modification seen by autograd"
    CRASH = "process crashed"
    COMPILE = "torch.compile"
    HANG = "hang in a collective"
    DISTRIBUTED = "distributed setup or collective"
    OTHER = "other"

    @property
    def key(self) -> str:
        """The short name ``--family`` takes."""
        return _KEYS[self]


_KEYS = {
    Family.DEVICE_ASSERT: "device-assert",
    Family.OUT_OF_MEMORY: "out-of-memory",
    Family.MISSING_KERNEL: "missing-kernel",
    Family.DEVICE_MISMATCH: "device-mismatch",
    Family.INDEX: "index",
    Family.SHAPE: "shape",
    Family.VIEW: "view",
    Family.DTYPE: "dtype",
    Family.INPLACE: "inplace",
    Family.CRASH: "crash",
    Family.COMPILE: "compile",
    Family.HANG: "hang",
    Family.DISTRIBUTED: "distributed",
    Family.OTHER: "other",
}


# Errors raised from the tensors' metadata (dtype, shape, strides, device) before any
# value is read: a tensor of the same metadata with other values raises the same one.
METADATA_FAMILIES = frozenset({Family.SHAPE, Family.VIEW, Family.DTYPE, Family.DEVICE_MISMATCH,
                               Family.MISSING_KERNEL})


def family_by_name(name: str) -> Family:
    """``index``, ``device-assert``, or the long name; ValueError naming the choices."""
    wanted = name.strip().lower().replace("_", "-")
    for family in Family:
        if wanted in (family.key, family.value):
            return family
    raise ValueError(f"unknown family {name!r}; choose from {', '.join(f.key for f in Family)}")


def family_matches(wanted: Family, family: Family, kernel_assertion: str | None = None) -> bool:
    """Whether an error of ``family`` is a face of the bugs ``wanted`` names.

    A device-side assert is how an out-of-range index (class targets, embedding and
    gather indices) shows on CUDA; on the CPU the same call raises an index error.  So
    ``index`` also takes a device-side assert whose assertion checks an index (or whose
    assertion text was lost), and ``device-assert`` also takes the CPU's index error."""
    if wanted is family:
        return True
    if wanted is Family.INDEX and family is Family.DEVICE_ASSERT:
        return kernel_assertion is None or assertion_checks_an_index(kernel_assertion)
    return wanted is Family.DEVICE_ASSERT and family is Family.INDEX


@dataclass(frozen=True)
class Advice:
    first_check: str
    avoid: str


_ADVICE = {
    Family.DEVICE_ASSERT: Advice(
        "indices, targets and the operator's preconditions (class targets in [0, C) or ignore_index; "
        "embedding and gather indices below the size of that dimension)",
        "that the GPU or the driver is broken",
    ),
    Family.OUT_OF_MEMORY: Advice(
        "shapes (batch, sequence length), tensor lifetimes (outputs kept across iterations, graphs "
        "kept alive by a stored loss) and what else holds device memory in the process",
        "that every CUDA error is a VRAM problem, or that a bigger GPU is the fix",
    ),
    Family.MISSING_KERNEL: Advice(
        "versions (torch, CUDA/ROCm, driver), the extension's build, the backend and the dtype the "
        "operator was called with",
        "reinstalling everything at random",
    ),
    Family.DEVICE_MISMATCH: Advice(
        "where the model and every input were placed (parameters, buffers, tensors made inside forward, "
        "the loss's weight)",
        "adding a .to(device) without knowing which tensor was on the wrong device and why",
    ),
    Family.INDEX: Advice(
        "the index or target values against the size they index (class targets in [0, C) or "
        "ignore_index; embedding indices below num_embeddings), and where the values come from",
        "enlarging the output layer or the vocabulary until the error goes away",
    ),
    Family.SHAPE: Advice(
        "the shapes at the operator and the layer sizes that produce them (a flatten size, a "
        "feature count in a config, a transposed input)",
        "reshaping until it runs without knowing which dimension is wrong",
    ),
    Family.VIEW: Advice(
        "the strides of the input: a transpose, permute or expand before .view makes it "
        "non-contiguous",
        "sprinkling .contiguous() everywhere, or replacing every view with reshape without "
        "checking which tensor is not contiguous",
    ),
    Family.DTYPE: Advice(
        "the dtypes at the operator and where each comes from (numpy float64, autocast, a custom "
        "Function, a .double() somewhere)",
        "casting everything to float64 (or float32) at random",
    ),
    Family.INPLACE: Advice(
        "which tensor was modified in place after autograd saved it (+=, [..]=, relu_(), an "
        "optimizer step before backward); torch.autograd.set_detect_anomaly(True) names the forward "
        "operation",
        "cloning every tensor or detaching to silence it: that changes the gradients",
    ),
    Family.CRASH: Advice(
        "the last lines the process printed (a kernel assertion, a 'terminate called' message, an HSA "
        "exception) and the last Python frame",
        "that a crash without a message is the same bug as any other crash",
    ),
    Family.COMPILE: Advice(
        "which stage fails and with which settings: Dynamo's tracing (Unsupported, a graph break under "
        "fullgraph=True, a guard or recompile limit), AOT autograd, or the backend (BackendCompilerFailed: "
        "backend='inductor' raised ...); torch.compile(backend='eager') runs Dynamo alone, backend='aot_eager' "
        "adds AOT autograd, and fullgraph, dynamic and mode are the settings to vary one at a time",
        "switching torch.compile off without knowing which stage breaks: the bug stays, and comes back with "
        "the next compile",
    ),
    Family.HANG: Advice(
        "which collective each rank waits in and the branch that lets one rank skip or add a collective "
        "(rank 0's evaluation, an early stop one rank decides alone, a data shard of another length)",
        "raising the process group's timeout, which only makes the hang longer",
    ),
    Family.DISTRIBUTED: Advice(
        "that every rank calls the same collectives in the same order with tensors of the same shape and "
        "dtype, and that every parameter gets a gradient in every step (or find_unused_parameters=True)",
        "that the network or the backend is broken",
    ),
    Family.OTHER: Advice(
        "the message itself and the operator's documented contract",
        "changing batch size, precision and library versions at once",
    ),
}


def advice_for(family: Family) -> Advice:
    return _ADVICE[family]


_DEVICE_ASSERT = re.compile(r"device-side assert|cudaErrorAssert|hipErrorAssert|Device-side assertion", re.I)
_OOM = re.compile(r"out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|hipErrorOutOfMemory", re.I)
_MISSING = re.compile(
    r"no kernel image|invalid device function|not implemented for|NotImplementedError|could not run '"
    r"|not compiled with|no (?:CUDA|HIP) GPUs are available|is not available for",
    re.I,
)
_DEVICES = re.compile(
    r"(same|different) devices?|found at least two devices|is on \S+, different from other tensors on"
    r"|Input type \(\S+\) and weight type \(\S+\) should be the same",
    re.I,
)
_INPLACE = re.compile(r"modified by an inplace operation"
                      r"|a leaf Variable that requires grad is being used in an in-place", re.I)
_VIEW = re.compile(r"view size is not compatible|not contiguous|non-contiguous"
                   r"|is not compatible with input tensor's size and stride", re.I)
_DTYPE = re.compile(
    r"dtype|expected scalar type|Double and Float|Float and Double|BFloat16|Half and Float"
    r"|found dtype|type \S+ but got \S+",
    re.I,
)
_INDEX = re.compile(r"out of (bounds|range)|index .* is out|Target -?\d+ is out", re.I)
_SHAPE = re.compile(
    r"shape|size of tensor|cannot be multiplied|sizes? (of tensors )?must match|dimension|batch_size|channels"
    r"|expected input\[|must be sorted|size mismatch"
    # torch.nn's own checks of a module's inputs (nn.LSTM's hidden state, BatchNorm's batch)
    r"|Expected hidden(\[\d+\])? size|value per channel",
    re.I,
)
_CONSTRAINT = re.compile(r"to satisfy the constraint \w+|to be within the support \(.*\) of the distribution")
_LIBRARY_STATUS = re.compile(r"CUDNN_STATUS_\w+|CUBLAS_STATUS_\w+|CUSOLVER_STATUS_\w+", re.I)
_INDEX_ASSERTION = re.compile(r"index|idx|n_classes|Index|< *\w*size|srcSelect|numel|bounds", re.I)


# The classes torch.compile raises its own errors with (Dynamo's tracing, AOT autograd,
# Inductor, the symbolic-shape guards), and the lines its messages carry.
_COMPILE_MODULES = ("torch._dynamo.", "torch._inductor.", "torch._functorch.", "torch.fx.experimental.symbolic_shapes")
_COMPILE_CLASSES = re.compile(r"(^|\.)(BackendCompilerFailed|InternalTorchDynamoError|Unsupported|UserError|"
                              r"RecompileLimitExceeded|CacheLimitExceeded|TorchRuntimeError|ConstraintViolationError|"
                              r"GuardOnDataDependentSymNode|InductorError|LoweringException)$")
COMPILE_MARKERS = re.compile(
    r"^from user code:$|Set TORCHDYNAMO_VERBOSE=1|compile-graph-break-site|^backend='[\w.]+' raised:", re.M
)


_NAMES_COMPILE = re.compile(r"\btorch\.compile (with|stance)\b|\bcompiled autograd\b")


# AOT autograd's runtime: the wrappers that run a compiled graph's forward and backward.
# What a compiled backward raises passes through them last (torch's own code), where the
# same error raised eagerly passes through the autograd engine: "non-empty donated
# buffers", "backward through the graph a second time" over a compiled region's freed
# saved tensors.
_AOT_RUNTIME = "torch._functorch._aot_autograd."


def is_compile_error(type_name: str, message: str, raised_by: str | None = None) -> bool:
    """Whether torch.compile raised it: a class of Dynamo, AOT autograd, Inductor or the
    shape guards, a message with the lines they add (a user-code section, a graph
    break's page, a backend's failure), torch's runtime error naming torch.compile, or
    an error whose innermost torch frame (``raised_by``) is AOT autograd's runtime."""
    return (
        (raised_by or "").startswith(_AOT_RUNTIME)
        or type_name.startswith(_COMPILE_MODULES)
        or _COMPILE_CLASSES.search(type_name) is not None and "torch" in type_name
        or COMPILE_MARKERS.search(message) is not None
        # raised in compiled code by torch's own runtime checks, naming torch.compile:
        # "torch.compile with aot_autograd does not currently support double backward",
        # "Detected recompile when torch.compile stance is 'fail_on_recompile'"
        or _NAMES_COMPILE.search(message) is not None and type_name in ("RuntimeError", "AssertionError")
    )


# Where the identifying head of a torch.compile message ends: what follows explains,
# hints, quotes the user's source (the "from user code" frames, the FX nodes named after
# the user's variables) or names the environment (paths, URLs, logging switches).
_COMPILE_TAIL = re.compile(
    r"^\s*(Explanation:|Hint:|Developer debug context:|For more details about this graph break|from user code:"
    r"|Set TORCHDYNAMO_VERBOSE|You can suppress this exception|While executing |Original traceback:"
    r"|The branch condition involves"
    # Inductor's lowering errors dump the node's arguments (buffers named after the
    # graph's values, their layouts, the stack traces of the user's lines) after the
    # target op, and where the node came from
    r"|k?w?args\[[^\]]*\]: |Found from\b)"
)
_GRAPH_BREAK_ID = re.compile(r"/gb/(gb\d+)\.html")


def compile_identity(message: str) -> str:
    """What names a torch.compile error: its head (the graph break's kind, or the
    backend and the error it raised) and the graph break's ``gbNNNN`` id; none of the
    paragraphs that quote the user's program, explain, hint or link."""
    head: list[str] = []
    for line in message.splitlines():
        if _COMPILE_TAIL.match(line) or (not line.strip() and head):
            break
        if line.strip():
            head.append(line.strip())
    found = _GRAPH_BREAK_ID.search(message)
    return "\n".join(head) + (f" [{found.group(1)}]" if found else "")


_STAGES = (
    # (stage, class pattern, message pattern), first match wins: Inductor's and a named
    # backend's failures arrive wrapped in Dynamo's classes, so they are looked for first.
    ("Inductor (lowering and code generation)", r"torch\._inductor\.|InductorError|LoweringException",
     r"^backend='inductor' raised:|LoweringException|InductorError"),
    ("the backend", r"BackendCompilerFailed", r"^backend='[\w.]+' raised:"),
    ("AOT autograd", r"torch\._functorch\.", r"aot_autograd|AOTAutograd|aot_eager"),
    ("guards and recompilation",
     r"RecompileLimitExceeded|CacheLimitExceeded|FailOnRecompileLimitHit|ConstraintViolationError",
     r"recompile limit|Detected recompile|fail_on_recompile|Constraints violated"),
    ("Dynamo tracing", r"torch\._dynamo\.|GuardOnDataDependentSymNode", r"^from user code:$|compile-graph-break-site"),
)


def compile_stage(type_name: str, message: str, raised_by: str | None = None) -> str | None:
    """Which stage of torch.compile raised a compile error (Dynamo's tracing, its guards
    and recompilation, AOT autograd, Inductor, another backend), for the report: what the
    field guide checks first.  None for an error torch.compile did not raise."""
    if not is_compile_error(type_name, message, raised_by):
        return None
    if (raised_by or "").startswith(_AOT_RUNTIME) and not is_compile_error(type_name, message):
        return "AOT autograd (running the compiled graph)"
    for stage, classes, text in _STAGES:
        if re.search(classes, type_name) or re.search(text, message, re.M):
            if stage == "the backend":
                named = re.search(r"^backend='([\w.]+)' raised:", message, re.M)
                return f"the backend ({named.group(1)})" if named else stage
            return stage
    return "torch.compile"


# What a rank says when a peer failed first: its connection closed or reset, a
# collective or the store that timed out waiting for it, the watchdog that aborted the
# communicator, the launcher's summary.  Never a first error while another rank has one
# of its own (worker/ranks.py).
_PEER = re.compile(
    r"Connection (closed|reset) by peer|Broken pipe|Timed out waiting \d+ms for (recv|send) operation|"
    r"failed to recv, got 0 bytes|NCCL communicator was aborted|Watchdog caught collective operation timeout|"
    r"Some NCCL operations have failed or timed out|ChildFailedError|ProcessGroupNCCL.*(abort|timeout)|"
    r"DistNetworkError|Socket Timeout",
    re.I,
)
_DISTRIBUTED = re.compile(
    r"ProcessGroup|process group|torch\.distributed|Gloo|NCCL|c10d|DistBackendError|"
    r"Expected to have finished reduction in the prior iteration|DistributedDataParallel|rendezvous",
)


def is_peer_consequence(type_name: str, message: str) -> bool:
    """Whether an error is what a rank says because a peer failed or left first."""
    return bool(_PEER.search(f"{type_name}: {message}"))


def classify_family(type_name: str, message: str, kernel_assertion: str | None = None,
                    raised_by: str | None = None) -> Family:
    """The family of an error from its class, message, kernel assertion (if any) and the
    innermost module of torch it was raised through (if known)."""
    if type_name == "Hang":
        return Family.HANG
    if type_name.startswith("signal."):
        return Family.CRASH
    text = f"{type_name}: {message}"
    if kernel_assertion or _DEVICE_ASSERT.search(text):
        return Family.DEVICE_ASSERT
    if is_compile_error(type_name, message, raised_by):
        return Family.COMPILE
    if _LIBRARY_STATUS.search(text) and not _OOM.search(text):
        return Family.OTHER  # a cuBLAS/cuDNN status: the library's contract, not a family of ours
    if _CONSTRAINT.search(text):
        # torch.distributions' argument validation names the parameter's shape ("Tensor of
        # shape (128, 3)"), but what it rejects are the values
        return Family.OTHER
    for family, pattern in (
        (Family.OUT_OF_MEMORY, _OOM),
        (Family.MISSING_KERNEL, _MISSING),
        (Family.DEVICE_MISMATCH, _DEVICES),
        (Family.INPLACE, _INPLACE),
        (Family.VIEW, _VIEW),
        (Family.DTYPE, _DTYPE),
        (Family.INDEX, _INDEX),
        (Family.SHAPE, _SHAPE),
    ):
        if pattern.search(text):
            return family
    if _DISTRIBUTED.search(text):
        return Family.DISTRIBUTED
    return Family.OTHER


# Errors the device reports at a later synchronising call than the kernel that caused
# them: torch appends its "might be asynchronously reported" hint to exactly these.
_ASYNC = re.compile(
    r"device-side assert|illegal memory access|unspecified launch failure|misaligned address"
    r"|illegal instruction|an illegal address|launch failure|hipErrorLaunchFailure|HSA_STATUS_ERROR"
    r"|kernel errors might be asynchronously reported",
    re.I,
)


def is_asynchronous(type_name: str, message: str, kernel_assertion: str | None = None) -> bool:
    """Whether an error may have surfaced after the call that caused it (CUDA/HIP kernel
    faults), so that synchronous launches would move it to its source."""
    return bool(kernel_assertion) or bool(_ASYNC.search(f"{type_name}: {message}"))


# -- kernel assertions ----------------------------------------------------------------------
# A file name starts a word (after a space, a bracket, a drive letter's colon or a line's
# start), and one greedy run finds its end: the time stays linear in a long token.
_FILE = r"(?<![^\s\[(:])(?P<file>[^\s:]*[\w-]\.(?:cu|cuh|hip|cpp|cc|h|hpp|py))"
_KERNEL_ASSERT = (
    # newer builds: "[CUDA_KERNEL_ASSERT] Repeat.cu:20: kernel: block: [3,0,0], thread: [416,0,0]:
    # Assertion failed: `cond`: message" (printed with the classic line too; this one first)
    re.compile(
        r"\[CUDA_KERNEL_ASSERT\] " + _FILE + r":\d+: (?P<kernel>.*?): block: \[[\d,\s]+\], "
        r"thread: \[[\d,\s]+\]: Assertion failed: `(?P<cond>.*?)`"
    ),
    # classic: "Loss.cu:250: kernel: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0` failed."
    # Windows builds print no function: "NLLLoss2d.cu:103: block: [0,0,0], thread: ..."
    re.compile(
        _FILE + r":\d+: (?:(?P<kernel>.*?): )?block: \[[\d,\s]+\], thread: \[[\d,\s]+\] "
        r"Assertion `(?P<cond>.*?)` failed"
    ),
    # HIP's device __assert_fail: "Loss.hip:250: kernel: Device-side assertion `t >= 0' failed."
    re.compile(_FILE + r":\d+: (?P<kernel>.*?): Device-side assertion `(?P<cond>.*?)' failed"),
)
# Device-side assertion tracking (TORCH_USE_CUDA_DSA builds, PYTORCH_USE_CUDA_DSA=1): the
# assertion is in the exception message, one field per line.
_DSA_COND = re.compile(r"GPU assertion failure message = (?P<cond>.*)")
_DSA_FILE = re.compile(r"File containing assertion = (?P<file>.*?):\d+\s*$", re.M)
_DSA_FUNC = re.compile(r"Device function containing assertion = (?P<kernel>.*?)\s*$", re.M)


def parse_kernel_assertion(output: str) -> str | None:
    """The first device assertion in a run's output (or exception message), as
    ``file: kernel: Assertion `cond` failed``, without paths, line, block or thread."""
    if "ssertion" not in output:
        # Every form below says "Assertion" or "assertion"; the patterns themselves are
        # slow on long output (a file name may start anywhere), and every run is parsed.
        return None
    found = []
    for pattern in _KERNEL_ASSERT:
        m = pattern.search(output)
        if m is not None:
            found.append((m.start(), m.group("file"), m.group("kernel"), m.group("cond")))
    dsa = _DSA_COND.search(output)
    if dsa is not None:
        f, k = _DSA_FILE.search(output), _DSA_FUNC.search(output)
        found.append((dsa.start(), f.group("file") if f else "", k.group("kernel") if k else None, dsa.group("cond")))
    if not found:
        return None
    _, file, kernel, cond = min(found, key=lambda item: item[0])
    base = re.split(r"[/\\]", file)[-1]
    kernel = (kernel or "").strip() or "?"
    return f"{base}: {kernel}: Assertion `{cond.strip()}` failed"


def kernel_condition(assertion: str | None) -> str | None:
    """The condition of a parsed assertion (`t >= 0 && t < n_classes`)."""
    if not assertion:
        return None
    m = re.search(r"Assertion `(.*)` failed$", assertion)
    return m.group(1) if m else None


def assertion_checks_an_index(assertion: str | None) -> bool:
    cond = kernel_condition(assertion)
    return bool(cond and _INDEX_ASSERTION.search(cond))


# -- native errors: the process died without a Python exception ------------------------------
_TERMINATE = re.compile(r"terminate called after throwing an instance of '(?P<type>[^']+)'")
_WHAT = re.compile(r"what\(\):\s*(?P<what>.*)$")
_NOT_THE_MESSAGE = ("CUDA kernel errors", "HIP kernel errors", "For debugging consider", "Exception raised from",
                    "frame #")
_HSA = re.compile(r"(?P<what>HSA_STATUS_ERROR_\w+: [^\n]*)")
_FATAL = re.compile(r"Fatal Python error: (?P<what>[^\n]+)")


def parse_native_error(output: str) -> tuple[str, str] | None:
    """(type, message) of what a dying native runtime printed: a C++ exception that
    reached ``std::terminate`` (``c10::CUDAError``), an HSA exception on ROCm, or
    ``Fatal Python error``; None when the output holds none of them."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        what = _WHAT.search(line)
        if what is None:
            continue
        # Launchers prefix every line ("15: ", "[rank0]: "); the type is on the line above.
        kind = "C++ exception"
        if i > 0 and (t := _TERMINATE.search(lines[i - 1])) is not None:
            kind = t.group("type")
        # The message may start on the next line ("what():  " then "[PG ID 0 ...] ...").
        for text in [what.group("what"), *lines[i + 1 : i + 3]]:
            text = text.strip()
            if text and not text.startswith(_NOT_THE_MESSAGE):
                return kind, text
        return kind, ""
    m = _HSA.search(output)
    if m is not None:
        return "HSA", m.group("what").strip()
    m = _FATAL.search(output)
    if m is not None:
        return "Fatal Python error", m.group("what").strip()
    return None
