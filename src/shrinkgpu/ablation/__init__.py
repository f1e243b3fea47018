"""One change at a time, after the cut: the comparisons the field guide asks for.

Once the case is small, the guide compares one change at a time (valid data, contiguous
inputs, the usual precision, another device, another backend, the batch size) and keeps
three explanations apart: invalid data, the operator's contract and the binary
environment.  The modules here make the changes, as new texts of the minimal case
(``program``, ``compiled``) or of the extracted call (``call``), and read the kind from
their outcomes (``kinds``); the caller runs each once in its own process.
"""

from shrinkgpu.ablation.call import call_changes, with_edit
from shrinkgpu.ablation.changes import (
    BACKEND,
    CALL,
    CASE,
    CATEGORIES,
    DATA,
    DEVICE,
    DIFFERENT,
    EXTENSION,
    LAYOUT,
    PASSES,
    PRECISION,
    SAME,
    SIZE,
    SYNC,
    Change,
    Outcome,
    diff_of,
    outcome_of,
    outcomes,
)
from shrinkgpu.ablation.compiled import BACKENDS, compile_backend, compile_changes, summary
from shrinkgpu.ablation.kinds import CONTRACT, ENVIRONMENT, INVALID_DATA, KINDS, UNDECIDED, Kind, kind_of
from shrinkgpu.ablation.program import extension_changes, program_changes

__all__ = ["BACKEND", "BACKENDS", "CALL", "CASE", "CATEGORIES", "CONTRACT", "DATA", "DEVICE", "DIFFERENT",
           "ENVIRONMENT", "EXTENSION", "INVALID_DATA", "KINDS", "LAYOUT", "PASSES", "PRECISION", "SAME", "SIZE", "SYNC",
           "UNDECIDED", "Change", "Kind", "Outcome", "call_changes", "compile_backend", "compile_changes", "diff_of",
           "extension_changes", "kind_of", "outcome_of", "outcomes", "program_changes", "summary", "with_edit"]
