"""probe/loops.py: the iteration each loop around the failure was in, where the run's
time went by loop, and the counting calls compiled into the user's files.
"""

from __future__ import annotations

import textwrap

from shrinkgpu.worker import Watch
from worker.helpers import run
from worker.probe.helpers import watched

LOOPED = """\
import torch

def lookup(table, i):
    return table[i]

def run(rows):
    for epoch in range(3):
        for step, row in enumerate(
            rows
        ):
            if epoch == 1 and step == 4:
                lookup(row, 9)

rows = [torch.zeros(3)] * 6
for k in range(2):
    pass
run(rows)
"""


def test_count_loops_gives_the_iteration_of_each_loop_around_the_failure(fork_runner):
    obs = run(fork_runner, LOOPED, count_loops=True)
    assert obs.signature.type == "IndexError"
    # epoch 1, step 4 (a header over three lines counts once per iteration); the
    # finished ``for k`` loop is not around the failure
    assert obs.loops == (("s.py", 7, 1), ("s.py", 8, 4))
    # off by default: candidates pay nothing for it
    assert run(fork_runner, LOOPED).loops == ()


def test_count_loops_names_the_call_of_the_function_the_failure_came_in(fork_runner):
    # validation during training calls ``evaluate`` twice; the test set, the third time, fails
    text = ("def evaluate(rows):\n    for r in rows:\n        [0, 1][r]\n\n"
            "evaluate([0]); evaluate([1])\nfor epoch in range(2):\n    pass\nevaluate([0, 5])\n")
    obs = run(fork_runner, text, count_loops=True)
    assert obs.signature.type == "IndexError"
    assert obs.loops == (("s.py", 2, 1),)
    assert obs.loop_calls == (("s.py", 2, 3),)


def test_count_loops_sees_loops_of_a_python_error_unwound_through_frames(fork_runner):
    text = "def f(i):\n    return [1][i]\n\nfor i in range(5):\n    if i == 3:\n        f(i)\n"
    obs = run(fork_runner, text, count_loops=True)
    assert obs.signature.type == "IndexError" and obs.signature.op is None
    assert obs.loops == (("s.py", 4, 3),)


HOT = """\
import time
import torch
for step in range(40):          # where the time goes
    time.sleep(0.01)
for i in range(3):
    pass
torch.nn.functional.embedding(torch.tensor([5]), torch.randn(4, 2))
"""


def test_the_first_run_samples_where_the_time_goes_by_loop(runner):
    obs = watched(runner, HOT, count_loops=True)
    shares = {line: share for file, line, share in obs.loop_time if file == "s.py"}
    assert shares.get(3, 0) > 0.5
    assert shares.get(5, 0) < 0.1
    # only runs that count loops pay for the sampler
    assert watched(runner, HOT).loop_time == ()


def test_loops_are_counted_in_the_users_modules_with_no_tracer_on(runner):
    files = {
        "s.py": "import sys\nimport helper\ntracer = sys.gettrace()\nfor epoch in range(4):\n"
                "    helper.walk(epoch, tracer)\n",
        "helper.py": '"""Walks."""\nfrom __future__ import annotations\n\n\ndef walk(epoch, tracer):\n'
                     '    """Walks once."""\n    for i in range(3):\n        if epoch == 2 and i == 1:\n'
                     '            raise RuntimeError(f"{tracer} {__doc__} {walk.__doc__}")\n',
    }
    obs = runner.run(files, timeout=60, watch=Watch(count_loops=True))
    # no tracer slows the run; docstrings and the __future__ import are where they were
    assert obs.signature.message == "None Walks. Walks once."
    assert obs.loops == (("helper.py", 7, 1), ("s.py", 4, 2))
    assert obs.loop_calls == (("helper.py", 7, 3), ("s.py", 4, 1))  # walk's third call


