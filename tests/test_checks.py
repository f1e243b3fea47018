"""The field guide's worked example made reusable: checks in front of an operator."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from shrinkgpu.checks import validate_class_targets, validate_embedding_indices, validate_index


def test_the_field_guides_case_is_rejected_with_the_value_and_its_position():
    with pytest.raises(ValueError) as exc:
        validate_class_targets(torch.tensor([0, 2, 4]), num_classes=4)
    assert str(exc.value) == "1 class target(s) outside [0, 4) (ignore_index=-100): 4 at 2"
    # and that is exactly the call that fails without the check
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        F.cross_entropy(torch.randn(3, 4), torch.tensor([0, 2, 4]))


def test_valid_targets_and_ignored_entries_pass_and_are_returned():
    target = torch.tensor([0, 3, -100, 1])
    assert validate_class_targets(target, 4) is target
    assert validate_class_targets(torch.tensor([[0, 255], [3, 2]]), 4, ignore_index=255) is not None


def test_a_negative_target_that_is_not_ignore_index_is_rejected():
    with pytest.raises(ValueError, match=r"-1 at 1"):
        validate_class_targets(torch.tensor([0, -1]), 4)


def test_every_offender_is_counted_and_the_first_ones_named():
    target = torch.tensor([5] * 20)
    with pytest.raises(ValueError, match=r"^20 class target\(s\) outside \[0, 4\).*5 at 0, 5 at 1.*\(and 12 more\)$"):
        validate_class_targets(target, 4)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (torch.tensor([0.0, 1.0]), "must be an integer tensor"),
        (torch.tensor([True, False]), "must be an integer tensor"),
        ([0, 2, 4], "must be a tensor"),
        (torch.tensor([], dtype=torch.long), "are empty"),
    ],
)
def test_non_integer_or_empty_targets_are_refused(target, message):
    with pytest.raises(ValueError, match=message):
        validate_class_targets(target, 4)


def test_a_wrongly_shaped_target_is_refused_against_its_logits():
    with pytest.raises(ValueError, match=r"shape \(3, 1\), the logits \(3, 4\) need \(3,\)"):
        validate_class_targets(torch.tensor([[0], [1], [2]]), 4, input=torch.randn(3, 4))
    with pytest.raises(ValueError, match="the logits have 5 classes"):
        validate_class_targets(torch.tensor([0, 1, 2]), 4, input=torch.randn(3, 5))
    validate_class_targets(torch.tensor([[0, 1]]), 4, input=torch.randn(1, 4, 2))


def test_an_all_ignored_batch_is_said_because_its_mean_loss_is_nan():
    target = torch.tensor([-100, -100])
    assert torch.isnan(F.cross_entropy(torch.randn(2, 4), target))
    with pytest.raises(ValueError, match="every one of the 2 class targets is ignore_index"):
        validate_class_targets(target, 4)
    assert validate_class_targets(target, 4, allow_all_ignored=True) is target


def test_embedding_indices_and_gather_indices():
    with pytest.raises(ValueError, match=r"1 embedding index\(es\) outside \[0, 10\): 10 at \(1, 0\)"):
        validate_embedding_indices(torch.tensor([[1], [10]]), 10)
    validate_embedding_indices(torch.tensor([0, 9]), 10)
    with pytest.raises(ValueError, match="must be int64 or int32"):
        validate_embedding_indices(torch.tensor([0.5]), 10)
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=r"outside \[0, 3\) for dimension 1 of size 3: 5 at \(0, 0\)"):
        validate_index(x, 1, torch.tensor([[5], [0]]))
    validate_index(x, 1, torch.tensor([[2], [0]]))
    validate_index(x, -1, torch.tensor([[2], [0]]))


def test_an_index_check_rejects_what_the_operators_reject_and_nothing_else():
    # None of the operators validate_index stands for takes a negative index.
    x = torch.zeros(2, 3)
    index = torch.tensor([[2], [-1]])
    for call in (lambda: x.gather(1, index), lambda: x.scatter(1, index, torch.ones(2, 1)),
                 lambda: x.index_select(1, index.flatten()), lambda: x.index_add(1, index.flatten(), torch.ones(2, 2))):
        with pytest.raises((RuntimeError, IndexError)):
            call()
    with pytest.raises(ValueError,
                       match=r"1 index value\(s\) outside \[0, 3\) for dimension 1 of size 3: -1 at \(1, 0\)"):
        validate_index(x, 1, index)
    ok = torch.tensor([[2], [0]])
    x.gather(1, ok)
    assert validate_index(x, 1, ok) is ok
