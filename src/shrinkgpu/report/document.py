"""The maintainer's report, shaped like PyTorch's bug template, and the check it
suggests for the failing call."""

from __future__ import annotations

import ast
import os
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from shrinkgpu.core.rates import describe_rate
from shrinkgpu.families import Family, advice_for, compile_stage
from shrinkgpu.launch import Launch
from shrinkgpu.privacy import Redactor
from shrinkgpu.report.versions import git_revision
from shrinkgpu.results import ReductionResult
from shrinkgpu.signature import Signature
from shrinkgpu.syntax.code import calls_named
from shrinkgpu.worker import ScriptSpec

_RUN_DIR = re.compile(r"(?:/[^\s'\"`]*?)?/shrinkgpu-[\w-]+/run-\d+/root/?")


_NTH = {1: "st", 2: "nd", 3: "rd"}


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else _NTH.get(n % 10, 'th')}"


def render_report(result: ReductionResult, spec: ScriptSpec, target: Path) -> str:
    """The maintainer's report, shaped like PyTorch's bug template (describe the bug with
    a minimal example, versions) so that it pastes as is, then how it was reduced.  The
    error and the operator's table are the result's own (the script beside the report),
    with the original's where they differ.  Nothing private: see ``privacy.Redactor``."""
    original = result.signature
    shown = result.final_signature or original
    env = result.environment or {}
    out = [
        f"# shrinkgpu: reduction of `{spec.script.name}`",
        "",
        "Paste from *Describe the bug* to the end of *Versions* into a bug report "
        "(https://github.com/pytorch/pytorch/issues/new/choose, or your project's).",
        "",
        "### 🐛 Describe the bug",
        "",
    ]
    op_name = f"`{shown.op.name}`" if shown.op else "The script"
    out.append(f"{op_name} fails with `{shown.headline}` ({shown.family.value}).")
    out.append("")
    alone = (result.alone or {}).get("artifact")
    lead = _alone_lead(result, target)
    if lead:
        out += [lead, ""]
    if alone == "result written back" and result.written_back is not None:
        out += ["```python", result.written_back.rstrip("\n"), "```", ""]
    # What runs alone comes first: a maintainer pastes it as it is
    blocks = [_minimal_example(result, target), _extracted_block(result)]
    if alone == "extracted call":
        blocks.reverse()
    for block in blocks:
        out += block
    out += ["The error:", "", "```", verbatim_error(shown), "```", ""]
    if shown.suppressed:
        out += ["Raised while handling this one, which `raise ... from None` keeps out of the traceback:", "",
                "```", shown.suppressed.rstrip(), "```", ""]
    if shown is not original and shown.normalized == original.normalized and shown.message != original.message:
        out += [f"(In the original script: `{original.headline}`.)", ""]
    surfaced = result.surfaced
    if surfaced is not None:
        where = f"`{surfaced.op.name}`" if surfaced.op else "a call that is not torch's"
        at = f" (`{surfaced.frame.file}:{surfaced.frame.line}`: `{surfaced.frame.source}`)" if surfaced.frame else ""
        out += [
            f"Asynchronous: as the script runs, Python sees the error at {where}{at}; with synchronous launches "
            f"(`{' '.join(f'{k}={v}' for k, v in sorted(result.launch_env.items()))}`) it is raised by "
            f"{op_name}, whose kernel failed.",
            "",
        ]
    out += _operator_table(result, shown, original, target) + [""]
    if result.ablation is not None:
        out += _ablation_section(result.ablation)
    advice = advice_for(shown.family)
    out += [f"First check: {advice.first_check}. Do not conclude {advice.avoid}.", ""]
    check = suggest_check(shown)
    if check is not None:
        out += ["A check that rejects such values where they enter, with the call filled in:", "",
                "```python", check, "```", ""]
    out += ["### Versions", "", "```", (result.collect_env or _short_versions(env)).rstrip(), "```", ""]
    out += how_it_was_reduced(result, spec, target)
    notes = list(result.notes)
    text = "\n".join(out)
    redactor = Redactor(project=spec.root_dir, env=spec.env if spec.env is not None else os.environ)
    text = redactor(_RUN_DIR.sub("./", text))
    notes_text = [redactor(_RUN_DIR.sub("./", n)) for n in notes]
    if redactor.note():
        notes_text.append(redactor.note())
    if notes_text:
        text += "\n\n### Notes\n\n" + "\n".join(f"- {n}" for n in notes_text)
    return text + "\n"


