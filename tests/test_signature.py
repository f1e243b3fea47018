"""The first error as a value, and the rule for "same bug".

Pure unit tests of ``shrinkgpu.signature``: no processes, no torch.  The messages are
the ones PyTorch really prints (tests/signatures.py).
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shrinkgpu.signature import (
    ExceptionRecord,
    Family,
    Frame,
    OpRecord,
    Signature,
    Strictness,
    TensorMeta,
    choose_first_error,
    first_difference,
    normalize_message,
    parse_kernel_assertion,
)
from signatures import (
    CE,
    DEVICE_ASSERT,
    DEVICE_ASSERT_BLOCKING,
    DEVICE_ASSERT_HIP,
    DEVICE_ASSERT_NEW,
    FRAME,
    ILLEGAL_ACCESS_WITH_CPP_STACK,
    INDEX_ASSERT,
    LOSS_ASSERT,
    LOSS_ASSERT_VALUE,
    ce_op,
    make_sig,
    oom,
    rec,
    tm,
)

# ======================================================================================
# normalize_message
# ======================================================================================


@pytest.mark.parametrize(
    "message, expected",
    [
        ("Target 4 is out of bounds.", "Target <n> is out of bounds."),
        (
            "index -5 is out of bounds for dimension 1 with size 3",
            "index <n> is out of bounds for dimension <n> with size <n>",
        ),
        ("shape '[2, -1]' is invalid for input of size 7", "shape '[<n>, <n>]' is invalid for input of size <n>"),
        ("softmax over dim=-1 and +3", "softmax over dim=<n> and <n>"),
        ("eps 1e-05, lr 2.5E+3, momentum 0.9, scale 1.", "eps <n>, lr <n>, momentum <n>, scale <n>."),
        (
            # the allocator's state after the first sentence is not the bug (byte counts,
            # wording that changed between releases)
            "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity; "
            "6.50 GiB already allocated)",
            "CUDA out of memory.",
        ),
        (
            "mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)",
            "mat1 and mat2 shapes cannot be multiplied (<n>x<n> and <n>x<n>)",
        ),
        ("expected 2x4x8 but got 16x3x8", "expected <n>x<n>x<n> but got <n>x<n>x<n>"),
        (
            "Cannot access data pointer of Tensor at 0x7f3a2b1c0040 (device cuda:1)",
            "Cannot access data pointer of Tensor at <addr> (device cuda:<n>)",
        ),
        (
            "[Errno 2] No such file or directory: '/home/alice/project/checkpoints/epoch_12.pt'",
            "[Errno <n>] No such file or directory: '<path>'",
        ),
        ("~/data/train.csv not found", "<path> not found"),
        ("see ../data/x.pt and ./y", "see <path> and <path>"),
        ('File "/home/alice/train.py", line 12, in main', 'File "<path>", line <n>, in main'),
        # a per-run temp dir with digits in it is one path, not a path plus numbers
        ("/tmp/shrinkgpu-abc123/run-7/train.py failed", "<path> failed"),
        # whitespace: runs of blanks and tabs become one blank, blank lines go, ends stripped
        ("  a   b\t\tc  ", "a b c"),
        ("line one\n\n   line two  \n", "line one\n line two"),
    ],
)
def test_normalize_message_replaces_numbers_addresses_and_paths(message, expected):
    assert normalize_message(message) == expected


@pytest.mark.parametrize(
    "message",
    [
        "mat1 and mat2 must have the same dtype, but got Double and Float",
        "Expected 3D (unbatched) or 4D (batched) input to conv2d",
        "aten::_conv_depthwise2d F.conv2d x1 h2",
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    ],
)
def test_normalize_message_keeps_identifiers_with_one_digit(message):
    # Digits glued to letters ("3D", "mat1", "x1") are part of a word, not a value.
    assert normalize_message(message) == message


@pytest.mark.parametrize("ident", ["float16", "bfloat16", "int64", "torch.float32", "fc12.weight", "sm_80"])
def test_normalize_message_keeps_identifiers_with_several_digits(ident):
    message = f"size mismatch at {ident} in conv2d"
    assert normalize_message(message) == message


def test_the_operator_name_newer_releases_put_ahead_of_a_message_is_not_the_bug():
    # torch 2.15 says "addmm: mat1 and mat2 ...", 2.13 "mat1 and mat2 ...": one bug, and a
    # case reduced on one release verified on the other is not "failing differently".
    old = "mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)"
    new = "addmm: mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)"
    assert (normalize_message(new) == normalize_message(old)
            == "mat1 and mat2 shapes cannot be multiplied (<n>x<n> and <n>x<n>)")
    assert make_sig("RuntimeError", old).same_bug(make_sig("RuntimeError", new))
    # only a lower-case name right at the start: a message's own words stay
    for kept in ("CUDA error: device-side assert triggered", "index_select(): Index is supposed to be a vector",
                 "Expected all tensors to be on the same device, but found at least two devices, cuda:<n> and cpu!"):
        assert normalize_message(kept) == kept


@pytest.mark.parametrize(
    "message",
    [DEVICE_ASSERT, DEVICE_ASSERT_NEW, DEVICE_ASSERT_BLOCKING, DEVICE_ASSERT + "\n\n"],
)
def test_normalize_message_removes_cuda_boilerplate(message):
    assert normalize_message(message) == "CUDA error: device-side assert triggered"


def test_normalize_message_removes_hip_launch_blocking_and_dsa_lines():
    assert normalize_message(DEVICE_ASSERT_HIP) == "HIP error: device-side assert triggered"


# What ROCm builds of PyTorch print today (verbatim from ROCm/TheRock#2707; the same
# three advice lines appear in mila-iqia/milabench#397): hipify turned every "CUDA" of
# CUDAMiscFunctions.cpp into "HIP", and the debugging advice is AMD_SERIALIZE_KERNEL.
ROCM_INVALID_ARGUMENT = (
    "HIP error: invalid argument\n"
    "Search for `hipErrorInvalidValue' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
    "group__HIPRT__TYPES.html for more information.\n"
    "HIP kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\n"
    "For debugging consider passing AMD_SERIALIZE_KERNEL=3\n"
    "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.\n"
)


def test_normalize_message_removes_rocm_boilerplate():
    assert normalize_message(ROCM_INVALID_ARGUMENT) == "HIP error: invalid argument"


def test_normalize_message_removes_the_cpp_stack_of_older_releases():
    assert normalize_message(ILLEGAL_ACCESS_WITH_CPP_STACK) == "CUDA error: an illegal memory access was encountered"


def test_normalize_message_keeps_lines_that_are_not_boilerplate():
    message = "Error(s) in loading state_dict for Net:\n\tsize mismatch for fc.weight"
    assert normalize_message(message) == "Error(s) in loading state_dict for Net:\n size mismatch for fc.weight"


def test_normalize_message_of_two_oom_reports_with_different_amounts_is_equal():
    a = normalize_message(oom("2.00", "79.15", "1.21", "77.93"))
    b = normalize_message(oom("512.00", "23.64", "0.50", "23.10"))
    assert a == b == "CUDA out of memory."
    # The wording of older releases is the same bug.
    assert normalize_message("CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 7.79 GiB total capacity)") == a
    # Not an allocator report: kept whole.
    assert normalize_message("CUDA error: out of memory") == "CUDA error: out of memory"


@given(st.integers(-(10**12), 10**12), st.integers(-64, 64), st.integers(0, 10**9))
def test_normalize_message_ignores_every_integer_value(a, b, c):
    message = f"index {a} is out of bounds for dimension {b} with size {c}"
    assert normalize_message(message) == "index <n> is out of bounds for dimension <n> with size <n>"


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300))
def test_normalize_message_ignores_every_float_value(x):
    assert normalize_message(f"got value {x!r} here") == "got value <n> here"


# ======================================================================================
# choose_first_error
# ======================================================================================


def test_choose_first_error_plain_root():
    root = rec("IndexError", "Target 4 is out of bounds.", op=ce_op(), ident=1)
    assert choose_first_error([root], [root]) is root


def test_choose_first_error_plain_root_without_any_torch_call():
    root = rec("KeyError", "'model_state_dict'", ident=1)
    assert choose_first_error([root], []) is root


def test_choose_first_error_skips_a_wrapper_raised_from_the_root():
    # raise RuntimeError("training failed") from e
    root = rec("IndexError", "Target 4 is out of bounds.", op=ce_op(), ident=1)
    wrapper = rec("RuntimeError", "training failed at step 12", ident=2)
    assert choose_first_error([wrapper, root], [root]) is root


def test_choose_first_error_skips_a_wrapper_even_without_torch_calls():
    root = rec("KeyError", "'lr'", ident=1)
    wrapper = rec("ValueError", "bad config", ident=2)
    assert choose_first_error([wrapper, root], []) is root


def test_choose_first_error_prefers_a_torch_error_over_a_harmless_root():
    # try: load(ckpt) except FileNotFoundError: <torch call that fails>
    harmless = rec("FileNotFoundError", "[Errno 2] No such file or directory: 'ckpt.pt'", ident=1)
    torch_err = rec("IndexError", "Target 4 is out of bounds.", op=ce_op(), ident=2)
    assert choose_first_error([torch_err, harmless], [torch_err]) is torch_err
    wrapper = rec("RuntimeError", "training failed", ident=3)
    assert choose_first_error([wrapper, torch_err, harmless], [torch_err]) is torch_err


def test_choose_first_error_prefers_the_deepest_torch_error_of_the_chain():
    first = rec("IndexError", "Target 4 is out of bounds.", op=ce_op(), ident=1)
    later = rec("RuntimeError", "view size is not compatible", op=OpRecord("Tensor.view", (tm(),)), ident=2)
    assert choose_first_error([later, first], [first, later]) is first


def test_choose_first_error_sticky_cuda_error_returns_the_earlier_caught_one():
    # The script caught the first report at cross_entropy and died later at .item():
    # same class, same message once normalised (boilerplate differs here).
    earlier = rec("torch.AcceleratorError", DEVICE_ASSERT_BLOCKING, op=ce_op(), ident=1)
    innocent = rec(
        "torch.AcceleratorError",
        DEVICE_ASSERT,
        op=OpRecord("Tensor.item", (tm(shape=(), stride=()),)),
        frame=Frame("train.py", 120, "log", "print(loss.item())"),
        ident=2,
    )
    assert choose_first_error([innocent], [earlier, innocent]) is earlier


def test_choose_first_error_sticky_match_ignores_numbers():
    earlier = rec("IndexError", "Target 4 is out of bounds.", op=ce_op(), ident=1)
    last = rec("IndexError", "Target 7 is out of bounds.", op=ce_op(), ident=2)
    assert choose_first_error([last], [earlier, last]) is earlier


def test_choose_first_error_ignores_an_earlier_torch_error_with_another_message():
    earlier = rec("RuntimeError", "index 5 is out of bounds for dimension 1 with size 3", op=ce_op(), ident=1)
    last = rec("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (2x4 and 5x3)", op=ce_op(), ident=2)
    assert choose_first_error([last], [earlier, last]) is last


def test_choose_first_error_ignores_an_earlier_torch_error_with_another_class():
    earlier = rec("ValueError", DEVICE_ASSERT, op=ce_op(), ident=1)
    last = rec("torch.AcceleratorError", DEVICE_ASSERT, op=ce_op(), ident=2)
    assert choose_first_error([last], [earlier, last]) is last


def test_choose_first_error_only_looks_at_torch_errors_before_the_first():
    first = rec("torch.AcceleratorError", DEVICE_ASSERT, op=ce_op(), ident=1)
    after = rec("torch.AcceleratorError", DEVICE_ASSERT, op=ce_op(), ident=2)
    assert choose_first_error([first], [first, after]) is first


def test_choose_first_error_sticky_case_when_the_last_call_was_not_seen_by_the_mode():
    # e.g. torch.cuda.synchronize(): no op recorded, but the same sticky error
    earlier = rec("torch.AcceleratorError", DEVICE_ASSERT, op=ce_op(), ident=1)
    last = rec("torch.AcceleratorError", DEVICE_ASSERT_BLOCKING, ident=2)
    assert choose_first_error([last], [earlier]) is earlier


def test_choose_first_error_of_an_empty_chain_is_none():
    assert choose_first_error([], []) is None
    assert choose_first_error([], [rec(op=ce_op(), ident=1)]) is None


# ======================================================================================
# Signature.same_bug and differences
# ======================================================================================


def test_from_record_fills_the_derived_fields():
    sig = Signature.from_record(
        rec("torch.AcceleratorError", DEVICE_ASSERT, op=ce_op()),
        output="step 3\n" + LOSS_ASSERT + "\n",
        caught_earlier=["x"],
    )
    assert sig.normalized == "CUDA error: device-side assert triggered"
    assert sig.kernel_assertion == LOSS_ASSERT_VALUE
    assert sig.family is Family.DEVICE_ASSERT
    assert sig.op == ce_op()
    assert sig.frame == FRAME
    assert sig.caught_earlier == ("x",)


def test_for_signal():
    sig = Signature.for_signal(11, "SIGSEGV")
    assert (sig.type, sig.message, sig.normalized) == ("signal.SIGSEGV", "killed by signal 11 (SIGSEGV)",
                                                       "killed by signal SIGSEGV")
    assert sig.crash_tail == ()
    assert sig.op is None and sig.frame is None and sig.kernel_assertion is None
    assert sig.family is Family.CRASH
    assert Signature.for_signal(6, "SIGABRT", output=LOSS_ASSERT).kernel_assertion == LOSS_ASSERT_VALUE


def test_same_bug_when_only_numbers_in_the_message_differ():
    a = make_sig(message="Target 4 is out of bounds.")
    b = make_sig(message="Target 7 is out of bounds.")
    assert a.same_bug(b) and b.same_bug(a)
    assert a.differences(b) == []


def test_same_bug_ignores_boilerplate_lines():
    a = make_sig("torch.AcceleratorError", DEVICE_ASSERT)
    b = make_sig("torch.AcceleratorError", DEVICE_ASSERT_BLOCKING)
    assert a.same_bug(b)


def test_same_bug_ignores_location_and_non_tensor_arguments_when_an_operator_raised():
    a = make_sig()
    moved = Frame(file="repro.py", line=3, function="<module>", source="F.cross_entropy(x, t)")
    b = make_sig(frame=moved, op=dataclasses.replace(ce_op(), others=("reduction='sum'",)))
    assert a.same_bug(b) and b.same_bug(a)
    assert a.same_bug(make_sig(frame=None))


def test_same_bug_ignores_family_and_caught_earlier():
    a = make_sig()
    b = dataclasses.replace(make_sig(caught=("RuntimeError: x",)), family=Family.OTHER)
    assert a.same_bug(b)


def test_not_same_bug_when_the_class_differs():
    a = make_sig("IndexError", "Target 4 is out of bounds.")
    b = make_sig("RuntimeError", "Target 4 is out of bounds.")
    assert not a.same_bug(b) and not b.same_bug(a)
    assert not a.same_bug(b, Strictness.OPERATOR)
    assert a.differences(b) == ["class RuntimeError instead of IndexError"]


def test_not_same_bug_when_the_normalized_message_differs():
    a = make_sig(message="Target 4 is out of bounds.")
    b = make_sig(message="Target 4 is out of range.")
    assert not a.same_bug(b)
    assert not a.same_bug(b, Strictness.OPERATOR)
    assert a.differences(b) == ["message 'IndexError: Target 4 is out of range.'"]


def test_not_same_bug_when_the_operator_differs():
    a = make_sig()
    b = make_sig(op=dataclasses.replace(ce_op(), name="torch.nn.functional.nll_loss"))
    assert not a.same_bug(b)
    assert not a.same_bug(b, Strictness.OPERATOR)
    assert a.differences(b) == [f"operator torch.nn.functional.nll_loss instead of {CE}"]


@pytest.mark.parametrize(
    "change",
    [
        {"dtype": "torch.int32"},
        {"shape": (4,)},
        {"stride": (2,)},
        {"stride": None},
        {"device": "cuda:1"},
        {"device": "cpu"},
        {"path": "kwargs['target']"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_not_same_bug_when_tensor_metadata_differs(change):
    a = make_sig()
    b = make_sig(op=ce_op(**change))
    assert not a.same_bug(b) and not b.same_bug(a)
    assert a.differences(b) == ["different tensor dtype/shape/stride/device at the operator"]


def test_not_same_bug_when_the_operator_gets_another_number_of_tensors():
    a = make_sig()
    b = make_sig(op=OpRecord(CE, ce_op().tensors[:1]))
    assert not a.same_bug(b)
    assert a.same_bug(b, Strictness.OPERATOR)


@pytest.mark.parametrize("change", [{"dtype": "torch.int32"}, {"shape": (64,)}, {"stride": (2,)}, {"device": "cpu"}])
def test_operator_strictness_lets_tensor_metadata_change(change):
    a = make_sig()
    b = make_sig(op=ce_op(**change))
    assert not a.same_bug(b, Strictness.STRICT)
    assert a.same_bug(b, Strictness.OPERATOR)


def test_not_same_bug_when_the_kernel_assertion_differs():
    other = parse_kernel_assertion(INDEX_ASSERT)
    a = make_sig("torch.AcceleratorError", DEVICE_ASSERT, kernel=LOSS_ASSERT_VALUE)
    b = make_sig("torch.AcceleratorError", DEVICE_ASSERT, kernel=other)
    assert not a.same_bug(b) and not b.same_bug(a)
    assert not a.same_bug(b, Strictness.OPERATOR)
    assert a.differences(b) == ["different kernel assertion"]
    assert a.same_bug(make_sig("torch.AcceleratorError", DEVICE_ASSERT, kernel=LOSS_ASSERT_VALUE))


def test_a_signature_with_a_kernel_assertion_rejects_one_without():
    a = make_sig("torch.AcceleratorError", DEVICE_ASSERT, kernel=LOSS_ASSERT_VALUE)
    b = make_sig("torch.AcceleratorError", DEVICE_ASSERT, kernel=None)
    assert not a.same_bug(b)
    assert a.differences(b) == ["different kernel assertion"]


def test_same_bug_is_symmetric_in_the_kernel_assertion():
    a = make_sig("torch.AcceleratorError", DEVICE_ASSERT, kernel=LOSS_ASSERT_VALUE)
    b = make_sig("torch.AcceleratorError", DEVICE_ASSERT, kernel=None)
    assert b.same_bug(a) == a.same_bug(b)


def test_without_an_operator_the_source_line_decides():
    a = make_sig("KeyError", "'lr'", op=None, frame=Frame("train.py", 10, "main", "lr = cfg['lr']"))
    moved = make_sig("KeyError", "'lr'", op=None, frame=Frame("repro.py", 2, "<module>", "lr = cfg['lr']"))
    other = make_sig("KeyError", "'lr'", op=None, frame=Frame("train.py", 10, "main", "lr = opts['lr']"))
    assert a.same_bug(moved) and moved.same_bug(a)
    assert a.same_bug(moved, Strictness.OPERATOR)
    assert not a.same_bug(other) and not other.same_bug(a)
    assert not a.same_bug(other, Strictness.OPERATOR)


def test_without_an_operator_the_call_that_raised_decides_not_the_statement_around_it():
    # a constructor refusing its arguments inside a method, and the same call lifted out
    # of it: the receiver and the arguments are the program's, the message speaks for them
    def raised(source, callee):
        return make_sig("TypeError", "AUROC.__new__() missing 1 required positional argument: 'task'", op=None,
                        frame=Frame("fit.py", 41, "__init__", source, callee))

    inside = raised("self.auroc = AUROC(num_classes=num_classes)", "AUROC")
    lifted = raised("AUROC(num_classes=6)", "AUROC")
    assert inside.same_bug(lifted) and lifted.same_bug(inside)
    assert first_difference(inside, lifted) is None and inside.differences(lifted) == []
    # another callable with the same message is another place
    other = raised("self.auroc = metrics.AUROC(num_classes=num_classes)", "metrics.AUROC")
    assert not inside.same_bug(other) and first_difference(inside, other) == "statement"
    # a frame that was not calling (or a Python that does not say): the line decides
    assert not inside.same_bug(raised("AUROC(num_classes=6)", None))
    assert inside.same_bug(raised("self.auroc = AUROC(num_classes=num_classes)", None))


def test_without_an_operator_or_frame():
    none1 = make_sig("KeyError", "'lr'", op=None, frame=None)
    none2 = make_sig("KeyError", "'lr'", op=None, frame=None)
    framed = make_sig("KeyError", "'lr'", op=None, frame=FRAME)
    assert none1.same_bug(none2)
    assert not none1.same_bug(framed) and not framed.same_bug(none1)


@pytest.mark.parametrize("strictness", list(Strictness))
def test_a_signature_with_an_operator_never_equals_one_without(strictness):
    with_op = make_sig()
    without = make_sig(op=None)  # same class, message and frame
    assert not with_op.same_bug(without, strictness)
    assert not without.same_bug(with_op, strictness)
    assert with_op.differences(without) == [f"operator None instead of {CE}"]
    assert without.differences(with_op) == [f"operator {CE} instead of None"]


def test_signals():
    segv = Signature.for_signal(11, "SIGSEGV")
    # The signal number alone never makes two crashes one bug.
    assert not segv.same_bug(Signature.for_signal(11, "SIGSEGV"))
    here = Frame("train.py", 9, "step", "lib.fused(x)")
    a = Signature.for_signal(11, "SIGSEGV", stderr="free(): invalid pointer\n", frame=here)
    assert a.same_bug(Signature.for_signal(11, "SIGSEGV", stderr="loading\nfree(): invalid pointer\n", frame=here))
    assert not a.same_bug(Signature.for_signal(11, "SIGSEGV", stderr="double free or corruption\n", frame=here))
    elsewhere = Frame("train.py", 30, "evaluate", "lib.other(x)")
    assert not a.same_bug(Signature.for_signal(11, "SIGSEGV", stderr="free(): invalid pointer\n", frame=elsewhere))
    # A kernel assertion the device printed identifies the crash on its own.
    abort = Signature.for_signal(6, "SIGABRT", output=LOSS_ASSERT)
    assert abort.same_bug(Signature.for_signal(6, "SIGABRT", output=LOSS_ASSERT, stderr="other words\n"))
    assert not segv.same_bug(Signature.for_signal(6, "SIGABRT"))
    assert segv.differences(Signature.for_signal(6, "SIGABRT")) == [
        "class signal.SIGABRT instead of signal.SIGSEGV",
        "message 'signal.SIGABRT: killed by signal 6 (SIGABRT)'",
    ]


def test_differences_lists_every_reason():
    a = make_sig("torch.AcceleratorError", DEVICE_ASSERT, kernel=LOSS_ASSERT_VALUE)
    b = make_sig("IndexError", "Target 4 is out of bounds.", op=OpRecord("torch.gather", (tm(),)))
    assert a.differences(b) == [
        "class IndexError instead of torch.AcceleratorError",
        "message 'IndexError: Target 4 is out of bounds.'",
        "different kernel assertion",
        f"operator torch.gather instead of {CE}",
    ]


def test_differences_explains_an_op_less_mismatch_of_the_source_line():
    a = make_sig("KeyError", "'lr'", op=None, frame=Frame("train.py", 10, "main", "lr = cfg['lr']"))
    b = make_sig("KeyError", "'lr'", op=None, frame=Frame("train.py", 10, "main", "lr = opts['lr']"))
    assert not a.same_bug(b)
    assert a.differences(b) != []


# ======================================================================================
# Generated signatures: JSON round trip, and same_bug vs differences
# ======================================================================================

texts = st.text(max_size=40)
tensor_metas = st.builds(
    TensorMeta,
    path=st.sampled_from(["args[0]", "args[1]", "kwargs['target']", "args[0][2]"]),
    dtype=st.sampled_from(["torch.float32", "torch.float16", "torch.int64", "torch.bool"]),
    shape=st.lists(st.integers(0, 2**40), max_size=4).map(tuple),
    stride=st.none() | st.lists(st.integers(-(2**40), 2**40), max_size=4).map(tuple),
    device=st.sampled_from(["cpu", "cuda:0", "cuda:1", "meta"]),
)
op_records = st.builds(
    OpRecord,
    name=st.sampled_from([CE, "torch.gather", "Tensor.view", "torch._C._nn.linear"]),
    tensors=st.lists(tensor_metas, max_size=3).map(tuple),
    others=st.lists(texts, max_size=3).map(tuple),
)
frames = st.builds(Frame, file=texts, line=st.integers(0, 10**6), function=texts, source=texts,
                   callee=st.none() | texts)
_signature_fields = dict(
    type=st.sampled_from(["IndexError", "RuntimeError", "torch.AcceleratorError", "signal.SIGSEGV"]),
    message=texts,
    normalized=texts,
    op=st.none() | op_records,
    frame=st.none() | frames,
    kernel_assertion=st.none() | texts,
    family=st.sampled_from(list(Family)),
    caught_earlier=st.lists(texts, max_size=3).map(tuple),
    # (file, line) of the user's frames: a newer, compare=False field
    stack=st.lists(st.tuples(texts, st.integers(0, 10**6)), max_size=3).map(tuple),
)
signatures = st.builds(
    Signature,
    **{f.name: _signature_fields[f.name] for f in dataclasses.fields(Signature) if f.name in _signature_fields},
)


@settings(max_examples=200)
@given(signatures)
def test_signature_json_round_trip(sig):
    data = sig.to_json()
    assert data["family"] == sig.family.value
    assert data["headline"] == sig.headline
    back = Signature.from_json(json.loads(json.dumps(data)))
    assert back == sig
    assert back.family is sig.family
    # every field, also those left out of == (caught_earlier, ...), comes back
    for f in dataclasses.fields(Signature):
        assert getattr(back, f.name) == getattr(sig, f.name), f.name
    assert back.to_json() == data
    assert Signature.from_json(data) == sig


def test_signature_json_round_trip_of_a_realistic_signature():
    sig = Signature.from_record(
        rec("torch.AcceleratorError", DEVICE_ASSERT, op=ce_op(stride=None)),
        output=LOSS_ASSERT,
        caught_earlier=["IndexError: Target 4 is out of bounds. in torch.gather"],
    )
    back = Signature.from_json(json.loads(json.dumps(sig.to_json())))
    assert back == sig and back.same_bug(sig) and sig.same_bug(back)
    assert back.caught_earlier == sig.caught_earlier
    assert back.op.tensors[1].stride is None
    assert isinstance(back.op.tensors[0].shape, tuple)


sig_variants = st.builds(
    make_sig,
    type=st.sampled_from(["IndexError", "RuntimeError"]),
    message=st.sampled_from(["Target 4 is out of bounds.", "Target 9 is out of bounds.", "index out of range in self"]),
    op=op_records,
    frame=st.none() | st.sampled_from([FRAME]),
    kernel=st.none() | st.sampled_from([LOSS_ASSERT_VALUE, "IndexKernel.cu: operator(): Assertion `x` failed"]),
)


@settings(max_examples=300)
@given(sig_variants, sig_variants)
def test_with_operators_same_bug_iff_no_differences(a, b):
    # differences() only speaks for the kernel assertion of self, like same_bug
    assert a.same_bug(b) == (a.differences(b) == [])


# ======================================================================================
# headline and keep_text: what --keep-error is matched against
# ======================================================================================


def test_headline_is_class_and_first_line():
    sig = make_sig("torch.AcceleratorError", DEVICE_ASSERT)
    assert sig.headline == "torch.AcceleratorError: CUDA error: device-side assert triggered"
    assert make_sig("KeyboardInterrupt", "").headline == "KeyboardInterrupt"
    assert make_sig("RuntimeError", "\n  \n  first\nsecond").headline == "RuntimeError: first"


def test_keep_text_is_class_message_and_kernel_assertion():
    sig = Signature.from_record(rec("torch.AcceleratorError", DEVICE_ASSERT, op=ce_op()), output=LOSS_ASSERT)
    assert sig.keep_text() == f"torch.AcceleratorError: {DEVICE_ASSERT}\n{LOSS_ASSERT_VALUE}"
    assert make_sig().keep_text() == "IndexError: Target 4 is out of bounds."


@pytest.mark.parametrize(
    "pattern, matches",
    [
        ("device-side assert", True),
        (r"AcceleratorError: CUDA error", True),
        ("n_classes", True),  # only in the kernel assertion
        ("CUDA_LAUNCH_BLOCKING", True),  # later lines of the message count
        ("cross_entropy", False),  # the operator name is not text of the error
        ("train_step|F\\.cross_entropy", False),  # nor is the source line
        ("epoch 3", False),  # nor is anything else the script printed
    ],
)
def test_keep_error_pattern_search(pattern, matches):
    sig = Signature.from_record(
        rec("torch.AcceleratorError", DEVICE_ASSERT, op=ce_op()),
        output="epoch 3 step 7 loss 1.38\n" + LOSS_ASSERT,
    )
    assert bool(re.search(pattern, sig.keep_text())) is matches


def test_keep_text_of_an_argparse_exit_does_not_contain_what_it_printed():
    # The slip of the brief: argparse echoes argv (holding the error text) into its usage
    # error.  The structured signature of that run is SystemExit 2, nothing more.
    usage = "usage: train.py [-h]\ntrain.py: error: unrecognized arguments: --keep-error device-side assert"
    sig = Signature.from_record(rec("SystemExit", "2", frame=None), output=usage)
    assert sig.keep_text() == "SystemExit: 2"
    assert re.search("device-side assert", sig.keep_text()) is None


def test_batch_strictness_lets_a_shared_first_dimension_shrink_and_nothing_else():
    from shrinkgpu.signature import Strictness, batch_compatible

    def meta(path, dtype, shape, stride):
        return TensorMeta(path, dtype, shape, stride, "cpu")

    orig = (meta("args[0]", "float32", (256, 5), (5, 1)), meta("args[1]", "int64", (256,), (1,)))
    assert batch_compatible(orig, (meta("args[0]", "float32", (4, 5), (5, 1)), meta("args[1]", "int64", (4,), (1,))))
    # input and target must still agree on the rows
    assert not batch_compatible(orig,
                                (meta("args[0]", "float32", (4, 5), (5, 1)), meta("args[1]", "int64", (8,), (1,))))
    # the classes are not a batch dimension; nor is the dtype or the layout free
    assert not batch_compatible(orig,
                                (meta("args[0]", "float32", (4, 6), (6, 1)), meta("args[1]", "int64", (4,), (1,))))
    assert not batch_compatible(orig,
                                (meta("args[0]", "float64", (4, 5), (5, 1)), meta("args[1]", "int64", (4,), (1,))))
    assert not batch_compatible(orig,
                                (meta("args[0]", "float32", (4, 5), (1, 4)), meta("args[1]", "int64", (4,), (1,))))
    # an embedding's table shares no first dimension with the indices: it stays
    emb = (meta("args[0]", "int64", (33,), (1,)), meta("args[1]", "float32", (32, 48), (48, 1)))
    assert not batch_compatible(emb,
                                (meta("args[0]", "int64", (33,), (1,)), meta("args[1]", "float32", (40, 48), (48, 1))))
    # a lone tensor (a view of a transposed batch) keeps its layout as it shrinks
    view = (meta("self", "float32", (64, 3, 8), (24, 1, 3)),)
    assert batch_compatible(view, (meta("self", "float32", (2, 3, 8), (24, 1, 3)),))
    assert not batch_compatible(view, (meta("self", "float32", (2, 3, 8), (24, 8, 1)),))
    assert Strictness("batch") is Strictness.BATCH


# -- raise ... from None: the error Python shows, and what it hid ----------------------------------
def test_keep_error_matches_the_shown_error_its_continuation_lines_and_what_from_none_hid():
    import re as _re

    from shrinkgpu.signature import Target

    shown = Signature.from_record(
        ExceptionRecord("_pickle.UnpicklingError", "Weights only load failed. This file can still be loaded.\n"
                        "\tWeightsUnpickler error: Unsupported global: GLOBAL numpy._core.multiarray._reconstruct"),
        suppressed=ExceptionRecord("_pickle.UnpicklingError",
                                   "Unsupported global: GLOBAL numpy._core.multiarray._reconstruct"),
    )
    for pattern in ("Weights only load failed", "WeightsUnpickler error",
                    "^_pickle.UnpicklingError: Unsupported global"):
        assert Target(shown, _re.compile(pattern, _re.M)).matches(shown), pattern
    assert shown.headline == "_pickle.UnpicklingError: Weights only load failed. This file can still be loaded."
    assert ("raised while handling (hidden by `raise ... from None`): _pickle.UnpicklingError: Unsupported"
            in shown.describe())
    assert Signature.from_json(shown.to_json()).suppressed == shown.suppressed
    # A candidate that lost what was hidden no longer matches a pattern only the hidden text had.
    bare = Signature.from_record(ExceptionRecord("_pickle.UnpicklingError", shown.message.splitlines()[0]))
    target = Target(shown, _re.compile("Unsupported global"))
    assert target.matches(shown) and target.mismatch(bare) == "keep-error"


# -- dimensions the program varies (issue 21) ------------------------------------------------------
def _embedding(length: int, rows: int = 65) -> Signature:
    return Signature.from_record(ExceptionRecord(
        "IndexError", "index out of range in self", op=OpRecord("torch.nn.functional.embedding", (
            TensorMeta("args[0]", "int64", (1, length), (length, 1), "cpu"),
            TensorMeta("args[1]", "float32", (rows, 32), (32, 1), "cpu"),
        ), ()),
    ))


def test_a_sequence_the_program_grows_is_the_same_bug_at_another_length():
    from shrinkgpu.signature import Target, varying_dims

    original = _embedding(57)
    seen = {"args[0]": [[1, n] for n in range(1, 58)], "args[1]": [[65, 32]]}
    free = varying_dims(original.op, seen)
    assert free == {("args[0]", 1)}
    target = Target(original, free=free)
    assert target.matches(_embedding(2))  # the same bug without the training that grew it
    assert not target.matches(_embedding(2, rows=64))  # a table of another size is not
    assert not Target(original).matches(_embedding(2))  # without the rule: strict as before


def test_a_class_count_the_program_never_varied_stays_strict():
    from shrinkgpu.signature import Target, varying_dims

    def ce(rows: int, classes: int) -> Signature:
        return Signature.from_record(ExceptionRecord(
            "IndexError", "Target 4 is out of bounds.", op=OpRecord("torch.nn.functional.cross_entropy", (
                TensorMeta("args[0]", "float32", (rows, classes), (classes, 1), "cpu"),
                TensorMeta("args[1]", "int64", (rows,), (1,), "cpu"),
            ), ()),
        ))

    original = ce(32, 4)
    # Batches of 32 and a last one of 20: the rows varied, the classes never did.
    seen = {"args[0]": [[32, 4], [20, 4]], "args[1]": [[32], [20]]}
    target = Target(original, free=varying_dims(original.op, seen))
    assert target.free == {("args[0]", 0), ("args[1]", 0)}
    assert target.matches(ce(20, 4)) and target.matches(ce(7, 4))
    assert not target.matches(ce(32, 5))


def test_an_inf_at_the_operator_is_another_bug_than_a_negative_number_with_the_same_message():
    # multinomial says "inf, nan or element < 0" for all three.
    def multinomial(finite: bool | None) -> Signature:
        return Signature.from_record(ExceptionRecord(
            "RuntimeError", "probability tensor contains either `inf`, `nan` or element < 0",
            op=OpRecord("torch.multinomial", (TensorMeta("args[0]", "float32", (64, 12), (12, 1), "cpu", finite),), ()),
        ))

    trained = multinomial(False)
    assert trained.same_bug(multinomial(False))
    assert not trained.same_bug(multinomial(True))
    assert not trained.same_bug(multinomial(True), Strictness.BATCH)
    assert trained.same_bug(multinomial(True), Strictness.OPERATOR)  # the metadata may change there
    assert trained.same_bug(multinomial(None))  # a case file that did not record it
    assert "holds inf or nan" in trained.op.tensors[0].describe()
    again = Signature.from_json(trained.to_json())
    assert again.op.tensors[0].finite is False


def test_a_compile_error_raised_through_another_dynamo_wrapper_is_the_same_bug():
    """A module compiled whole (``OptimizedModule.__call__``) and its forward compiled as a
    function (``compile_wrapper``): one bug when Dynamo says the same thing; a real
    operator is not a wrapper."""
    def compiled(op_name, others=()):
        op = None if op_name is None else OpRecord(op_name, (), others)
        return Signature(type="torch._dynamo.exc.Unsupported", message="logging.Logger method not supported",
                         normalized="logging.Logger method not supported [gb0291]", op=op, frame=None,
                         family=Family.COMPILE)

    module = compiled("torch._dynamo.eval_frame.OptimizedModule.__call__", ("kwargs['self'] = <OptimizedModule>",))
    function = compiled("torch._dynamo.eval_frame._TorchDynamoContext.__call__.<locals>.compile_wrapper")
    assert module.same_bug(function) and function.same_bug(module) and module.same_bug(compiled(None))
    assert not module.same_bug(compiled("torch.nn.functional.linear"))
    other = dataclasses.replace(function, normalized="Data-dependent branching [gb0170]")
    assert not module.same_bug(other)


def test_dynamo_reraising_its_tracing_error_from_its_wrapper_leaves_the_root_first():
    wrapper = OpRecord("torch._dynamo.eval_frame._TorchDynamoContext.__call__.<locals>.compile_wrapper", ())
    outer = ExceptionRecord("torch._dynamo.exc.FailOnRecompileLimitHit",
                            "Hard failure due to fail_on_recompile_limit_hit", op=wrapper, ident=1)
    root = ExceptionRecord("torch._dynamo.exc.Unsupported", "Dynamo recompile limit exceeded", ident=2)
    assert choose_first_error([outer, root], []) is root
    # a real operator that raised above a plain root is still preferred
    linear = dataclasses.replace(outer, op=OpRecord("torch.nn.functional.linear", ()))
    assert choose_first_error([linear, root], []) is linear


# -- the operator's non-default arguments are part of the call -----------------------------------
def test_changed_arguments_are_another_call_unless_asked():
    base = Signature.from_json(json.loads(json.dumps({
        "type": "IndexError", "message": "Target 3 is out of bounds.", "normalized": "Target <n> is out of bounds.",
        "op": {"name": "torch.nn.functional.cross_entropy", "tensors": [],
               "arguments": ["ignore_index=255", "reduction='none'"]},
        "frame": None, "family": "index out of range",
    })))
    from dataclasses import replace

    dropped = replace(base, op=replace(base.op, arguments=("ignore_index=255",)))
    assert not base.same_bug(dropped)
    assert "different arguments at the operator" in base.differences(dropped)[0]
    assert base.same_bug(dropped, Strictness.TENSORS)
    assert base.same_bug(dropped, Strictness.OPERATOR)
