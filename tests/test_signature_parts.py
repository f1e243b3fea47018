"""signature.first_difference (beside tests/test_signature.py, which tests the rule
itself): the part of a first error that keeps it from being the same bug, named in the
order ``PARTS`` gives, and None exactly when ``Signature.same_bug`` says it is the same
bug, whatever the strictness and the dimensions the original varied (issue 49)."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from shrinkgpu.signature import PARTS, Frame, OpRecord, Signature, Strictness, first_difference
from signatures import CE, LOSS_ASSERT_VALUE, ce_op, make_sig, tm


def with_tensor(sig: Signature, k: int, **changes) -> Signature:
    tensors = list(sig.op.tensors)
    tensors[k] = dataclasses.replace(tensors[k], **changes)
    return dataclasses.replace(sig, op=dataclasses.replace(sig.op, tensors=tuple(tensors)))


# its logits held only finite values (where a run records it)
ORIGINAL = with_tensor(make_sig(), 0, finite=True)


def test_the_same_bug_has_no_part():
    assert first_difference(ORIGINAL, make_sig(message="Target 7 is out of bounds.")) is None


def test_each_part_by_name():
    cases = {
        "class": make_sig(type="RuntimeError"),
        "message": make_sig(message="index 4 is out of bounds for dimension 0"),
        "kernel assertion": make_sig(kernel=LOSS_ASSERT_VALUE),
        "operator": make_sig(op=dataclasses.replace(ce_op(), name="torch.nn.functional.nll_loss")),
        "values": with_tensor(ORIGINAL, 0, finite=False),
        "tensors": make_sig(op=OpRecord(CE, (tm(),))),
        "dtype": with_tensor(ORIGINAL, 0, dtype="torch.float64"),
        "device": with_tensor(ORIGINAL, 0, device="cpu"),
        "shape": with_tensor(ORIGINAL, 0, shape=(5, 4)),
        "stride": with_tensor(ORIGINAL, 0, stride=(1, 3)),
        "arguments": make_sig(op=dataclasses.replace(ce_op(), arguments=("ignore_index=255",))),
    }
    for part, other in cases.items():
        assert part in PARTS
        assert first_difference(ORIGINAL, other) == part, part
        assert not ORIGINAL.same_bug(other)
    # a cut that changed the dtype and the shape changed the dtype first
    both = with_tensor(with_tensor(ORIGINAL, 1, shape=(5,)), 0, dtype="torch.float64")
    assert first_difference(ORIGINAL, both) == "dtype"


def test_an_error_no_torch_call_raised_differs_by_the_statement_that_raised_it():
    here = make_sig(type="ValueError", message="bad label", op=None)
    there = dataclasses.replace(here, frame=Frame("train.py", 9, "f", "raise ValueError('bad label!')"))
    assert first_difference(here, there) == "statement"
    assert first_difference(here, make_sig(type="ValueError", message="bad label")) == "operator"


def test_a_crash_differs_by_its_last_frame_and_words():
    crash = Signature.for_signal(6, "SIGABRT", stderr="terminate called\nAborted", frame=Frame("t.py", 1, "f", "x()"))
    assert first_difference(crash, crash) is None
    assert first_difference(crash, dataclasses.replace(crash, frame=Frame("t.py", 2, "f", "y()"))) == "crash"


def test_the_strictness_lets_parts_go():
    bigger_batch = with_tensor(with_tensor(ORIGINAL, 0, shape=(5, 4)), 1, shape=(5,))
    assert first_difference(ORIGINAL, bigger_batch) == "shape"
    assert first_difference(ORIGINAL, bigger_batch, Strictness.BATCH) is None
    assert first_difference(ORIGINAL, with_tensor(ORIGINAL, 0, dtype="torch.float64"), Strictness.OPERATOR) is None
    argued = make_sig(op=dataclasses.replace(ce_op(), arguments=("ignore_index=255",)))
    assert first_difference(ORIGINAL, argued, Strictness.TENSORS) is None
    # a dimension the original itself varied is not the bug's
    longer = with_tensor(ORIGINAL, 0, shape=(3, 9), stride=(9, 1))
    assert first_difference(ORIGINAL, longer, free=frozenset({("args[0]", 1)})) is None
    assert first_difference(ORIGINAL, longer) == "shape"


# -- None exactly when same_bug: drawn pairs -------------------------------------------------------
layouts = st.sampled_from([((3, 4), (4, 1)), ((3, 4), (1, 3)), ((5, 4), (4, 1)), ((3, 8), (8, 1)), ((3, 8), (1, 3)),
                           ((4,), (1,)), ((3,), (1,))])


def tensor(path, dtype, layout, device, finite):
    shape, stride = layout
    return dataclasses.replace(tm(path, dtype, shape, stride, device), finite=finite)


tensors = st.builds(
    tensor,
    path=st.sampled_from(["args[0]", "args[1]"]),
    dtype=st.sampled_from(["torch.float32", "torch.float64"]),
    layout=layouts,
    device=st.sampled_from(["cuda:0", "cpu"]),
    finite=st.sampled_from([None, True, False]),
)
ops = st.one_of(st.none(), st.builds(
    OpRecord,
    name=st.sampled_from([CE, "torch.nn.functional.nll_loss"]),
    tensors=st.lists(tensors, min_size=1, max_size=2).map(tuple),
    arguments=st.sampled_from([(), ("ignore_index=255",)]),
))
signatures = st.builds(
    make_sig,
    type=st.sampled_from(["IndexError", "RuntimeError"]),
    message=st.sampled_from(["Target 4 is out of bounds.", "Target 9 is out of bounds.", "other"]),
    op=ops,
    frame=st.sampled_from([Frame("t.py", 1, "f", "a()"), Frame("t.py", 2, "f", "b()")]),
)
free_dims = st.frozensets(st.tuples(st.sampled_from(["args[0]", "args[1]"]), st.integers(0, 1)), max_size=2)


@settings(max_examples=400, deadline=None)
@given(signatures, signatures, st.sampled_from(list(Strictness)), free_dims)
def test_no_part_exactly_when_same_bug(a, b, strictness, free):
    part = first_difference(a, b, strictness, free)
    assert (part is None) == a.same_bug(b, strictness, free), part
    assert part is None or part in PARTS