def _minimal_example(result: ReductionResult, target: Path) -> list[str]:
    out = [_minimal_example_lead(result, target), ""]
    files = sorted(result.files.items(), key=lambda kv: kv[0] != result.main)
    for rel, text in files:
        if len(files) > 1:
            out.append(f"`{rel}`:")
        out += ["```python", text.rstrip("\n"), "```", ""]
    return out


def _extracted_block(result: ReductionResult) -> list[str]:
    extracted = result.extracted
    if extracted is None:
        return []
    data = f"; data in `{extracted.data.name}`" if extracted.data else ""
    if extracted.loader:  # load_state_dict, torch.load, json.load after the loops
        beside = (f"; `{extracted.data.name}` beside it is {extracted.holds or 'the file the call read'}"
                  if extracted.data else "")
        lead = (f"The failing load alone, `{extracted.path.name}` (the call as the program made it, rebuilt from "
                f"what it was given{beside}):")
        return [lead, "", "```python", extracted.text.rstrip("\n"), "```", ""]
    return [
        (f"The compiled code alone, `{extracted.path.name}` (its definition and what it reads, compiled as it "
         f"was, called with the inputs captured at the call{data}):") if extracted.compiled else
        (f"The failing call alone, `{extracted.path.name}` (rebuilt from what was captured at the call: it "
         f"shows the operator's contract{data}):"),
        "",
        "```python", extracted.text.rstrip("\n"), "```", "",
    ]


def _alone_lead(result: ReductionResult, target: Path) -> str | None:
    """Which artifact runs alone, said before any of them: the one to paste."""
    alone = result.alone
    if alone is None:
        return None
    artifact, needs = alone.get("artifact"), alone.get("result_needs") or []
    checked = (" (checked: alone in an empty directory it fails the same way)" if alone.get("checked")
               else " (it loads and reads no file; not run alone: the reduction ran out of time or runs it with "
                    "torchrun)")
    does_not = f"`{target.name}` does not: {'; '.join(needs)}" if needs else ""
    if artifact == "result":
        return f"**Runs alone:** `{target.name}`, with no file beside it{checked}."
    if artifact == "extracted call":
        return f"**Runs alone:** `{alone['file']}`, the failing call alone{checked}; {does_not}."
    if artifact == "result written back":
        return (f"**Runs alone:** `{alone['file']}`, the minimal example with the call it loads written as source "
                f"(random values of the same layouts, modules built anew){checked}; {does_not}:")
    extracted = result.extracted
    why_not = (f"the extracted call loads `{extracted.data.name}`" if extracted is not None and extracted.data
               else f"the failing call was not extracted ({result.extract_error})" if result.extract_error
               else "there is no extracted call")
    return f"**Nothing here runs alone:** {does_not or f'`{target.name}` does not'}; {why_not}."