def test_a_loop_torch_compile_traces_is_counted_without_a_graph_break(runner, tmp_path):
    # Dynamo traces the counting calls of ``forward``'s loop; they must not break a
    # ``fullgraph`` compile (that would be another first error than the user's)
    obs = watched(runner, """\
        import torch
        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))
            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x
        model = torch.compile(Block(), fullgraph=True, backend="eager")
        for step in range(3):
            y = model(torch.ones(2, 4))
            if step == 2:
                y.view(3)
        """, count_loops=True, cut=str(tmp_path / "call.pt"))  # (the first run's: arguments kept too)
    assert (obs.signature.type, obs.signature.op.name) == ("RuntimeError", "Tensor.view")
    assert obs.loops == (("s.py", 11, 2),)


def test_the_counting_calls_sit_at_each_loops_body_and_each_scope_that_holds_one():
    # (never in a function numba compiles from its bytecode: it could not type the call)
    import ast

    from shrinkgpu.worker.probe.loops import ENTER, START, TICK, _Instrument

    tree = _Instrument().visit(ast.parse(textwrap.dedent('''\
        """doc"""
        from __future__ import annotations
        def plain(x):
            return x
        class C:
            for k in range(2):
                pass
            def f(self, rows):
                """f's doc"""
                for r in rows:
                    for c in r:
                        pass
                return [c for c in rows]
        @numba.njit(cache=True)
        def compiled_from_its_bytecode(n):
            for i in range(n):
                pass
        ''')))
    assert ast.unparse(tree) == textwrap.dedent(f'''\
        """doc"""
        from __future__ import annotations

        def plain(x):
            return x

        class C:
            {ENTER}()
            {START}(6)
            for k in range(2):
                {TICK}(6)
                pass

            def f(self, rows):
                """f's doc"""
                {ENTER}()
                {START}(10)
                for r in rows:
                    {TICK}(10)
                    {START}(11)
                    for c in r:
                        {TICK}(11)
                        pass
                return [c for c in rows]

        @numba.njit(cache=True)
        def compiled_from_its_bytecode(n):
            for i in range(n):
                pass''')


def test_with_arguments_each_function_keeps_what_it_was_called_with_after_its_docstring():
    import ast

    from shrinkgpu.worker.probe.loops import (
        ARGUMENTS,
        ARGUMENTS_LOCAL,
        LoopCounter,
        _Instrument,
        entry_arguments,
        instrumented,
    )

    source = textwrap.dedent('''\
        def step(self, batch, /, scale=2, *rest, labels=None, **options):
            """doc"""
            batch = batch.copy()
            return batch
        def none():
            return 1
        def listed(a, b):
            return dict(locals())
        ''')
    tree = _Instrument(arguments=True).visit(ast.parse(source))
    # (a function that lists its locals is left as written: ours would be among them)
    assert "def listed(a, b):\n    return dict(locals())" in ast.unparse(tree)
    assert ast.unparse(tree).splitlines()[:3] == [
        "def step(self, batch, /, scale=2, *rest, labels=None, **options):",
        '    """doc"""',
        f"    {ARGUMENTS_LOCAL} = {ARGUMENTS}(('self', 'batch', 'scale', 'labels', 'rest', 'options'), "
        "self, batch, scale, labels, rest, options)",
    ]
    assert "def none():\n    return 1" in ast.unparse(tree)
    # what it keeps: a dict emptied in place and a rebound name as they came in
    import sys

    code, _ = instrumented(textwrap.dedent('''\
        import sys
        def emptied(inputs, x):
            inputs.pop("labels")
            x = x + 1
            return sys._getframe()
        '''), "<test>", arguments=True)
    scope = {ARGUMENTS: LoopCounter((), arguments=True).keep_arguments}
    exec(code, scope)
    frame = scope["emptied"]({"labels": 3, "ids": 1}, 1)
    assert entry_arguments(frame) == {"inputs": {"labels": 3, "ids": 1}, "x": 1}
    assert entry_arguments(sys._getframe()) == {}
