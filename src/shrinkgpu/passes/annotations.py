"""Type annotations out of the way.

Typed code spells its types on every parameter, return and class attribute
(``def __init__(self, cfg: DataConfig, callbacks: list[Callback] | None = None)``,
``n_series: int = 32``, ``-> tuple[DataLoader, DataLoader]``).  None of it runs in a
reproduction, it is a good part of a typed script's tokens, and an annotation is a read:
it keeps ``Protocol`` stubs, config classes and imports alive that nothing else uses.

One unit per function (every annotation of its signature) and one per block of
annotated assignments (``n: int = 32`` -> ``n = 32``).  Code that does read annotations
at run time (a ``@dataclass`` still decorated, ``NamedTuple``/``TypedDict``/pydantic
classes, ``torch.jit.script``, a CLI built from type hints) is left to the test, except
for the classes whose fields are their annotations, which are never offered.
"""

from __future__ import annotations

import libcst as cst

from shrinkgpu.passes.base import LevelZeroPass, Unit
from shrinkgpu.syntax.code import code_of
from shrinkgpu.syntax.edits import Edit
from shrinkgpu.syntax.program import Candidate

# Classes whose annotated attributes are their fields: without the annotation the
# attribute is a plain class attribute and the class means something else.
_FIELD_BASES = ("NamedTuple", "TypedDict", "BaseModel", "BaseSettings", "Struct")


def _fields_are_annotations(cls: cst.ClassDef) -> bool:
    if cls.decorators:
        return True  # ``@dataclass``, ``@attr.s``, ...: strip-decorators goes first
    return any(code_of(b.value).split(".")[-1].split("[")[0] in _FIELD_BASES for b in cls.bases)


class StripAnnotations(LevelZeroPass):
    """``def f(x: int) -> T`` -> ``def f(x)``; ``n: int = 32`` -> ``n = 32``."""

    name = "strip-annotations"
    needs_rebased = True  # the assignments are rewritten from their original text

    def edits(self, cand: Candidate) -> list[Unit]:
        program = cand.program
        out: list[Unit] = []
        blocks: dict[int | None, list[Edit]] = {}
        for s in cand.editable():
            node = s.node
            if isinstance(node, cst.FunctionDef):
                params = node.params
                every = [*params.posonly_params, *params.params, *params.kwonly_params]
                for star in (params.star_arg, params.star_kwarg):
                    if isinstance(star, cst.Param):
                        every.append(star)
                found = [p.annotation for p in every if p.annotation is not None]
                if node.returns is not None:
                    found.append(node.returns)
                if found:
                    out.append(tuple(Edit("remove", node=program.node_index(a)) for a in found))
            elif s.kind == "simple" and isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
                small = node.body[0]
                if not isinstance(small, cst.AnnAssign) or small.value is None:
                    continue
                if s.parent is not None:
                    owner = program.stmts[s.parent].node
                    if isinstance(owner, cst.ClassDef) and _fields_are_annotations(owner):
                        continue
                text = f"{code_of(small.target)} = {code_of(small.value)}"
                blocks.setdefault(s.parent, []).append(Edit("replace", s.id, text=text))
        out.extend(tuple(edits) for edits in blocks.values())
        return out
