"""torch.compile under the probe: the probe's torch function mode (which records the
call that raised, the shapes, the arguments) is off the stack while a compiled callable
runs, and does nothing if Dynamo traces it anyway, so the
graph a compiler is handed is the one plain python hands it (Dynamo still records a
``h * 2`` seen through a mode as ``Tensor.mul``, not ``operator.mul``: the same aten op).
Real Dynamo and AOT autograd on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from shrinkgpu.worker import Isolation, Runner, ScriptSpec, Watch

GRAPH = textwrap.dedent("""\
    import json
    import torch
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs = []

    def record(gm, example_inputs):
        graphs.append([str(n.target) for n in gm.graph.nodes])
        return gm.forward

    def backend(gm, example_inputs):
        # the aten graph AOT autograd hands a compiler (what Inductor would lower)
        return aot_module_simplified(gm, example_inputs, fw_compiler=record)

    @torch.compile(backend=backend, fullgraph=True)
    def f(x, w):
        h = torch.nn.functional.linear(x, w).relu()
        return (h * 2).sum(dim=-1)

    f(torch.ones(3, 4), torch.ones(5, 4))
    raise SystemExit(json.dumps(graphs))
    """)


def test_the_graph_dynamo_compiles_under_the_probe_is_the_one_plain_python_compiles(tmp_path):
    script = tmp_path / "g.py"
    script.write_text(GRAPH)
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    expected = json.loads(plain.stderr.strip().splitlines()[-1])
    assert len(expected) == 1 and "aten.mm.default" in expected[0] and "aten.mul.Tensor" in expected[0]
    # every recorder of the first run on: shapes, raised arguments, loop counts
    watch = Watch(op_shapes=True, count_loops=True, keep_raised=str(tmp_path / "raised"))
    with Runner(ScriptSpec(script=script, cwd=tmp_path), isolation=Isolation.FRESH) as runner:
        runner.start()
        obs = runner.run({"g.py": GRAPH}, timeout=300, watch=watch)
    assert obs.signature is not None and obs.signature.type == "SystemExit", obs.stderr[-3000:]
    assert json.loads(obs.signature.message) == expected


SPECIALISED = textwrap.dedent("""\
    import torch


    @torch.compile(backend="eager")
    def f(x):
        out = 0
        for w in x:  # iterating specialises the batch size
            out = out + w.sum()
        return out


    x = torch.randn(4, 3)
    torch._dynamo.mark_dynamic(x, 0)
    f(x)
    """)


def test_a_shape_constraint_dynamo_finds_violated_is_violated_under_the_probe_too(tmp_path):
    # Traced through the probe's mode, Dynamo saw the loop otherwise and the script passed
    # (corpus-compile/notebook_mark_dynamic_loop "did not fail under shrinkgpu run").
    script = tmp_path / "md.py"
    script.write_text(SPECIALISED)
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "ConstraintViolationError: Constraints violated (L['x'].size()[0])!" in plain.stderr
    with Runner(ScriptSpec(script=script, cwd=tmp_path), isolation=Isolation.FRESH) as runner:
        runner.start()
        obs = runner.run({"md.py": SPECIALISED}, timeout=300, watch=Watch(op_shapes=True, count_loops=True))
    assert obs.signature is not None, obs.describe()
    assert obs.signature.type == "torch.fx.experimental.symbolic_shapes.ConstraintViolationError"
    assert obs.signature.headline.endswith("Constraints violated (L['x'].size()[0])! For more information, run with "
                                           "TORCH_LOGS=\"+dynamic\".")


NUMPY_INSIDE = textwrap.dedent("""\
    import numpy as np
    import torch


    @torch.compile(fullgraph=True, backend="eager")
    def featurize(u):
        z = 2 * u.numpy() - 1
        return torch.from_numpy(np.tanh(z)) + 1


    print(featurize(torch.rand(8, 3)).shape)
    torch.zeros(3)[torch.tensor([5])]
    """)


def test_compiled_code_runs_with_the_probes_mode_off_the_stack_as_dynamo_sees_it_in_a_plain_run(tmp_path):
    # Dynamo traces a torch function mode in force into the graph: through the probe's,
    # numpy code in a compiled function (``2 * u.numpy()``) became Tensor.mul on an
    # ndarray, and the first error was one of ours ("RuntimeError when making fake
    # tensor call") where the plain run compiles and goes on to its own error
    script = tmp_path / "n.py"
    script.write_text(NUMPY_INSIDE)
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert plain.stderr.strip().splitlines()[-1] == "IndexError: index 5 is out of bounds for dimension 0 with size 3"
    watch = Watch(op_shapes=True, count_loops=True, keep_raised=str(tmp_path / "raised"))
    with Runner(ScriptSpec(script=script, cwd=tmp_path), isolation=Isolation.FRESH) as runner:
        runner.start()
        obs = runner.run({"n.py": NUMPY_INSIDE}, timeout=300, watch=watch)
    assert obs.signature is not None and obs.signature.type == "IndexError", obs.stderr[-3000:]
    assert obs.signature.op is not None and obs.signature.op.name == "Tensor.__getitem__"  # the watch is back on


STANCE = textwrap.dedent("""\
    import torch

    @torch.compile(backend="eager", dynamic=False)
    def f(x):
        return x * 2

    f(torch.ones(2))
    torch.compiler.set_stance("fail_on_recompile")  # after the warm-up, as a training script does
    with torch.compiler.set_stance("default"):
        f(torch.ones(3))
    f(torch.ones(4))
    print("ran eagerly")
    """)


def test_a_run_with_its_compiled_code_eager_stays_eager_whatever_stance_the_script_sets(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(STANCE)
    with Runner(ScriptSpec(script=script, cwd=tmp_path), isolation=Isolation.FORK) as runner:
        runner.start(["torch"])
        compiled = runner.run({"s.py": STANCE}, timeout=300)
        eager = runner.run({"s.py": STANCE}, timeout=300, watch=Watch(eager=True))
    assert compiled.signature is not None and "fail_on_recompile" in compiled.signature.message, compiled.stderr[-2000:]
    assert eager.signature is None and eager.exit_code == 0, eager.stderr[-2000:]
    assert "ran eagerly" in eager.stdout
