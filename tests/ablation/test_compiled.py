"""One change at a time (ablation/compiled.py): the compile settings a torch.compile failure is
compared under, their exact texts, and what the outcomes say; then a real reduction of a
graph break under fullgraph, compared in fresh interpreters."""

from __future__ import annotations

import textwrap

import pytest

from shrinkgpu.ablation import Change, Outcome, compile_backend, compile_changes, outcome_of, summary
from shrinkgpu.reducer import ReduceConfig, reduce
from shrinkgpu.signature import Signature, Target
from shrinkgpu.worker import Observation

CASE = textwrap.dedent("""\
    import torch


    @torch.compile(fullgraph=True)
    def f(h):
        if h.mean() > 0:
            h = h + 1
        return h


    f(torch.randn(4))
    """)


def test_each_compile_setting_is_changed_alone_in_every_compile_call():
    changes = {c.name: c.files["a.py"] for c in compile_changes({"a.py": CASE})}
    assert list(changes) == ["torch.compile off", 'backend="eager"', 'backend="aot_eager"', "fullgraph=False",
                             "dynamic=False", "dynamic=True"]
    assert changes["torch.compile off"] == CASE.replace("@torch.compile(fullgraph=True)\n", "")
    assert changes['backend="eager"'] == CASE.replace("(fullgraph=True)", '(fullgraph=True, backend="eager")')
    assert changes["fullgraph=False"] == CASE.replace("fullgraph=True", "fullgraph=False")
    assert changes["dynamic=True"] == CASE.replace("(fullgraph=True)", "(fullgraph=True, dynamic=True)")
    assert compile_backend({"a.py": CASE}) == "inductor"
    # a call form, a partial of torch.compile and a bare decorator: the keyword goes to each
    other = ('import functools, torch\nc = functools.partial(torch.compile, backend="aot_eager")\n'
             "@torch.compile\ndef k(x):\n    return x\ng = torch.compile(k, dynamic=True)\n")
    named = {c.name: c.files["m.py"] for c in compile_changes({"m.py": other, "data.txt": "torch.compile"})}
    assert "torch.compile off" not in named  # a partial cannot be switched off by a rewrite
    assert named['backend="inductor"'] == (
        'import functools, torch\nc = functools.partial(torch.compile, backend="inductor")\n'
        '@torch.compile(backend="inductor")\ndef k(x):\n    return x\n'
        'g = torch.compile(k, dynamic=True, backend="inductor")\n'
    )
    assert compile_changes({"a.py": "import torch\nprint(torch.ones(1))\n"}) == []


def _sig(type_name: str, message: str) -> Signature:
    return Signature(type=type_name, message=message, normalized=message, op=None, frame=None)


def test_an_outcome_is_the_same_bug_a_pass_or_another_error_and_the_summary_names_the_stage():
    target = Target(_sig("torch._dynamo.exc.Unsupported", "Data-dependent branching"))
    change = Change('backend="eager"', "Dynamo alone", {})
    ran = Observation(1, None, False, 1.0, "exception",
                      _sig("torch._dynamo.exc.Unsupported", "Data-dependent branching"))
    assert outcome_of(change, ran, target).result == "same bug"
    assert outcome_of(change, Observation(0, None, False, 1.0, "ok", None), target).result == "passes"
    other = outcome_of(change, Observation(1, None, False, 1.0, "exception", _sig("ValueError", "no")), target)
    assert (other.result, other.error) == ("fails differently", "ValueError: no")

    def said(eager=None, aot_eager=None, backend="inductor"):
        found = [Outcome(f'backend="{name}"', "", value)
                 for name, value in (("eager", eager), ("aot_eager", aot_eager)) if value is not None]
        return summary(found, backend)

    assert "Dynamo" in said(eager="same bug")
    assert "AOT autograd" in said(eager="passes", aot_eager="same bug")
    assert "the compiler (inductor)" in said(eager="passes", aot_eager="passes")
    # the case's own backend fails by definition: aot_eager's case passing with eager is AOT autograd's
    assert "AOT autograd" in said(eager="passes", backend="aot_eager")
    assert said() is None


@pytest.mark.slow
def test_a_reduced_graph_break_is_compared_across_backends_in_fresh_interpreters(tmp_path):
    script = tmp_path / "branch.py"
    script.write_text(CASE.replace("f(torch.randn(4))", "x = torch.randn(4)\nprint('x', x.shape)\nf(x)"))
    result = reduce(ReduceConfig(script=script, keep_error="Data-dependent branching", verify_runs=1, confirm=0,
                                 max_tests=4, jobs=2, output=tmp_path / "out" / "branch.min.py"))
    # the compiled function alone, written before the search, takes the call's changes
    assert result.extracted.compiled and result.extracted.text == textwrap.dedent("""\
        import torch


        def f(h):
            if h.mean() > 0:
                h = h + 1
            return h


        x0 = torch.randn(4)
        torch.compile(f, fullgraph=True)(x0)
        """)
    found = {o.change: o.result for o in result.ablation.outcomes}
    assert found == {
        "batch 1": "same bug", "torch.compile off": "passes", 'backend="eager"': "same bug",
        'backend="aot_eager"': "same bug",
        "fullgraph=False": "passes", "dynamic=False": "same bug", "dynamic=True": "same bug",
    }, [(o.change, o.result, o.error) for o in result.ablation.outcomes]
    assert "Dynamo" in result.ablation.stage
    assert result.ablation.kind == "operator contract" and "fullgraph=False" in result.ablation.reason
    report = result.report.read_text()
    assert ('| backend="eager" | the minimal case | Dynamo alone: its tracing, no AOT autograd, no compiler | same bug '
            '| `- @torch.compile(fullgraph=True)`<br>`+ @torch.compile(fullgraph=True, backend="eager")` |') in report
    assert "**The kind: operator contract.**" in report
    assert "The compiled code alone, `branch.extracted.py` (its definition and what it reads" in report
    assert "| stage of torch.compile | Dynamo tracing |" in report
