"""torch.compile's errors (issue 23, items 1 and 2): a family of their own, and a
signature that keeps what names the bug and leaves out what quotes the program.  Real
torch.compile on the CPU, in fresh interpreters."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import first_error
from shrinkgpu.families import Family, advice_for, compile_identity, compile_stage, is_compile_error
from shrinkgpu.signature import normalize_message

BRANCH = """\
import torch


def block(x):
    h = x * 2
    if h.mean() > 0:  # data-dependent branch
        return h + 1
    return h - 1


torch.compile(block, fullgraph=True)(torch.ones(4))
"""


@pytest.mark.slow
def test_a_graph_break_is_the_same_bug_whatever_the_quoted_line_says(tmp_path):
    sig = first_error(tmp_path, "a.py", BRANCH)
    assert sig.type == "torch._dynamo.exc.Unsupported"
    assert sig.family is Family.COMPILE
    assert sig.normalized == "Data-dependent branching [gb0170]"
    assert "from user code:" in sig.message  # the report keeps the whole text
    # the comment on the quoted line edited, the variable renamed: the same bug
    edited = re.sub(r"\bh\b", "hidden", BRANCH.replace("# data-dependent branch", "# why"))
    assert "hidden.mean() > 0:  # why" in edited
    assert sig.same_bug(first_error(tmp_path, "b.py", edited))
    # another kind of graph break is another bug
    other = BRANCH.replace("if h.mean() > 0:  # data-dependent branch", "if h.mean().item() > 0:")
    assert not sig.same_bug(first_error(tmp_path, "c.py", other))


def test_the_identity_of_a_compile_message_is_its_head_and_its_graph_break_id():
    message = (
        "Data-dependent branching\n"
        "  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`).\n\n"
        "      The branch condition involves a tensor computed as follows:\n"
        '        # File "/home/ana/job/train.py", line 41, in forward, code: if h.mean() > 0:\n'
        "        gt = gt(mean, 0)\n\n"
        "  Hint: Use `torch.cond` to express dynamic control flow.\n\n"
        "  Developer debug context: attempted to jump with TensorVariable()\n\n"
        " For more details about this graph break, please visit: "
        "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0170.html\n\n"
        "from user code:\n"
        '   File "/home/ana/job/train.py", line 41, in forward\n'
        "    if h.mean() > 0:\n\n"
        "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace"
    )
    assert compile_identity(message) == "Data-dependent branching [gb0170]"
    assert normalize_message(message) == "Data-dependent branching [gb0170]"
    backend = (
        "backend='inductor' raised:\n"
        "RuntimeError: Failed to find C compiler. Please specify via CC environment variable.\n\n"
        "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug)"
    )
    assert normalize_message(backend) == (
        "backend='inductor' raised:\nRuntimeError: Failed to find C compiler. Please specify via CC environment "
        "variable."
    )
    # a message without torch.compile's lines is left as it was
    assert normalize_message("index 3 is out of bounds for dimension 0 with size 3") == (
        "index <n> is out of bounds for dimension <n> with size <n>"
    )


def test_the_compile_family_says_which_stage_to_check_first():
    advice = advice_for(Family.COMPILE)
    assert "backend='eager'" in advice.first_check and "aot_eager" in advice.first_check
    assert "switching torch.compile off" in advice.avoid


@pytest.mark.parametrize(
    "type_name, message, stage",
    [
        ("torch._dynamo.exc.Unsupported", "Data-dependent branching\n\nfrom user code:\n  File \"a.py\"",
         "Dynamo tracing"),
        ("torch._dynamo.exc.TorchRuntimeError", "RuntimeError when making fake tensor call", "Dynamo tracing"),
        ("torch._dynamo.exc.Unsupported", "Dynamo recompile limit exceeded", "guards and recompilation"),
        ("RuntimeError", "Detected recompile when torch.compile stance is 'fail_on_recompile'. filename: 'a.py'",
         "guards and recompilation"),
        ("RuntimeError", "torch.compile with aot_autograd does not currently support double backward", "AOT autograd"),
        ("torch._inductor.exc.InductorError", "LoweringException: NoValidChoicesError: No choices to select.",
         "Inductor (lowering and code generation)"),
        ("torch._dynamo.exc.BackendCompilerFailed", "backend='my_backend' raised:\nValueError: no",
         "the backend (my_backend)"),
        ("IndexError", "index out of range in self", None),
        # a RuntimeError that merely mentions compilation is not torch.compile's
        ("RuntimeError", "expected the model to be compiled first", None),
    ],
)
def test_the_stage_of_torch_compile_that_raised_is_named_from_the_class_and_message(type_name, message, stage):
    assert compile_stage(type_name, message) == stage
    assert is_compile_error(type_name, message) is (stage is not None)


BACKWARD_TWICE = """\
import torch

