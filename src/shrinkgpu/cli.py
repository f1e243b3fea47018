"""Command line: options into a frozen config, the library does the work, an exit code.

Exit codes: 0 done; 3 the script did not fail (``run``) or its first error is not the
one to keep (``reduce``); 2 bad usage; 1 anything else; 130 interrupted.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from shrinkgpu.reducer import NotReproduced, ReduceConfig, ReduceError, reduce, run_observed
from shrinkgpu.core.rates import describe_rate
from shrinkgpu.families import Family, advice_for, family_by_name
from shrinkgpu.signature import Strictness
from shrinkgpu.worker import Isolation

EXIT_NOT_REPRODUCED = 3


def _stdin_bytes(stdin: str | None) -> bytes | None:
    """What the script reads on stdin: a file, or what was piped to us (never a terminal)."""
    if stdin is not None:
        return Path(stdin).read_bytes()
    stream = sys.stdin
    if stream is None or stream.isatty():
        return None
    try:
        return stream.buffer.read() if hasattr(stream, "buffer") else stream.read().encode()
    except (OSError, ValueError):
        return None


def _advice(sig) -> dict[str, str] | None:
    if sig is None:
        return None
    advice = advice_for(sig.family)
    return {"family": sig.family.value, "first_check": advice.first_check, "avoid": advice.avoid}


def _config(script, script_args, **kw) -> ReduceConfig:
    return ReduceConfig(
        script=Path(script),
        args=tuple(script_args),
        env=dict(os.environ),
        argv0=script,
        **kw,
    )


script_argument = click.argument("script", type=click.Path(dir_okay=False))
args_argument = click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
root_option = click.option(
    "--root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Directory copied for every run (default: the script's directory).",
)
sync_option = click.option(
    "--sync-launches", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
    is_flag=False, flag_value="always",
    help="Synchronous kernel launches (CUDA_LAUNCH_BLOCKING=1, or AMD_SERIALIZE_KERNEL=3 on ROCm), so "
         "that an asynchronous GPU error is reported at the operator whose kernel failed, not at a later "
         "synchronising call. auto: when the first error is an asynchronous GPU error, the original is run "
         "again that way and every later run too; always (or the bare flag): every run; never: as you run it.",
)
stdin_option = click.option(
    "--stdin", "stdin_file", type=click.Path(dir_okay=False, exists=True),
    help="File the script reads as stdin (default: what is piped to shrinkgpu, else nothing).",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="shrinkgpu")
def main() -> None:
    """Reduce a failing PyTorch script to a small one that fails with the same first error."""


@main.command(context_settings={"ignore_unknown_options": False})
@script_argument
@args_argument
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None, help="Seconds before the run is killed.")
@click.option("--isolation", type=click.Choice([i.value for i in Isolation]), default="fresh", show_default=True)
@root_option
@stdin_option
@sync_option
@click.option("--json", "as_json", is_flag=True, help="Print the observation as JSON.")
def run(script, script_args, timeout, isolation, root, stdin_file, sync_launches, as_json) -> None:
    """Run SCRIPT once in a worker and print its first error.

    Arguments after `--` are passed to the script. Exits 0 if the script failed,
    3 if it did not.
    """
    config = _config(script, script_args, timeout=timeout, root=root, stdin=_stdin_bytes(stdin_file),
                     sync_launches=sync_launches)
    try:
        first = run_observed(config, isolation=Isolation(isolation), collect=False)
    except ReduceError as exc:
        raise click.ClickException(str(exc)) from None
    obs, launch = first.observation, first.launch
    if obs.infra_error:
        raise click.ClickException(f"could not run the script: {obs.infra_error}")
    if as_json:
        click.echo(json.dumps({
            "failed": obs.failed,
            "status": obs.status,
            "exit_code": obs.exit_code,
            "signal": obs.signal,
            "timed_out": obs.timed_out,
            "seconds": round(obs.wall, 3),
            "signature": obs.signature.to_json() if obs.signature else None,
            "environment": obs.environment,
            "launch_env": dict([launch]) if launch else {},
            "surfaced_signature": first.surfaced.to_json() if first.surfaced else None,
            "advice": _advice(obs.signature),
        }, indent=2))
    elif obs.signature is not None:
        click.echo(obs.signature.describe())
        advice = _advice(obs.signature)
        click.echo(f"  first check: {advice['first_check']}")
        click.echo(f"  do not conclude: {advice['avoid']}")
        if first.surfaced is not None:
            where = first.surfaced.op.name if first.surfaced.op else "a call that is not torch's"
            click.echo(
                f"  asynchronous: without synchronous launches it surfaced at {where}"
                + (f" ({first.surfaced.frame.file}:{first.surfaced.frame.line})" if first.surfaced.frame else "")
                + f"; this is the run with {launch[0]}={launch[1]}"
            )
        if first.note:
            click.echo(f"  note: {first.note}")
    else:
        click.echo(f"no error: {obs.describe()}")
    sys.exit(0 if obs.failed else EXIT_NOT_REPRODUCED)


@main.command()
@script_argument
@args_argument
@click.option("--keep-error", "-k", default=None, metavar="REGEX",
              help="Regular expression the first error (class: message, and any kernel assertion) must match.")
@click.option("--family", "family_name", default=None, metavar="FAMILY",
              type=click.Choice([f.key for f in Family]),
              help="Keep a first error of this family instead of (or besides) a regex. A family takes every face "
                   "of its bugs: 'index' keeps a CPU index error and a CUDA device-side assert that checks an index.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Where to write the result (default: <stem>.min.py beside SCRIPT).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None,
              help="Seconds per candidate (default: calibrated from the original run).")
@click.option("--isolation", type=click.Choice(["auto", *(i.value for i in Isolation)]), default="auto",
              show_default=True,
              help="fork: fork a preloaded server per candidate, or stop if that is unsafe here; fresh: a new "
                   "interpreter each time; auto: fork, else fresh, saying why.")
@click.option("--strictness", type=click.Choice([s.value for s in Strictness]), default="strict", show_default=True,
              help="strict: same dtype/shape/stride/device at the operator and the same non-default arguments "
                   "(reduction='none', ignore_index=255, dim); tensors: the arguments may change; operator: the "
                   "same operator only.")
@click.option("--confirm", type=click.IntRange(min=0), default=2, show_default=True,
              help="Extra runs of the original in fresh interpreters before reducing: how often it fails. A "
                   "flaky original is measured over 10 runs and each candidate is judged against that rate.")
@click.option("--hash-seed", default=None, metavar="N|original",
              help="PYTHONHASHSEED for every run: a number, or 'original' (one drawn for the original and kept "
                   "for every candidate and the result). Default: a new one per interpreter, as python does.")
@click.option("--max-tests", type=click.IntRange(min=1), default=None, help="Stop after this many candidates.")
@click.option("--max-time", type=click.FloatRange(min=1), default=None, help="Stop after this many seconds.")
@click.option("--verify", "verify_runs", type=click.IntRange(min=0), default=2, show_default=True,
              help="Fresh-interpreter runs the result must reproduce in.")
@click.option("--search", type=click.Choice(["probdd", "ddmin"]), default="probdd", show_default=True,
              help="probdd learns which edits are needed; ddmin is the classic algorithm.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Candidates run at once (default: one per GPU, else one per CPU core).")
@click.option("--gpus", default=None, metavar="IDS",
              help="Pin workers to these GPUs via CUDA_VISIBLE_DEVICES, e.g. 0,1 (default: all visible).")
@root_option
@stdin_option
@sync_option
@click.option("--keep-temp", is_flag=True, help="Keep the temporary run directories (for debugging).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary at the end.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def reduce_cmd(script, script_args, keep_error, family_name, output, timeout, isolation, strictness, confirm,
               hash_seed, max_tests, max_time, verify_runs, search, jobs, gpus, root, stdin_file, sync_launches,
               keep_temp, as_json, quiet) -> None:
    """Reduce SCRIPT while its first error still matches --keep-error.

    Arguments after `--` are passed to the script. SCRIPT itself is never modified.
    """
    from shrinkgpu.report import OutputError, ProgressPrinter
    from shrinkgpu.worker.devices import parse_gpus

    try:
        gpu_ids = parse_gpus(gpus) if gpus is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--gpus") from None
    if keep_error is None and family_name is None:
        raise click.UsageError("say which error to keep: --keep-error REGEX, --family FAMILY, or both")
    config = _config(
        script, script_args,
        keep_error=keep_error, output=output, timeout=timeout,
        isolation=None if isolation == "auto" else Isolation(isolation),
        strictness=Strictness(strictness), max_tests=max_tests, max_time=max_time,
        verify_runs=verify_runs, root=root, stdin=_stdin_bytes(stdin_file), keep_temp=keep_temp,
        jobs=jobs, gpus=gpu_ids, search=search, sync_launches=sync_launches,
        family=family_by_name(family_name) if family_name else None, confirm=confirm, hash_seed=hash_seed,
    )
    try:
        result = reduce(config, on_event=None if quiet else ProgressPrinter())
    except NotReproduced as exc:
        click.echo(f"shrinkgpu: {exc}", err=True)
        if as_json:
            obs = exc.observation
            click.echo(json.dumps({"error": str(exc), "signature": obs.signature.to_json() if obs and obs.signature else None}))
        sys.exit(EXIT_NOT_REPRODUCED)
    except ReduceError as exc:
        click.echo(f"shrinkgpu: {exc}", err=True)
        sys.exit(exc.exit_code)
    except OutputError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        # Before the search started (or during the final check): nothing to write yet.
        click.echo("shrinkgpu: interrupted", err=True)
        sys.exit(130)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        ratio = 100 * result.tokens_after / result.tokens_before if result.tokens_before else 0
        click.echo(
            f"wrote {result.output} ({result.tokens_before} -> {result.tokens_after} tokens, {ratio:.0f}%; "
            f"{result.candidates_tested} candidates in {result.seconds:.1f}s)"
        )
        click.echo(f"report: {result.report}")
        if result.original_rate[0] < result.original_rate[1]:
            click.echo(
                f"flaky: in fresh interpreters the original reproduced in {describe_rate(*result.original_rate)}, "
                f"the result in {describe_rate(*result.verified)}"
            )
        if result.stopped:
            click.echo(f"stopped early: {result.stopped}")
    sys.exit(130 if result.stopped == "interrupted" else 0)


reduce_cmd.name = "reduce"


if __name__ == "__main__":
    main()
