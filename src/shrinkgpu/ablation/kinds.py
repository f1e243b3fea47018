"""The bug's kind, from the outcomes of the changes, in the field guide's words.

Three explanations are kept apart: **invalid data** (valid values pass: fix them where
they are made, and check them where they enter), **operator contract** (valid-looking
values still fail, on the CPU and the GPU alike: the call breaks what the operator
documents, or the operator is wrong) and **binary environment** (the same values pass
with another backend, build or dtype kernel).  A change of device alone decides
nothing: a success on the CPU is a hint, not CUDA evidence.  When the outcomes do not
decide, the kind is "not enough evidence", and the reason says what was seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from shrinkgpu.ablation.changes import (
    BACKEND,
    CALL,
    DATA,
    DEVICE,
    DIFFERENT,
    EXTENSION,
    LAYOUT,
    PASSES,
    PRECISION,
    SAME,
    SIZE,
    Outcome,
)

__all__ = ["CONTRACT", "ENVIRONMENT", "INVALID_DATA", "KINDS", "UNDECIDED", "Kind", "kind_of"]

INVALID_DATA, CONTRACT, ENVIRONMENT, UNDECIDED = (
    "invalid data", "operator contract", "binary environment", "not enough evidence")
KINDS = (INVALID_DATA, CONTRACT, ENVIRONMENT, UNDECIDED)


@dataclass(frozen=True)
class Kind:
    kind: str
    reason: str  # one line: which outcome decides it
    hint: str | None = None  # what a change of device alone showed

    def to_json(self) -> dict:
        return {"kind": self.kind, "reason": self.reason, "hint": self.hint}


def _names(found: Sequence[Outcome]) -> str:
    return ", ".join(f"`{o.change}`" for o in found)


def _shown(o: Outcome) -> str:
    """The change as code when it is a few added lines (``x1 = x1.clamp(0, 3)``)."""
    added = [ln[2:] for ln in o.edit.splitlines() if ln.startswith("+ ")]
    return "; ".join(added) if added and len(added) == len(o.edit.splitlines()) else o.change


def _with_output(o: Outcome) -> str:
    if o.output and "not all finite" in o.output:
        return f" (but its result is {o.output}: look at the values it returns too)"
    return ""


def kind_of(found: Sequence[Outcome], *, on_gpu: bool, compiled: bool = False) -> Kind:
    passing = [o for o in found if o.result == PASSES]
    by_category = {c: [o for o in passing if o.category == c] for c in (DATA, LAYOUT, PRECISION, DEVICE, BACKEND,
                                                                         EXTENSION, SIZE)}
    hint = None
    if by_category[DEVICE]:
        where = "on the CPU" if on_gpu else "on a GPU"
        hint = (f"it passes {where} ({_names(by_category[DEVICE])}): a hint that the kernels differ, not evidence "
                "of which is wrong")

    def kind(name: str, reason: str) -> Kind:
        return Kind(name, reason, hint)

    if by_category[DATA]:
        o = by_category[DATA][0]
        return kind(INVALID_DATA, f"with the offending values made valid (`{_shown(o)}`) it passes{_with_output(o)}: "
                                  "the values are wrong, not the operator; fix them where they are made and check "
                                  "them where they enter")
    by = {o.change: o.result for o in found}
    if compiled and by.get("torch.compile off") == PASSES:
        if by.get("fullgraph=False") == PASSES and by.get('backend="eager"') != PASSES:
            return kind(CONTRACT, "it passes with fullgraph=False: a graph break that fullgraph=True makes fatal, "
                                  "code outside what Dynamo traces as one graph")
        eager_backends = [o for o in passing if o.change.startswith("backend=")]
        if eager_backends:
            return kind(ENVIRONMENT, f"the same program passes eagerly and with {_names(eager_backends)}: the "
                                     "compiler stack fails where the eager kernels do not (see the stage above)")
        return kind(UNDECIDED, "it passes without torch.compile and fails with every backend: Dynamo's tracing "
                               "breaks, by a program it does not support or by a bug of its own; the outcomes do not "
                               "tell which")
    if compiled and by.get("torch.compile off") == DIFFERENT:
        off = next(o for o in found if o.change == "torch.compile off")
        return kind(UNDECIDED, f"without torch.compile the reduced case fails otherwise ({off.error}): it no longer "
                               "runs eagerly, so the outcomes cannot tell what the program asks of Dynamo from a bug "
                               "of Dynamo's (the stage above says where it breaks)")
    if by_category[EXTENSION]:
        return kind(ENVIRONMENT, f"it passes with {_names(by_category[EXTENSION])}"
                                 f"{_with_output(by_category[EXTENSION][0])} (torch's own operator, or the "
                                 "program's fallback, instead of the extension's): the extension's kernel (or its "
                                 "build) is where it breaks")
    other_backends = [o for o in by_category[BACKEND] if not o.change.startswith(("backend=", "dynamic=",
                                                                                   "fullgraph="))]
    if other_backends:
        return kind(ENVIRONMENT, f"the same values pass with {_names(other_backends)}"
                                 f"{_with_output(other_backends[0])}: a kernel of the backend that was switched off, "
                                 "not the values or the call")
    mixed = [o for o in by_category[PRECISION] if o.change.startswith("one dtype")]
    if mixed:
        return kind(CONTRACT, f"it passes with {_names(mixed)}: the inputs mix dtypes, which the operator does not "
                              "take")
    if by_category[PRECISION]:
        o = by_category[PRECISION][0]
        return kind(ENVIRONMENT, f"the same values pass in float32 (`{_shown(o)}`){_with_output(o)}: the kernel for "
                                 "the other dtype (its build, or its precision)")
    if by_category[LAYOUT]:
        o = by_category[LAYOUT][0]
        return kind(CONTRACT, f"it passes with `{_shown(o)}`{_with_output(o)}: the call breaks the operator's "
                              "contract on strides (a view needs compatible ones)")
    if by_category[DEVICE]:
        return kind(UNDECIDED, "only the change of device passes: " + hint)
    if by_category[SIZE]:
        return kind(UNDECIDED, f"it passes with {_names(by_category[SIZE])} and with nothing else: the size matters "
                               "(or the offending row was cut with it); the outcomes do not decide the kind")
    call = [o for o in found if o.subject == CALL]
    if not call:
        return kind(UNDECIDED, "no change passes, and the call was not extracted: the values, the layout and the "
                               "precision were not compared")
    data = [o for o in call if o.category == DATA]
    if data and data[0].result != SAME:
        return kind(UNDECIDED, f"with valid values (`{_shown(data[0])}`) it fails differently ({data[0].error})")
    devices = [o for o in found if o.category == DEVICE]
    if on_gpu and not (devices and devices[0].result == SAME):
        return kind(UNDECIDED, "nothing passes, but the same call was not seen failing the same way on the CPU")
    valid = "with valid values" if data else "with no offending value to change"
    if devices and devices[0].result == SAME:
        where = " on the CPU and the GPU alike"
    else:
        where = " on the CPU (no GPU to compare)"
    return kind(CONTRACT, f"{valid}, the call still fails{where} with every change tried: it breaks the operator's "
                          "documented contract, or the operator is wrong")