{decorator}
def f(x):
    return (x.sin() * x).sum()


y = f(torch.randn(4, requires_grad=True))
y.backward()
y.backward()
"""

DONATED = """\
import torch

w = torch.randn(16, 16, requires_grad=True)
f = torch.compile(lambda x: torch.tanh(x @ w).sin())
f(torch.randn(2, 16)).sum().backward()
torch.autograd.grad(f(torch.randn(2, 16)).sum(), w, retain_graph=True)
"""


@pytest.mark.slow
def test_an_error_raised_in_a_compiled_graphs_backward_is_a_compile_error_and_the_same_text_eagerly_is_not(tmp_path):
    # AOT autograd's runtime raises both; the same "second time" raised eagerly comes
    # through the autograd engine.  Classes and messages alone cannot tell them apart.
    compiled = first_error(tmp_path, "a.py", BACKWARD_TWICE.format(decorator='@torch.compile(backend="aot_eager")'))
    eager = first_error(tmp_path, "b.py", BACKWARD_TWICE.format(decorator=""))
    assert compiled.type == eager.type == "RuntimeError"
    assert compiled.normalized == eager.normalized
    assert compiled.raised_by.startswith("torch._functorch._aot_autograd.")
    assert compiled.family is Family.COMPILE
    assert (compile_stage(compiled.type, compiled.message, compiled.raised_by)
            == "AOT autograd (running the compiled graph)")
    assert eager.raised_by == "torch.autograd.graph"
    assert eager.family is not Family.COMPILE
    assert compile_stage(eager.type, eager.message, eager.raised_by) is None
    donated = first_error(tmp_path, "c.py", DONATED)
    assert donated.message.startswith("This backward function was compiled with non-empty donated buffers")
    assert donated.family is Family.COMPILE


def test_an_inductor_lowering_error_is_named_by_its_head_and_target_not_by_the_buffers_it_dumps():
    # Recorded from evaluation/cases/cpu_bench_autotune_triton (torch 2.13, CPU): the dump of
    # the node's arguments names the graph's buffers and quotes stack traces, and one run
    # of the same script printed it otherwise than another.
    message = (Path(__file__).resolve().parents[1] / "data" / "inductor_lowering_message.txt").read_text()
    assert "InputBuffer(name='arg0_1'" in message and "stack_traces" in message
    assert normalize_message(message) == (
        "LoweringException: NoValidChoicesError: No choices to select. Provided reason: No choices exist for backend. "
        "please consider adding ATEN into max_autotune_gemm_backends config (defined in torch<path>) to allow at "
        "least one choice.\ntarget: aten.mm.default"
    )
    assert compile_stage("torch._inductor.exc.InductorError", message) == "Inductor (lowering and code generation)"
    dumped_otherwise = message.replace("arg0_1", "primals_3").replace("origins=OrderedSet([view])",
                                                                      "origins=OrderedSet([])")
    assert normalize_message(dumped_otherwise) == normalize_message(message)


@pytest.mark.slow
def test_a_compile_error_is_the_same_bug_whatever_line_calls_the_compiled_callable(tmp_path):
    sig = first_error(tmp_path, "a.py", BRANCH)
    # the compiled call wrapped in a loss, on a line of another shape
    wrapped = BRANCH.replace("torch.compile(block, fullgraph=True)(torch.ones(4))",
                             "f = torch.compile(block, fullgraph=True)\n"
                             "loss = torch.nn.functional.mse_loss(f(torch.ones(4)), torch.zeros(4))")
    assert "loss = torch.nn.functional.mse_loss" in wrapped
    other = first_error(tmp_path, "b.py", wrapped)
    assert other.frame.source != sig.frame.source
    assert sig.same_bug(other)


RECOMPILES = """\
import torch