def how_it_was_reduced(result: ReductionResult, spec: ScriptSpec, target: Path) -> list[str]:
    """The report's last section: the command that reproduces the result, what it needs
    beside it, and the reduction's own figures."""
    original, env = result.signature, result.environment or {}
    out = ["### How it was reduced (shrinkgpu)", "", "```sh",
           reproduce_command(spec, target, result.main, result.run_from, result.launch, result.launch_env),
           "```", ""]
    if result.beside:
        out.append("- copied beside it, because it reads them: " + ", ".join(f"`{n}`" for n in result.beside))
    elif result.run_from is not None:
        out.append("- it reads " + ", ".join(f"`{n}`" for n in result.needs) + " (too large to copy beside it): "
                   "the command above runs it from the directory that holds them")
    elif result.needs:
        out.append("- needs beside it: " + ", ".join(f"`{n}`" for n in result.needs))
    for file, name, cls, size in result.loaded_objects:
        if cls.endswith("()"):  # a data helper's result
            out.append(
                f"- `{file}`: `{name}` as `{cls[:-2]}(...)` returned it in the original ({size / 2**20:.1f} MiB); the "
                f"result, which starts at the failing step, loads it instead of calling `{cls[:-2]}` "
                "(`--no-load-objects` keeps every helper)"
            )
            continue
        out.append(
            f"- `{file}`: `{name}` (a `{cls}`, {size / 2**20:.1f} MiB) as the original held it at its first error; "
            "the result loads it instead of building it, so its constructor is not shown (`--no-load-objects` "
            "keeps every constructor)"
        )
    if result.state is not None:
        st = result.state
        restored = ", ".join(f"`{e}`" for e in st["restores"][:8]) + (", ..." if len(st["restores"]) > 8 else "")
        out.append(
            f"- `{st['file']}`: the state at the start of iteration {st['iteration']} of `{st['loop']}` "
            f"({st['in']}), saved by one more run of the original ({st['bytes'] / 2**20:.1f} MiB: {restored}); the "
            "result starts there instead of running the iterations before it. It holds your weights: it is for your "
            "own debugging, the extracted call is what to attach to a public issue (`--no-replay-state` never saves it)"
        )
        if st.get("files_dir"):
            out.append(f"- `{st['files_dir']}/`: the files the original had written before that iteration "
                       "(a checkpoint, logs), which the result copies into its working directory before it starts "
                       "there")
    state_dir = result.state.get("files_dir") if result.state is not None else None
    for name in sorted(result.data_files):
        # the files a failure after the loops read (reducer/start.py, OutputLayout.written_files_name)
        if name.endswith(".files") and not name.endswith(".state.files") and name != state_dir:
            out.append(f"- `{name}/`: the files the original's loops wrote before the failure after them (a "
                       "checkpoint, a vocabulary), which the result copies into its working directory instead of "
                       "training again. They may hold your weights: they are for your own debugging, not for a "
                       "public issue")
    in_place = result.in_place
    verified = f"- verified in fresh interpreters: {result.verified[0]} of {result.verified[1]} runs"
    if in_place is not None:
        verified += f"; where it is written: {in_place}"
    out += [
        f"- tokens: {result.tokens_before} -> {result.tokens_after}"
        + (f" ({100 * result.tokens_after / result.tokens_before:.1f}%)" if result.tokens_before else ""),
        f"- candidates tested: {result.candidates_tested} (runs: {result.oracle.runs}, cache hits: "
        f"{result.oracle.cache_hits}, rejected without running: {result.oracle.invalid})",
        "- verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(result.oracle.by_verdict.items())),
        f"- time: {result.seconds:.1f}s; isolation: {isolation_line(result)}; timeout per candidate "
        f"{result.timeout:.1f}s",
        f"- ran on: {where_it_ran(result)}",
        verified,
        f"- backend: CUDA {env.get('cuda') or 'none'}, HIP {env.get('hip') or 'none'}"
        + (f", devices: {', '.join(env['devices'])}" if env.get("devices") else ""),
        f"- code revision: {result.revision or git_revision(spec.script.parent)}"
        + (" (when the reduction started)" if result.revision else ""),
    ]
    dist = result.distributed
    if dist is not None:
        who = (f"rank {dist['rank']} of {dist['world_size']} raised the first error" if dist.get("rank") is not None
               else "no rank raised an error first")
        where = f" in `{dist['collective']}`" if dist.get("collective") else ""
        runs = ("it reproduces without torch.distributed: the result runs as one plain python process"
                if dist["result"] == "python" else
                f"the result runs as {result.launch.nproc} rank(s) under torchrun (the fewest that fail the same way)")
        backend = f", backend {dist['backend']}" if dist.get("backend") else ""
        if dist.get("started_by"):
            runs = ("the result runs as `python`, as the script did; the ranks it starts are in its code (fewest "
                    "that fail the same way, or none)")
            out.append(f"- ranks: the original started {dist['world_size']} ranks itself ({dist['started_by']})"
                       f"{backend}; {who}{where}; {runs}")
        else:
            out.append(f"- ranks: the original ran as {dist['world_size']} ranks under torchrun{backend}; "
                       f"{who}{where}; {runs}")
    rate = result.original_rate
    if rate[0] < rate[1]:
        out.append(
            f"- flaky: the original reproduced in {describe_rate(*rate)} in fresh interpreters, the result in "
            f"{describe_rate(*result.verified)}; each candidate was judged by a sequential test of its rate"
        )
    if result.stopped:
        out.append(f"- stopped early: {result.stopped} (the result is the best found so far)")
    for note in original.caught_earlier:
        out.append(f"- the original caught an earlier torch error before this one: `{note}`")
    return out


