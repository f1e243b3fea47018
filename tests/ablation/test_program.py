"""Changes of the whole minimal case for a GPU run (ablation/program.py), and a case
whose only passing change is the device: a hint, never the binary environment proven."""

from __future__ import annotations

import textwrap

import pytest

from shrinkgpu.ablation import (
    BACKEND,
    DEVICE,
    ENVIRONMENT,
    SYNC,
    UNDECIDED,
    extension_changes,
    kind_of,
    program_changes,
)

from .helpers import run_changes

# Fails "on a GPU" (any run that has not hidden the GPUs), the way an illegal memory access
# would, and passes when CUDA_VISIBLE_DEVICES is empty, the way a script that picks its
# device by torch.cuda.is_available() then runs on the CPU.
ONLY_ON_GPU = textwrap.dedent("""\
    import os
    import torch

    x = torch.ones(3)
    if os.environ.get("CUDA_VISIBLE_DEVICES") != "":
        torch.sqrt(x).view(-1)
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    print(x.sum())
    """)


def test_a_gpu_case_gets_cudnn_off_deterministic_algorithms_synchronous_launches_and_the_cpu():
    changes = program_changes({"a.py": ONLY_ON_GPU}, "a.py", on_gpu=True, launch_env={})
    assert [(c.name, c.category) for c in changes] == [
        ("cuDNN off", BACKEND), ("deterministic algorithms", BACKEND), ("synchronous launches", SYNC),
        ("on the CPU", DEVICE)]
    assert changes[0].files["a.py"] == ONLY_ON_GPU.replace("import torch\n",
                                                           "import torch\ntorch.backends.cudnn.enabled = False\n")
    assert changes[0].edit == "+ torch.backends.cudnn.enabled = False"
    assert changes[1].env == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    assert changes[3].env == {"CUDA_VISIBLE_DEVICES": ""} and changes[3].files["a.py"] == ONLY_ON_GPU
    # already synchronous: not again; a case on the CPU: none of them
    already = program_changes({"a.py": ONLY_ON_GPU}, "a.py", on_gpu=True, launch_env={"CUDA_LAUNCH_BLOCKING": "1"})
    assert "synchronous launches" not in [c.name for c in already]
    assert program_changes({"a.py": ONLY_ON_GPU}, "a.py", on_gpu=False, launch_env={}) == []


@pytest.mark.slow
def test_a_case_that_passes_only_on_the_cpu_is_a_hint_not_the_binary_environment(tmp_path):
    sig, found = run_changes(tmp_path, "a.py", ONLY_ON_GPU,
                             lambda: program_changes({"a.py": ONLY_ON_GPU}, "a.py", on_gpu=True, launch_env={}))
    assert sig.on_gpu
    assert {o.change: o.result for o in found} == {
        "cuDNN off": "same bug", "deterministic algorithms": "same bug", "synchronous launches": "same bug",
        "on the CPU": "passes"}
    kind = kind_of(found, on_gpu=True)
    assert kind.kind == UNDECIDED
    assert "only the change of device passes" in kind.reason and "not evidence" in kind.hint


# An extension's operator that refuses values torch's own operator of the same name takes.
EXTENSION = textwrap.dedent("""\
    import torch


    @torch.library.custom_op("shrinkgpu_test::relu", mutates_args=())
    def relu(x: torch.Tensor) -> torch.Tensor:
        if bool((x < -1).any()):
            raise RuntimeError("relu kernel: input below the supported range")
        return x.clamp(min=0)


    torch.ops.shrinkgpu_test.relu(torch.full((4,), -2.0))
    """)


def test_an_extension_operator_is_replaced_by_torchs_own_and_torchs_namespaces_are_not():
    (change,) = extension_changes({"a.py": EXTENSION})
    assert change.name == "torch.ops.aten.relu for torch.ops.shrinkgpu_test.relu"
    assert change.edit == ("- torch.ops.shrinkgpu_test.relu(torch.full((4,), -2.0))\n"
                           "+ torch.ops.aten.relu(torch.full((4,), -2.0))")
    assert extension_changes({"a.py": "import torch\ntorch.ops.aten.relu(x)\ntorch.ops.prims.add(x, x)\n"}) == []


@pytest.mark.slow
def test_an_extension_that_fails_where_torchs_operator_passes_is_the_binary_environment(tmp_path):
    sig, found = run_changes(tmp_path, "a.py", EXTENSION, lambda: extension_changes({"a.py": EXTENSION}))
    assert "supported range" in sig.message
    assert [o.result for o in found] == ["passes"]
    assert kind_of(found, on_gpu=False).kind == ENVIRONMENT


# A program with an optional fast path: the extension's kernel fails, the fallback does not.
OPTIONAL = textwrap.dedent('''\
    """Attention with an optional fused kernel."""
    from __future__ import annotations

    import torch

    try:
        import fastattn
    except ImportError:
        fastattn = None

    q = torch.randn(2, 4, 8)
    if fastattn is not None:
        out = fastattn.attention(q, q, q)
    else:
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    ''')
FASTATTN = "def attention(q, k, v):\n    raise RuntimeError('fastattn: head dimension 8 is not supported')\n"


def test_an_optional_module_is_disabled_before_the_first_statement():
    (change,) = extension_changes({"a.py": OPTIONAL, "fastattn.py": FASTATTN}, "a.py")
    assert change.name == "fastattn disabled"
    assert change.files["a.py"] == OPTIONAL.replace(
        "from __future__ import annotations\n",
        "from __future__ import annotations\nimport sys\nsys.modules['fastattn'] = None\n")
    assert change.files["fastattn.py"] == FASTATTN
    # an import outside a try, or in one that does not catch its failure: not optional
    assert extension_changes({"a.py": "import fastattn\ntry:\n    import json\nexcept KeyError:\n    pass\n"},
                             "a.py") == []


@pytest.mark.slow
def test_a_failure_that_the_programs_fallback_avoids_is_the_binary_environment(tmp_path):
    sig, found = run_changes(tmp_path, "a.py", OPTIONAL, lambda: extension_changes({"a.py": OPTIONAL}, "a.py"),
                             fastattn=FASTATTN)
    assert "fastattn" in sig.message
    assert [(o.change, o.result) for o in found] == [("fastattn disabled", "passes")]
    kind = kind_of(found, on_gpu=False)
    assert kind.kind == ENVIRONMENT and "fastattn disabled" in kind.reason


OFFSET = textwrap.dedent('''\
    import torch

    try:
        from fastidx import offset
    except ImportError:
        def offset():
            return 0

    table = torch.randn(3, 2)
    ids = torch.tensor([0, 1, 2]) + offset()
    rows = torch.nn.functional.embedding(ids, table)
    ''')


@pytest.mark.slow
def test_a_change_of_the_whole_case_that_passes_says_what_the_failing_call_returned(tmp_path):
    # the field guide's "outputs, not only exceptions": a pass that returned NaN is seen
    sig, found = run_changes(tmp_path, "a.py", OFFSET, lambda: extension_changes({"a.py": OFFSET}, "a.py"),
                             summarise=True, fastidx="def offset():\n    return 1\n")
    assert sig.op.name == "torch.nn.functional.embedding" and sig.call == 1
    assert [(o.change, o.result, o.output) for o in found] == [
        ("fastidx disabled", "passes", "float32[3, 2] all finite")]