torch._dynamo.config.fail_on_recompile_limit_hit = True
torch._dynamo.config.recompile_limit = 2


@torch.compile(backend="eager")
def pool(vecs):
    return torch.stack(vecs).mean(0)


for n in range(1, 6):
    pool([torch.ones(3)] * n)
"""


def test_the_recompile_limit_is_the_root_dynamo_raised_not_the_hard_failure_it_reraised(tmp_path):
    # Python shows ``Unsupported: Dynamo recompile limit exceeded`` as the root and the
    # ``FailOnRecompileLimitHit`` raised from it at torch.compile's wrapper above it
    sig = first_error(tmp_path, "a.py", RECOMPILES)
    assert sig.type == "torch._dynamo.exc.Unsupported", sig.headline
    assert "recompile limit" in sig.message and sig.family is Family.COMPILE


FALLBACK = """\
import torch


@torch.compile(fullgraph=True, backend="eager")
def merge(x):
    y = x.transpose(0, 1)
    try:
        return y.view(-1)
    except RuntimeError:  # eager falls back to a copy; Dynamo's fake tensors raise another error
        return y.reshape(-1)


print(merge(torch.randn(4, 3)).shape)
"""


@pytest.mark.slow
def test_a_compile_failure_is_not_reduced_to_a_mistake_that_fails_without_the_compiler_too(tmp_path):
    # ``try: view except: reshape`` fails under Dynamo and passes eagerly; without the
    # fallback, ``y.view(-1)`` still fails under Dynamo with the same message, but it
    # fails eagerly too: the program's mistake, not the compiler's bug
    from shrinkgpu.reducer import ReduceConfig, reduce, run_once

    (tmp_path / "m.py").write_text(FALLBACK)
    # Dynamo's refusal is one release's behaviour, not a constant: torch 2.14 compiles the
    # try/except (the corpus case versions_compile_view_fallback has the boundary, found
    # by `shrinkgpu versions`). Where this torch compiles it, there is no failure to keep.
    obs, _ = run_once(ReduceConfig(script=tmp_path / "m.py", keep_error="."))
    if obs.signature is None or "when making fake tensor call" not in obs.signature.message:
        import torch

        pytest.skip(f"torch {torch.__version__} compiles a try/except around a failing view: {obs.describe()}")
    result = reduce(ReduceConfig(script=tmp_path / "m.py", cwd=tmp_path, keep_error="when making fake tensor call",
                                 verify_runs=1, extract=False, ablate=False))
    text = result.output.read_text()
    assert "try:" in text and "except RuntimeError:" in text, text
    # and what was kept passes without the compiler, as the original does
    import subprocess
    import sys

    eager = tmp_path / "eager.py"
    eager.write_text(text.replace('@torch.compile(fullgraph=True, backend="eager")\n', ""))
    assert "torch.compile" not in eager.read_text()
    assert subprocess.run([sys.executable, str(eager)], cwd=tmp_path, capture_output=True).returncode == 0
    assert any("run eagerly the original passes" in n for n in result.notes), result.notes
    assert result.oracle.other_errors.get("fails without compiling too", 0) >= 1