_SAVED_CALL = re.compile(r"['\"]([\w.-]+\.call\.pt)['\"]")


def _minimal_example_lead(result: ReductionResult, target: Path) -> str:
    """What the minimal example shows, said only where it is true: a result that calls the
    failing code with the arguments a library passed, or starts at the failing step from
    saved state, no longer shows where its values came from."""
    partial = (f" It is the smallest program found before the search stopped ({result.stopped}), not a finished "
               "reduction." if result.stopped else "")
    head = f"Minimal example, `{target.name}`: the original script reduced by deleting and inlining code"
    saved = next((m.group(1) for text in result.files.values() for m in [_SAVED_CALL.search(text)] if m), None)
    if saved is not None:
        return (f"{head}. It calls the failing code with the arguments the library passed to it in the original, "
                f"loaded from `{saved}`: it shows the failing call, not where those values came from.{partial}")
    if result.state is not None:
        return (f"{head}. It starts at the failing step from the state the original had there "
                f"(`{result.state['file']}`): it shows that step, not the steps that led to it.{partial}")
    if result.loaded_objects:
        names = ", ".join(f"`{name}`" for _, name, _, _ in result.loaded_objects)
        return (f"{head}; it loads {names} as the original held it, so it shows where the bad values come from "
                f"from there on.{partial}")
    return f"{head}, so it still shows where the bad values come from.{partial}"


def verbatim_error(sig: Signature) -> str:
    lines = [f"{sig.type}: {sig.message.rstrip()}" if sig.message.strip() else sig.type]
    if sig.kernel_assertion:
        lines.append(sig.kernel_assertion)
    return "\n".join(lines)


def _short_versions(env: dict) -> str:
    return (f"Python {env.get('python', sys.version.split()[0])}, torch {env.get('torch', 'unknown')}, "
            f"CUDA {env.get('cuda') or 'none'}, HIP {env.get('hip') or 'none'}; {env.get('platform', '')}\n"
            "(torch.utils.collect_env was not available)")


