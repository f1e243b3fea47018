"""The compiled code alone (issue 23): a torch.compile failure extracted as the compiled
function or module, what it reads, the options and settings it was compiled with, and
the inputs it was called with; checked in a fresh interpreter.  Real processes, real
torch.compile on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from features.test_compile_errors import RECOMPILES
from shrinkgpu.extract import render

EXE = [sys.executable, "-m", "shrinkgpu"]

pytestmark = pytest.mark.slow


def extract(tmp_path: Path, source: str):
    (tmp_path / "s.py").write_text(textwrap.dedent(source))
    return subprocess.run([*EXE, "extract", "s.py", "--json"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)


def test_a_compiled_function_is_written_with_what_it_reads_and_the_options_it_was_compiled_with(tmp_path):
    done = extract(tmp_path, """\
        import math
        import torch
        import torch.nn.functional as F

        SCALE = 0.5


        def norm(h):
            return h / math.sqrt(h.shape[-1])


        @torch.compile(fullgraph=True)
        def gate(x, w):
            # gated residual
            h = norm(F.relu(x @ w)) * SCALE
            if h.mean() > 0:
                return x + h
            return x


        def main():
            torch.manual_seed(0)
            w = torch.randn(8, 8)
            for step in range(3):
                print(step, gate(torch.randn(4, 8), w).sum().item())


        main()
        """)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["level"] == "metadata"
    assert (tmp_path / "s.extracted.py").read_text() == textwrap.dedent("""\
        import math
        import torch
        import torch.nn.functional as F

        SCALE = 0.5


        def norm(h):
            return h / math.sqrt(h.shape[-1])


        def gate(x, w):
            # gated residual
            h = norm(F.relu(x @ w)) * SCALE
            if h.mean() > 0:
                return x + h
            return x


        x0 = torch.randn(4, 8)
        x1 = torch.randn(8, 8)
        torch.compile(gate, fullgraph=True)(x0, x1)
        """)
    plain = subprocess.run([sys.executable, "s.extracted.py"], cwd=tmp_path, capture_output=True, text=True)
    assert "torch._dynamo.exc.Unsupported: Data-dependent branching" in plain.stderr


def test_the_settings_in_force_and_the_decorators_under_torch_compile_are_kept(tmp_path):
    # an alias of torch.compile with its options bound, over torch.no_grad
    done = extract(tmp_path, """\
        import functools
        import torch

        torch._dynamo.config.capture_scalar_outputs = True
        _compile = functools.partial(torch.compile, backend="eager", fullgraph=True)


        @_compile
        @torch.no_grad()
        def score(x):
            s = x.sum().item()
            if s > 0:
                return x * 2
            return x


        print(score(torch.randn(5)))
        """)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "s.extracted.py").read_text() == textwrap.dedent("""\
        import torch

        torch._dynamo.config.capture_scalar_outputs = True


        @torch.no_grad()
        def score(x):
            s = x.sum().item()
            if s > 0:
                return x * 2
            return x


        x0 = torch.randn(5)
        torch.compile(score, backend='eager', fullgraph=True)(x0)
        """)


def test_a_compiled_module_is_built_as_it_was_built_with_its_dynamic_marks(tmp_path):
    done = extract(tmp_path, """\
        from dataclasses import dataclass

        import torch
        from torch import nn


        @dataclass
        class Cfg:
            width: int = 4
            depth: int = 2


        class Block(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.fc = nn.Linear(width, width, bias=False)

            def forward(self, x):
                return self.fc(x)


        class Net(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                self.blocks = nn.ModuleList(Block(cfg.width) for _ in range(cfg.depth))

            def forward(self, x):
                return torch.stack([b(row) for b in self.blocks for row in x])


        model = Net(Cfg(width=3)).eval()
        fast = torch.compile(model, backend="eager")
        for n in (2, 5):
            x = torch.randn(n, 3)
            torch._dynamo.mark_dynamic(x, 0)
            print(fast(x).shape)
        """)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "s.extracted.py").read_text()
    assert text.endswith(textwrap.dedent("""\
        x0 = torch.randn(2, 3)
        torch._dynamo.mark_dynamic(x0, 0)
        model = Net(Cfg(width=3)).eval()
        torch.compile(model, backend='eager')(x0)
        """)), text
    assert "@dataclass\nclass Cfg:" in text and "class Block(nn.Module):" in text
    assert text.index("class Block") < text.index("class Net")
    plain = subprocess.run([sys.executable, "s.extracted.py"], cwd=tmp_path, capture_output=True, text=True)
    assert "ConstraintViolationError" in plain.stderr


def test_a_compiled_function_that_reads_what_has_no_source_form_says_what(tmp_path):
    done = extract(tmp_path, """\
        import random
        import torch

        rng = random.Random(0)


        @torch.compile(fullgraph=True)
        def jitter(x):
            if x.sum() > rng.random():
                return x
            return -x


        jitter(torch.randn(3))
        """)
    assert done.returncode != 0
    assert "the compiled function reads `rng`, a Random, which has no source form" in done.stderr


def test_the_exact_level_loads_a_compiled_modules_weights_from_a_state_dict():
    record = {"op": "torch.compile(model)", "args": [{"t": "args[0]"}], "kwargs": {}, "nondefault": [],
              "meta": {"args[0]": {"dtype": "float32", "shape": [2, 3], "stride": [3, 1], "offset": 0,
                                   "device": "cpu", "requires_grad": False, "shares_with": None}},
              "preamble": ["import torch", "", ""], "module": {"name": "model", "build": "torch.nn.Linear(3, 1)",
                                                             "state": True}}
    text, loads, _ = render(record, "exact", "s.extracted.pt")
    assert loads and text.endswith(
        "data = torch.load('s.extracted.pt')\n"
        "x0 = data['args[0]']\n"
        "model = torch.nn.Linear(3, 1)\n"
        "model.load_state_dict(data['module'])\n"
        "torch.compile(model)(x0)\n")
    text, loads, _ = render(record, "metadata", "s.extracted.pt")
    assert not loads and "load_state_dict" not in text


def test_the_stance_at_the_call_and_an_options_dict_are_written_and_a_0d_input_is_random(tmp_path):
    # the stance set once warmed up decides the first compile of the function alone too
    done = extract(tmp_path, """\
        import torch


        @torch.compile(backend="eager")
        def warm(x):
            return x + 1


        warm(torch.randn(2))
        torch.compiler.set_stance("fail_on_recompile")


        def scale(x, s):
            return x * s


        fast = torch.compile(scale, options={"trace.enabled": False})
        print(fast(torch.randn(3), torch.tensor(2.0)))
        """)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "s.extracted.py").read_text() == textwrap.dedent("""\
        import torch

        torch.compiler.set_stance('fail_on_recompile')


        def scale(x, s):
            return x * s


        x0 = torch.randn(3)
        x1 = torch.randn(())
        torch.compile(scale, options={'trace.enabled': False})(x0, x1)
        """)


def test_a_recompilation_is_not_extracted_and_says_it_needs_the_calls_before_it(tmp_path):
    done = extract(tmp_path, RECOMPILES)
    assert done.returncode != 0
    assert "the compiled code alone did not fail the same way" in done.stderr
    assert "the bug needs the calls before it (a recompilation" in done.stderr
