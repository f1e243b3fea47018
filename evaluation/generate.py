"""Generated failing scripts for the scaling benchmark.

``generate(n, seed)`` returns a script of exactly ``n`` Python statements (every
``ast.stmt`` node, nested ones included) that looks like a long, flat experiment
script: configuration assignments, small helper functions and their calls, loops,
occasional prints and cheap CPU tensor ops, with data dependencies between them (each
block reads a few earlier variables, so deleting a definition breaks later code).

One failing call is buried about two thirds of the way down, inside a helper called
from a loop under a condition: ``torch.gather`` with an index tensor whose values were
computed from configuration defined near the top.  It raises
``RuntimeError: index 5 is out of bounds for dimension 1 with size 3``; everything
after it never runs.  The whole script runs in well under a second.
"""

from __future__ import annotations

import ast
import random

KEEP_ERROR = r"RuntimeError: index \d+ is out of bounds for dimension \d+ with size \d+"
OPERATOR = "torch.gather"

_HEADER = '''"""Generated benchmark script ({n} statements): one buried failing torch call."""
import math
import torch

torch.manual_seed(0)
NUM_GROUPS = 3
OFFSET = 2
'''

_BUG_DEF = '''def gather_scores(scores, labels, shift):
    index = (labels + shift).clamp(min=0).unsqueeze(1)
    picked = torch.gather(scores, 1, index)
    return picked.mean()
'''

_BUG_CALL = '''for epoch in range(2):
    if epoch == 1:
        labels = torch.full((4,), NUM_GROUPS, dtype=torch.long)
        loss = gather_scores(torch.randn(4, NUM_GROUPS), labels, OFFSET)
'''


def _count(src: str) -> int:
    return sum(isinstance(node, ast.stmt) for node in ast.walk(ast.parse(src)))


class _Gen:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.nums: list[str] = ["NUM_GROUPS", "OFFSET"]  # plain numbers
        self.tensors: list[str] = []  # float tensors of shape (4, 4)
        self.helpers: list[str] = []
        self.i = 0

    def _num(self) -> str:
        # Mostly recent values, sometimes old ones: a realistic dependency web.
        if self.rng.random() < 0.7:
            return self.rng.choice(self.nums[-8:])
        return self.rng.choice(self.nums)

    def _tensor(self) -> str | None:
        if not self.tensors:
            return None
        return self.rng.choice(self.tensors[-6:]) if self.rng.random() < 0.7 else self.rng.choice(self.tensors)

    def block(self) -> str:
        self.i += 1
        i = self.i
        kind = self.rng.choices(
            ["assign", "config", "tensor", "tensor_op", "helper", "call", "loop", "cond", "print"],
            weights=[18, 6, 10, 14, 6, 10, 8, 6, 2],
        )[0]
        if kind == "assign":
            a, b = self._num(), self._num()
            op = self.rng.choice(["+", "-", "*"])
            name = f"value_{i}"
            self.nums.append(name)
            return f"{name} = ({a} {op} {b}) % 97\n"
        if kind == "config":
            name = f"cfg_{i}"
            self.nums.append(f'{name}["width"]')
            return (f'{name} = {{"width": {self.rng.randint(2, 64)}, "lr": {self.rng.random():.3f}, '
                    f'"name": "block{i}"}}\n')
        if kind == "tensor":
            name = f"feat_{i}"
            self.tensors.append(name)
            return f"{name} = torch.randn(4, 4) * {self._num()}\n"
        if kind == "tensor_op":
            t = self._tensor()
            if t is None:
                return self.block()
            name = f"feat_{i}"
            self.tensors.append(name)
            op = self.rng.choice(
                [f"torch.relu({t} @ {t}.T)", f"({t} + 1).softmax(dim=1)", f"{t}.clamp(-1, 1) * 0.5",
                 f"torch.tanh({t}) + {t}.mean()"]
            )
            return f"{name} = {op}\n"
        if kind == "helper":
            name = f"helper_{i}"
            self.helpers.append(name)
            return (
                f"def {name}(x, k):\n"
                f"    y = x * k + {self.rng.randint(1, 9)}\n"
                f"    return y % 89\n"
            )
        if kind == "call":
            if not self.helpers:
                return self.block()
            name = f"result_{i}"
            line = f"{name} = {self.rng.choice(self.helpers[-5:])}({self._num()}, {self._num()})\n"
            self.nums.append(name)
            return line
        if kind == "loop":
            name = f"total_{i}"
            text = (
                f"{name} = 0\n"
                f"for step in range({self.rng.randint(2, 4)}):\n"
                f"    {name} = ({name} + step * {self._num()}) % 101\n"
            )
            self.nums.append(name)
            return text
        if kind == "cond":
            name = f"flag_{i}"
            text = (
                f"if {self._num()} > 40:\n"
                f"    {name} = 1\n"
                f"else:\n"
                f"    {name} = 0\n"
            )
            self.nums.append(name)
            return text
        return f'print("checkpoint {i}", {self._num()})\n'


def generate(n: int, seed: int = 0) -> str:
    """A script of exactly ``n`` statements with one buried failing call."""
    header = _HEADER.format(n=n)
    fixed = _count(header) + _count(_BUG_DEF) + _count(_BUG_CALL)
    if n < fixed + 2:
        raise ValueError(f"n must be at least {fixed + 2}")
    budget = n - fixed
    before = (budget * 2) // 3
    gen = _Gen(seed)
    parts: list[str] = []

    def fill(target: int, out: list[str]) -> None:
        have = 0
        while have < target:
            blk = gen.block()
            k = _count(blk)
            if have + k > target:
                # Top up with one-statement blocks.
                while have < target:
                    name = f"pad_{gen.i}"
                    gen.i += 1
                    out.append(f"{name} = ({gen._num()} + 1) % 97\n")
                    gen.nums.append(name)
                    have += 1
                return
            out.append(blk)
            have += k

    first: list[str] = []
    fill(before // 2, first)
    middle: list[str] = []
    fill(before - before // 2, middle)
    after: list[str] = []
    fill(budget - before, after)
    parts = [header, *first, "\n", _BUG_DEF, "\n", *middle, _BUG_CALL, *after]
    src = "".join(parts)
    assert _count(src) == n, (_count(src), n)
    return src


if __name__ == "__main__":
    import sys

    sys.stdout.write(generate(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