def _ablation_section(ablated) -> list[str]:
    """The comparisons, as the field guide makes them: one change at a time, the edit
    each made, its outcome; then the kind they show and why."""
    # Part of the bug report: the pt2 template asks which backends fail, the triage
    # guidance what is needed to trigger the bug.
    out = ["### One change at a time", "",
           "Each change run once in its own process, on the minimal case or on the extracted call:", "",
           "| change | on | what it tells | outcome | edit |", "|---|---|---|---|---|"]
    for o in ablated.outcomes:
        outcome = o.result + (f": `{_cell(o.error)}`" if o.error else "") + (f" ({o.output})" if o.output else "")
        edit = "<br>".join(f"`{_cell(line)}`" for line in o.edit.splitlines()) if o.edit else ""
        out.append(f"| {o.change} | {o.subject} | {o.what} | {outcome} | {edit} |")
    out.append("")
    if ablated.stage:
        out += [ablated.stage[0].upper() + ablated.stage[1:] + ".", ""]
    out += [f"**The kind: {ablated.kind}.** {ablated.reason[0].upper() + ablated.reason[1:]}."]
    if ablated.hint:
        out += ["", f"Hint: {ablated.hint}."]
    return out + [""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def _operator_table(result: ReductionResult, shown: Signature, original: Signature, target: Path) -> list[str]:
    lines = ["| | |", "|---|---|"]
    stage = compile_stage(shown.type, shown.message, shown.raised_by) if shown.family is Family.COMPILE else None
    if stage is not None:
        # torch.compile raised it while compiling: the suspect is the compiled callable
        # (called on the line under "where") and the stage that failed
        lines.append(f"| stage of torch.compile | {stage} |")
        if shown.frame is not None and shown.op is None:
            lines.append(f"| compiled callable | called at `{shown.frame.source}` |")
    if shown.op is None and stage is None:
        lines.append("| operator | none: the error was not raised by a torch call |")
    elif shown.op is not None:
        which = f"the {_ordinal(shown.call)} call of it in the run" if shown.call else "-"
        loops = result.loops
        if loops:
            which += "; " + ", ".join(f"iteration {k} of the loop at `{f}:{n}`" for f, n, k in loops) + " (original)"
        lines += [f"| operator | `{shown.op.name}` |", f"| which call | {which} |"]
        for t in shown.op.tensors:
            lines.append(f"| `{t.path}` | {t.describe().split(': ', 1)[1]} |")
        kept = ", ".join(f"`{a}`" for a in shown.op.arguments) or "all defaults"
        lines.append(f"| arguments that differ from the defaults | {kept} |")
        if original.op is not None and original.op.arguments != shown.op.arguments:
            was = ", ".join(f"`{a}`" for a in original.op.arguments) or "all defaults"
            lines.append(f"| the same, in the original | {was} |")
        if original.op is not None and original.op.tensors != shown.op.tensors:
            lines.append("| tensors in the original | " + "; ".join(t.describe() for t in original.op.tensors) + " |")
        if result.varying:
            lines.append("| sizes the original varied across its calls (not the bug's) | "
                         + ", ".join(f"dimension {d} of `{a}`" for a, d in result.varying) + " |")
    if shown.kernel_assertion:
        lines.append(f"| kernel assertion | `{shown.kernel_assertion}` |")
    if shown.frame is not None:
        file = shown.frame.file
        if shown is not original and len(result.files) == 1 and Path(file).name == Path(result.main).name:
            file = target.name  # the result runs under the original's name; its lines are its own
        lines.append(f"| where | `{file}:{shown.frame.line}` in `{shown.frame.function}`: `{shown.frame.source}` |")
    return lines


_CLASS_LOSSES = ("cross_entropy", "nll_loss")


def suggest_check(sig: Signature) -> str | None:
    """For an index error (on any device), the matching ``shrinkgpu.checks`` call with the
    failing call's own arguments filled in, when the failing line is that call."""
    if sig.op is None or sig.family not in (Family.INDEX, Family.DEVICE_ASSERT):
        return None
    name = sig.op.name.rsplit(".", 1)[-1]
    call = _call_in(sig.frame.source if sig.frame else "", name)
    args = dict(a.split("=", 1) for a in sig.op.arguments if "=" in a)
    shapes = {t.path: t.shape for t in sig.op.tensors}

    # ``x.gather(-1, t)``: the tensor the method is called on is the operator's input,
    # and the call's arguments start at its second parameter
    method = call is not None and sig.op.name.startswith("Tensor.") and isinstance(call.func, ast.Attribute)

    def arg(position: int, keyword: str, placeholder: str) -> str:
        if call is not None:
            if method:
                if position == 0:
                    return ast.unparse(call.func.value)
                position -= 1
            if len(call.args) > position and not isinstance(call.args[position], ast.Starred):
                return ast.unparse(call.args[position])
            for kw in call.keywords:
                if kw.arg == keyword:
                    return ast.unparse(kw.value)
        return placeholder

    where = f"  # before {sig.frame.source}" if sig.frame and call is not None else ""
    if name in _CLASS_LOSSES:
        logits = shapes.get("args[0]") or shapes.get("kwargs['input']")
        if not logits:
            return None
        classes = logits[1] if len(logits) > 1 else logits[0]
        ignore = args.get("ignore_index")
        extra = f", ignore_index={ignore}" if ignore is not None else ""
        target = arg(1, "target", "target")
        return (f"from shrinkgpu.checks import validate_class_targets\n"
                f"validate_class_targets({target}, {classes}{extra}){where}")
    if name == "embedding":
        weight = shapes.get("args[1]") or shapes.get("kwargs['weight']")
        if not weight:
            return None
        padding = args.get("padding_idx")
        extra = f", padding_idx={padding}" if padding not in (None, "None") else ""
        return (f"from shrinkgpu.checks import validate_embedding_indices\n"
                f"validate_embedding_indices({arg(0, 'input', 'indices')}, {weight[0]}{extra}){where}")
    if name in ("gather", "index_select", "scatter", "scatter_add", "index_add", "index_add_", "scatter_",
                "index_copy"):
        dim = args.get("dim") or args.get("args[1]") or arg(1, "dim", "dim")
        return (f"from shrinkgpu.checks import validate_index\n"
                f"validate_index({arg(0, 'input', 'input')}, {dim}, {arg(2, 'index', 'index')}){where}")
    return None


def _call_in(source: str, name: str) -> ast.Call | None:
    """The call of ``name`` (``F.cross_entropy``, ``torch.gather``) in a line of source."""
    calls = calls_named(source, name)
    return calls[0] if calls else None


def reproduce_command(spec: ScriptSpec, target: Path, main: str, run_from: Path | None = None,
                      launch: Launch | None = None, env: Mapping[str, str] | None = None) -> str:
    """The shell command that runs the result, quoted for names with spaces: from the
    directory it is written in, or, with ``run_from``, from there (which holds the data
    it reads); with ``launch``'s ranks, through torchrun; with ``env``
    (``CUDA_LAUNCH_BLOCKING=1``, the hash seed) set for the process that runs it."""
    where, program = _command_parts(spec, target, main, run_from)
    launch = spec.launch if launch is None else launch
    if launch.ranks:
        # ``python x.py`` -> ``torchrun --standalone --nproc-per-node=N x.py`` (and ``-m``)
        program = _PYTHON.sub(f"torchrun --standalone --nproc-per-node={launch.nproc} ", program, count=1)
    # The variables go to the program, after any ``cd``: before it they would be ``cd``'s.
    assignments = "".join(f"{k}={shlex.quote(str(v))} " for k, v in sorted((env or {}).items()))
    return f"{where}{assignments}{program}"


_PYTHON = re.compile(r"(?<![\w/.=-])python ")


def _command_parts(spec: ScriptSpec, target: Path, main: str, run_from: Path | None) -> tuple[str, str]:
    """(``cd DIR && `` or nothing, the process that runs the result)."""
    args = "".join(" " + shlex.quote(a) for a in spec.args)
    if run_from is not None:
        script = target / main if target.is_dir() else target
        where = f"cd {shlex.quote(str(run_from))} && "
        if target.is_dir() and spec.module is not None and main.endswith(".py"):
            module = main[: -len(".py")].replace("/", ".").removesuffix(".__main__")
            return where, f"PYTHONPATH={shlex.quote(str(target.resolve()))} python -m {module}{args}"
        return where, f"python {shlex.quote(str(script.resolve()))}{args}"
    if target.is_dir():  # a result of several files
        where = f"cd {shlex.quote(target.name)} && "
        if spec.module is not None and main.endswith(".py"):
            module = main[: -len(".py")].replace("/", ".").removesuffix(".__main__")
            return where, f"python -m {module}{args}"
        return where, f"python {shlex.quote(main)}{args}"
    return "", f"python {shlex.quote(target.name)}{args}"


def where_it_ran(result: ReductionResult) -> str:
    """The executor, its nodes and workers, the search's pace, and what running
    candidates side by side cost: one line for the report and the summary."""
    placed = result.where
    nodes, workers = len(placed.nodes) or 1, placed.workers
    text = (f"{placed.executor}, {nodes} node{'s' if nodes != 1 else ''}, "
            f"{workers} worker{'s' if workers != 1 else ''}, "
            f"{result.jobs} candidate{'s' if result.jobs != 1 else ''} at once")
    pace = result.candidates_per_second
    if pace is not None:
        text += f"; {pace:.2f} candidates/s in the search"
    if result.jobs > 1:
        share = result.unused_share or 0.0
        text += f"; {result.unused_runs} run(s) beside others went unused ({100 * share:.0f}%)"
    if placed.lost:
        text += f"; {placed.lost_text()}"
    return text


def isolation_line(result: ReductionResult) -> str:
    """How the candidates ran, as it was: forked with torch preloaded, forked without it
    (each candidate imported it, at a fresh interpreter's cost, and why), or fresh."""
    text = result.isolation.value
    if result.preload_modules:
        text += f" ({result.preload_modules} modules preloaded)"
    if result.isolation.value == "fork" and not result.torch_preloaded:
        why = next((d.reason for d in result.preload_dropped if d.module == "torch"), None)
        text += "; torch not preloaded" + (f" ({why})" if why else "") + ": each candidate imported it"
    others = [str(d) for d in result.preload_dropped if d.module != "torch"]
    if others:
        text += "; not preloaded: " + "; ".join(others)
    return text
