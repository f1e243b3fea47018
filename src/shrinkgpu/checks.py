"""Checks to put in front of an operator, the field guide's worked example made reusable.

A classifier with 4 outputs gets target 4 from a label source that counts 1..4; on the
GPU that is a device-side assert, possibly reported later, on the CPU ``Target 4 is out
of bounds.``  Enlarging the output layer hides it.  The right check validates class-index
targets against ``num_classes`` (``ignore_index`` excluded) before they reach the loss,
and names what it rejects, so that a bad batch is found, not silently skipped::

    from shrinkgpu.checks import validate_class_targets
    validate_class_targets(target, num_classes=4)      # ValueError for [0, 2, 4]
    loss = F.cross_entropy(logits, target)

Each check reads values on the host (one synchronisation): put it where the data enters,
not in the hot loop of a tuned training run.  torch is imported when a check runs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["validate_class_targets", "validate_embedding_indices", "validate_index"]

MAX_LISTED = 8  # offending entries named in a message


def _torch():
    import torch

    return torch


def _describe(values, positions, total: int) -> str:
    pairs = [f"{v} at {p}" for v, p in zip(values[:MAX_LISTED], positions[:MAX_LISTED])]
    more = f" (and {total - MAX_LISTED} more)" if total > MAX_LISTED else ""
    return ", ".join(pairs) + more


def _offending(mask, tensor) -> tuple[list[Any], list[Any], int]:
    torch = _torch()
    where = torch.nonzero(mask, as_tuple=False)
    total = int(where.shape[0])
    rows = where[:MAX_LISTED].tolist()
    values = [tensor[tuple(r)].item() for r in rows]
    positions = [tuple(r) if len(r) != 1 else r[0] for r in rows]
    return values, positions, total


def validate_class_targets(
    target, num_classes: int, ignore_index: int = -100, *, input=None, allow_all_ignored: bool = False
):
    """Raise ``ValueError`` unless ``target`` holds class indices in ``[0, num_classes)``
    (entries equal to ``ignore_index`` excepted), as ``cross_entropy``/``nll_loss`` need.

    Rejects a target that is not an integer tensor (probabilities are a different call),
    one that is empty or not a tensor, one whose shape does not fit ``input`` (the
    logits, ``(N, C, ...)`` -> ``(N, ...)``) when given, and, unless
    ``allow_all_ignored``, a batch whose every entry is ``ignore_index`` (its mean loss
    is nan).  Returns ``target``.
    """
    torch = _torch()
    if not isinstance(target, torch.Tensor):
        raise ValueError(f"class targets must be a tensor, not {type(target).__name__}")
    if input is not None:
        expected = (input.shape[0], *input.shape[2:]) if input.dim() > 1 else ()
        if tuple(target.shape) != tuple(expected):
            raise ValueError(
                f"class targets have shape {tuple(target.shape)}, the logits {tuple(input.shape)} need "
                f"{tuple(expected)}"
            )
        if input.dim() > 1 and input.shape[1] != num_classes:
            raise ValueError(f"the logits have {input.shape[1]} classes, not num_classes={num_classes}")
    if target.dtype.is_floating_point or target.dtype.is_complex or target.dtype == torch.bool:
        raise ValueError(
            f"class targets must be an integer tensor (int64), not {target.dtype}; "
            "class probabilities are another form of cross_entropy's target"
        )
    if num_classes < 1:
        raise ValueError(f"num_classes must be at least 1, not {num_classes}")
    if target.numel() == 0:
        raise ValueError(f"class targets are empty (shape {tuple(target.shape)})")
    flat = target.detach()
    ignored = flat == ignore_index
    if bool(ignored.all()) and not allow_all_ignored:
        raise ValueError(
            f"every one of the {flat.numel()} class targets is ignore_index ({ignore_index}): "
            "the mean loss of this batch is nan"
        )
    bad = ((flat < 0) | (flat >= num_classes)) & ~ignored
    if bool(bad.any()):
        values, positions, total = _offending(bad, flat)
        raise ValueError(
            f"{total} class target(s) outside [0, {num_classes}) (ignore_index={ignore_index}): "
            f"{_describe(values, positions, total)}"
        )
    return target


def validate_embedding_indices(indices, num_embeddings: int, padding_idx: int | None = None):
    """Raise ``ValueError`` unless ``indices`` are integer indices in ``[0,
    num_embeddings)``, as ``embedding`` needs (``padding_idx`` counts as valid).
    Returns ``indices``."""
    torch = _torch()
    if not isinstance(indices, torch.Tensor):
        raise ValueError(f"embedding indices must be a tensor, not {type(indices).__name__}")
    if indices.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"embedding indices must be int64 or int32, not {indices.dtype}")
    flat = indices.detach()
    bad = (flat < 0) | (flat >= num_embeddings)
    if padding_idx is not None:
        bad &= flat != padding_idx
    if bool(bad.any()):
        values, positions, total = _offending(bad, flat)
        raise ValueError(
            f"{total} embedding index(es) outside [0, {num_embeddings}): {_describe(values, positions, total)}"
        )
    return indices


def validate_index(input, dim: int, index):
    """Raise ``ValueError`` unless ``index`` can index ``input`` along ``dim`` as
    ``gather``, ``scatter``, ``index_select``, ``index_add`` and ``index_copy`` need: an
    integer tensor whose values lie in ``[0, size)`` of that dimension (unlike Python's
    indexing, none of them takes a negative index: ``gather`` says "index -1 is out of
    bounds").  ``dim`` may be negative.  Returns ``index``."""
    torch = _torch()
    if not isinstance(index, torch.Tensor):
        raise ValueError(f"an index must be a tensor, not {type(index).__name__}")
    if index.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"an index must be int64 or int32, not {index.dtype}")
    if not -input.dim() <= dim < max(1, input.dim()):
        raise ValueError(f"dim {dim} is out of range for a {input.dim()}-d input")
    size = input.shape[dim] if input.dim() else 1
    flat = index.detach()
    bad = (flat < 0) | (flat >= size)
    if bool(bad.any()):
        values, positions, total = _offending(bad, flat)
        raise ValueError(
            f"{total} index value(s) outside [0, {size}) for dimension {dim} of size {size}: "
            f"{_describe(values, positions, total)}"
        )
    return index
