"""syntax/placeholders.py: which calls cannot take their arguments, which names a
literal stands in for as an object, and what a program's text holds of both."""

from __future__ import annotations

import libcst as cst
import pytest

from shrinkgpu.syntax.placeholders import in_text, is_stand_in, takes_arguments, uses_instance


def _call(text: str, call: str):
    module = cst.parse_module(text)
    defined = {s.name.value: s for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}

    def resolve(name):
        return defined.get(name.value)

    node = cst.parse_expression(call)
    return takes_arguments(node, resolve(node.func), resolve)


CLASSES = """\
import torch.nn as nn
class Empty:
    pass
class Child(Empty):
    x = 1
class Takes:
    def __init__(self, model, opt=None, *, every=1):
        pass
class Sub(Takes):
    pass
class Module(nn.Module):
    pass
@dataclass
class Config:
    lr: float = 0.1
class Made:
    def __new__(cls, task):
        pass
def f(a, b=2):
    pass
def g(*args, **kwargs):
    pass
"""


@pytest.mark.parametrize("call, takes", [
    ("Empty()", True), ("Empty(0)", False), ("Child(0, 0)", False), ("Child(k=1)", False),
    ("Takes(m)", True), ("Takes(m, o, every=2)", True), ("Takes()", False), ("Takes(m, o, 3)", False),
    ("Takes(m, opt=o, model=m)", False), ("Takes(m, lr=1)", False), ("Sub(0, 0, 0)", False), ("Sub(m)", True),
    ("f(1)", True), ("f(1, b=3)", True), ("f(1, 2, 3)", False), ("f(c=1)", False), ("g(1, 2, x=3)", True),
    # not known from the source: a library base, a decorator, a ``__new__``, a spread
    ("Module(0)", None), ("Config(0)", None), ("Made(0)", None), ("Takes(*a)", None),
])
def test_a_call_by_name_takes_its_arguments_when_python_could_bind_them(call, takes):
    assert _call(CLASSES, call) is takes


def test_a_method_uses_its_instance_when_it_names_it_or_super():
    def method(body):
        return cst.parse_module(f"def __init__(self, n):\n    {body}\n").body[0]

    assert uses_instance(method("self.acc = Accuracy(n)"))
    assert uses_instance(method("super().__init__()"))
    assert not uses_instance(method("Accuracy(num_classes=n)"))


def test_a_stand_in_is_a_literal_no_object_is():
    assert all(is_stand_in(cst.parse_expression(t)) for t in ("0", "-1", "0.5", "None", "True"))
    assert not any(is_stand_in(cst.parse_expression(t)) for t in ("model", "'s'", "[]", "f()"))


def test_a_texts_stand_ins_are_literal_receivers_and_calls_that_cannot_take_their_arguments():
    text = (
        "import torch.nn as nn\n"
        "from torchmetrics import AUROC\n\n\n"
        "class Trainer:\n    pass\n\n\n"
        "def main():\n    self = 0\n    self.acc = AUROC(num_classes=6)\n\n\n"
        "obj = None\nobj.run()\n"
        "Trainer(\n    0,\n    0,\n    nn.CrossEntropyLoss(),\n    callbacks=[AUROC()],\n)\n"
    )
    assert in_text(text) == ["self = 0", "obj = None",
                             "Trainer(0, 0, nn.CrossEntropyLoss(), callbacks=[AUROC()])"]


def test_what_a_person_writes_is_no_stand_in():
    text = (
        "best = None\nfor m in models:\n    best = m\nbest.eval()\n"  # bound again: an object by then
        "n = 0\nx = torch.zeros(n) + n\n"  # a number used as a number
        "class Trainer:\n    def __init__(self, model):\n        self.model = model\n"
        "Trainer(model)\nTrainer()\n"  # takes its argument; one missing is no stand-in
        "def f(self):\n    self = 1\n    return self\n"
    )
    assert in_text(text) == []
    assert in_text("def broken(:\n") == []
