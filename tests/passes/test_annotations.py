"""strip-annotations (passes/annotations.py): signatures and annotated assignments of typed
code.
"""

from __future__ import annotations

from shrinkgpu.passes import StripAnnotations
from shrinkgpu.syntax import Edit

from .helpers import after, each, start

TYPED = """\
from typing import NamedTuple, Protocol
class Callback(Protocol):
    pass
class Cfg:
    n: int = 32
    lr: float = (
        1e-3
    )
    name: str
class Point(NamedTuple):
    x: int = 0
def fit(model: "Net", *rest: int, cbs: list[Callback] | None = None, **kw: dict) -> tuple[int, int]:
    z: int = model
    return z
def plain(a, b=1):
    return a
"""


def test_strip_annotations_one_unit_per_signature_and_per_block_of_annotated_assignments():
    cand = start(TYPED)
    signature, fields, local = each(StripAnnotations(), cand)
    assert 'def fit(model, *rest, cbs=None, **kw):\n    z: int = model\n' in signature
    assert "class Cfg:\n    n = 32\n    lr = (\n        1e-3\n    )\n    name: str\n" in fields
    assert "def fit(" in local and "    z = model\n" in local
    # a NamedTuple's annotations are its fields: never offered
    assert "class Point(NamedTuple):\n    x: int = 0\n" in after(StripAnnotations(), cand)


def test_strip_annotations_leaves_decorated_classes_to_strip_decorators_and_waits_for_a_rebase():
    cand = start("""\
        from dataclasses import dataclass
        @dataclass
        class Cfg:
            n: int = 32
        """)
    assert StripAnnotations().units(cand, 0) == []
    edited = start("def f(x: int):\n    return x\ny = 1\n")
    edited = edited.with_edits([Edit("delete", 2)])
    assert StripAnnotations().units(edited, 0) == []


def test_strip_annotations_unit_keys_name_the_annotation():
    cand = start("def f(x: int) -> str:\n    return x\n")
    [unit] = StripAnnotations().units(cand, 0)
    key = StripAnnotations().unit_key(cand, unit)
    assert key == ("strip-annotations", (("remove", ": int", ""), ("remove", ": str", "")))
