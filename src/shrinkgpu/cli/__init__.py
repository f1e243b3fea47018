"""Command line: options into a frozen config, the library does the work, an exit code.

One table of exit codes for every command (README.md, "Exit codes"):

    0    run: the script failed (its first error is printed); reduce: a result was written
    1    something went wrong in shrinkgpu or the script could not be run at all
    2    bad usage: an option, a missing or unreadable script, an output path refused
    3    run: the script did not fail; reduce: it did not fail, or not with the error to keep;
         check: the candidate is not the same bug (the answer says which part differs)
    4    verify: a check still fails, fails differently, or a warning (fewer items) was raised
    129  SIGHUP, 130 SIGINT (Ctrl-C), 143 SIGTERM: the best result so far is written,
         marked partial (``--resume`` continues from it)

With ``--json`` every outcome prints one JSON object on stdout, with ``error`` set when
there is one.  Options may also come from ``[tool.shrinkgpu]`` in the nearest
``pyproject.toml`` (command-line options win).
"""

from __future__ import annotations

import dataclasses
import os
import select
import signal
import sys
import tomllib
from pathlib import Path

import click

from shrinkgpu.cli.output import emit_json, fail, json_stdout
from shrinkgpu.core.rates import describe_rate
from shrinkgpu.families import Family, advice_for, family_by_name
from shrinkgpu.reducer import NotReproduced, ReduceConfig, ReduceError, reduce, run_observed
from shrinkgpu.signature import Strictness
from shrinkgpu.worker import Isolation, RayUnavailable

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_REPRODUCED = 3
EXIT_STILL_FAILING = 4
SIGNAL_EXITS = {signal.SIGHUP: 129, signal.SIGINT: 130, signal.SIGTERM: 143}
# How long an open stdin (ssh, docker exec -i, CI) may stay silent before the script is
# given what arrived so far.
STDIN_QUIET = 1.0


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C so that every interrupt path (the search
    stops with its best state, the result is written marked partial) handles it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_received: list[int] = []


def _on_signal(signum, _frame) -> None:
    _received.append(signum)
    raise Terminated(signum)


def _interrupt_code() -> int:
    return SIGNAL_EXITS.get(_received[-1], 130) if _received else 130


def _stdin_bytes(stdin: str | None, notes: list[str]) -> bytes | None:
    """What the script reads on stdin: ``--stdin FILE`` (``-``: ours, to its end), a file
    redirected to us, or what a pipe delivers; never a terminal, and never a wait on a
    stdin that stays open (ssh, ``docker exec -i``, CI runners): after a quiet second the
    script gets what arrived."""
    if stdin == "-":
        return sys.stdin.buffer.read()
    if stdin is not None:
        return Path(stdin).read_bytes()
    stream = sys.stdin
    if stream is None or stream.closed:
        return None
    try:
        fd = stream.fileno()
        if os.isatty(fd):
            return None
        if not os.path.exists(f"/proc/self/fd/{fd}") or os.path.isfile(os.path.realpath(f"/proc/self/fd/{fd}")):
            return stream.buffer.read()
    except (OSError, ValueError):
        return None
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([fd], [], [], STDIN_QUIET)
        if not ready:
            notes.append(
                f"stdin stayed open without data for {STDIN_QUIET:g}s: the script gets the "
                f"{sum(map(len, chunks))} bytes that arrived (--stdin FILE to give it a file)"
            )
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _advice(sig) -> dict[str, str] | None:
    if sig is None:
        return None
    advice = advice_for(sig.family)
    return {"family": sig.family.value, "first_check": advice.first_check, "avoid": advice.avoid}


def _config(script, script_args, module, nproc=None, hang_after=None, **kw) -> ReduceConfig:
    script, script_args, module, launch = _launch(script, tuple(script_args), module, nproc, hang_after)
    args = tuple(script_args)
    if module is not None and script is not None:
        args = (script, *args)  # with -m, every positional is the module's argument
    if module is None and script is None:
        raise click.UsageError("give SCRIPT, or -m MODULE")
    return ReduceConfig(
        script=Path(script) if script is not None else Path(module.replace(".", "/") + ".py"),
        args=args,
        env=dict(os.environ),
        argv0=script,
        module=module,
        launch=launch,
        **kw,
    )


def _launch(script, script_args: tuple, module, nproc, hang_after):
    """The script, its arguments, its module and how its processes start: a torchrun
    command line (``-- torchrun [options] train.py ...``, ``-- python -m
    torch.distributed.run ...``, ``-m torch.distributed.run -- [options] train.py ...``)
    read with torchrun's grammar; ``--nproc-per-node N`` for a plain SCRIPT."""
    from shrinkgpu.launch import PLAIN, TORCHRUN_MODULES, Launch, LaunchError, is_torchrun, nproc_of, torchrun_command
    from shrinkgpu.worker.devices import visible_gpus

    launch = PLAIN
    argv = None
    if module in TORCHRUN_MODULES:
        argv = ["python", "-m", module, *([script] if script is not None else []), *script_args]
    elif script is not None and is_torchrun([script, *script_args]):
        argv = [script, *script_args]
    try:
        if argv is not None:
            command = torchrun_command(argv, gpus=len(visible_gpus(os.environ)))
            script, module, script_args, launch = command.script, command.module, command.args, command.launch
        if nproc is not None:
            n = nproc_of(str(nproc), gpus=len(visible_gpus(os.environ)))
            if launch.ranks and n != launch.nproc:
                raise LaunchError(f"--nproc-per-node {nproc} and the torchrun command's {launch.nproc} ranks "
                                  "disagree: give one")
            launch = launch if launch.ranks else Launch(nproc=n, ranks=True)
    except LaunchError as exc:
        raise click.UsageError(str(exc)) from None
    if hang_after is not None:
        launch = dataclasses.replace(launch, hang_after=hang_after)
    return script, script_args, module, launch


def launch_options(f):
    """``--nproc-per-node`` and ``--hang-after``: how a distributed script's ranks run."""
    f = click.option(
        "--hang-after", type=click.FloatRange(min=1), default=None, metavar="SECONDS",
        help="With ranks: seconds every running rank must wait in a collective that not all of them reach "
             "before the run counts as hanging (family 'hang'; default 20).")(f)
    return click.option(
        "--nproc-per-node", "nproc", default=None, metavar="N",
        help="Run SCRIPT as `torchrun --nproc-per-node N` runs it on this machine: N ranks, each with "
             "torchrun's environment (RANK, WORLD_SIZE, MASTER_PORT, ...). Your own command line works too: "
             "`shrinkgpu reduce -k ERR -- torchrun --nproc-per-node=2 train.py` (docs/executors.md).")(f)


# -- options from pyproject.toml ---------------------------------------------------------------
def _project_defaults(start: Path) -> dict:
    """``[tool.shrinkgpu]`` of the nearest pyproject.toml at or above ``start``: option
    names as on the command line (``keep-error``, ``max-time``), for ``reduce`` and
    ``run`` alike; a ``[tool.shrinkgpu.reduce]`` table applies to one command only."""
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise click.UsageError(f"{candidate}: {exc}") from None
            table = data.get("tool", {}).get("shrinkgpu", {})
            shared = {k.replace("-", "_"): v for k, v in table.items() if not isinstance(v, dict)}
            out = {}
            for command in ("reduce", "run"):
                own = {k.replace("-", "_"): v for k, v in table.get(command, {}).items()}
                out[command] = {**shared, **own}
            return out
    return {}


class _Group(click.Group):
    def make_context(self, info_name, args, parent=None, **extra):
        extra.setdefault("default_map", _project_defaults(Path.cwd()))
        return super().make_context(info_name, args, parent=parent, **extra)


script_argument = click.argument("script", required=False, type=click.Path(dir_okay=False))
args_argument = click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
module_option = click.option(
    "-m", "module", default=None, metavar="MODULE",
    help="Run a module of your project as `python -m MODULE` does, from the working directory.",
)
root_option = click.option(
    "--root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Directory copied for every run (default: the working directory when the script is inside it, "
         "else the script's directory).",
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
    "--stdin", "stdin_file", type=click.Path(dir_okay=False, allow_dash=True),
    help="File the script reads as stdin ('-': what is piped to shrinkgpu, to its end). Default: a file "
         "redirected to shrinkgpu, or what a pipe delivers; never the terminal.",
)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="shrinkgpu")
def cli() -> None:
    """Reduce a failing PyTorch script to a small one that fails with the same first error."""


@cli.command(context_settings={"ignore_unknown_options": False})
@script_argument
@args_argument
@module_option
@launch_options
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None, help="Seconds before the run is killed.")
@click.option("--isolation", type=click.Choice([i.value for i in Isolation]), default="fresh", show_default=True)
@root_option
@stdin_option
@sync_option
@click.option("--json", "as_json", is_flag=True, help="Print the observation as JSON.")
def run(script, script_args, module, nproc, hang_after, timeout, isolation, root, stdin_file, sync_launches,
        as_json) -> None:
    """Run SCRIPT once in a worker and print its first error, its family and what to check.

    Arguments after `--` are passed to the script. Exits 0 if the script failed,
    3 if it did not (README.md: exit codes).
    """
    notes: list[str] = []
    try:
        config = _config(script, script_args, module, nproc, hang_after, timeout=timeout, root=root,
                         stdin=_stdin_bytes(stdin_file, notes), sync_launches=sync_launches)
        first = run_observed(config, isolation=Isolation(isolation))
    except ReduceError as exc:
        fail(str(exc), exc.exit_code, as_json)
    except (OSError, click.ClickException) as exc:
        fail(str(exc), EXIT_USAGE, as_json)
    obs, launch = first.observation, first.launch
    if obs.infra_error:
        fail(f"could not run the script: {obs.infra_error}", EXIT_ERROR, as_json)
    code = EXIT_OK if obs.failed else EXIT_NOT_REPRODUCED
    if as_json:
        emit_json({
            "failed": obs.failed,
            "status": obs.status,
            "exit_code": obs.exit_code,
            "signal": obs.signal,
            "timed_out": obs.timed_out,
            "seconds": round(obs.wall, 3),
            "signature": obs.signature.to_json() if obs.signature else None,
            "world_size": obs.world_size,
            "rank": obs.rank,
            "started_by": obs.launcher,  # a script's own ranks: mp.spawn, start_processes, multiprocessing.Process
            "environment": obs.environment,
            "launch_env": dict([launch]) if launch else {},
            "surfaced_signature": first.surfaced.to_json() if first.surfaced else None,
            "advice": _advice(obs.signature),
            "notes": notes + ([first.note] if first.note else []),
            "error": None if obs.failed else f"the script did not fail: {obs.describe()}",
        })
    elif obs.signature is not None:
        if obs.launcher is not None and obs.rank is not None:
            click.echo(f"rank {obs.rank} of {obs.world_size}, started by {obs.launcher}:")
        click.echo(obs.signature.describe())
        if obs.world_size > 1 and obs.rank is not None:
            click.echo(f"  the first failing rank: {obs.rank} of {obs.world_size}")
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
        for note in notes + ([first.note] if first.note else []):
            click.echo(f"  note: {note}")
    else:
        click.echo(f"no error: {obs.describe()}")
    sys.exit(code)


@cli.command()
@script_argument
@args_argument
@module_option
@launch_options
@click.option("--keep-error", "-k", default=None, metavar="REGEX",
              help="Regular expression the first error (class: message, and any kernel assertion) must match.")
@click.option("--family", "family_name", default=None, metavar="FAMILY",
              type=click.Choice([f.key for f in Family]),
              help="Keep a first error of this family instead of (or besides) a regex. A family takes every face "
                   "of its bugs: 'index' keeps a CPU index error and a CUDA device-side assert that checks an index.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Where to write the result (default: <stem>.min.py beside SCRIPT).")
@click.option("--resume", is_flag=True,
              help="Start from the result (partial or not) an earlier run left at the output path, if it still "
                   "reproduces.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None,
              help="Seconds per candidate (default: calibrated from the original run).")
@click.option("--isolation", type=click.Choice(["auto", *(i.value for i in Isolation)]), default="auto",
              show_default=True,
              help="fork: fork a preloaded server per candidate, or stop if that is unsafe here; fresh: a new "
                   "interpreter each time; auto: fork, else fresh, saying why.")
@click.option("--strictness", type=click.Choice([s.value for s in Strictness]), default="strict", show_default=True,
              help="strict: same dtype/shape/stride/device at the operator and the same non-default arguments "
                   "(reduction='none', ignore_index=255, dim); batch: as strict, but a batch dimension (the first "
                   "dimension input and target share) may shrink; tensors: the arguments may change; operator: "
                   "the same operator only.")
@click.option("--confirm", type=click.IntRange(min=0), default=2, show_default=True,
              help="Extra runs of the original in fresh interpreters before reducing: how often it fails. A "
                   "flaky original is measured over 10 runs and each candidate is judged against that rate.")
@click.option("--hash-seed", default=None, metavar="N|original",
              help="PYTHONHASHSEED for every run: a number, or 'original' (one drawn for the original and kept "
                   "for every candidate and the result). Default: a new one per interpreter, as python does.")
@click.option("--max-tests", type=click.IntRange(min=1), default=None, help="Stop after this many candidates.")
@click.option("--max-time", type=click.FloatRange(min=1), default=None,
              help="Seconds for the whole command: every run of the original, the search, the checks and "
                   "comparisons after it, the report (a run that could not end in time is not started, and a "
                   "note says what it needs; up to 5 s more to stop the running candidate and write the files).")
@click.option("--verify", "verify_runs", type=click.IntRange(min=0), default=2, show_default=True,
              help="Fresh-interpreter runs the result must reproduce in.")
@click.option("--extract/--no-extract", default=True, show_default=True,
              help="Also write the failing call alone (<stem>.extracted.py), checked in a fresh interpreter.")
@click.option("--load-objects/--no-load-objects", default=True, show_default=True,
              help="Offer candidates that load the script's data objects (instances of its own classes holding "
                   "arrays or long lists, never a model; for a long job started at its failing step, also what its "
                   "data helpers returned) as the first run saved them, beside the result as "
                   "<stem>.min.<name>.pkl, instead of building them. --no-load-objects keeps every constructor.")
@click.option("--observed-sizes/--no-observed-sizes", "observed_sizes", default=True, show_default=True,
              help="Offer candidates that write the sizes the failing code computed from data (len(vocab), "
                   "x.size(1)) as the numbers the first run computed, and, for shape, view and dtype errors, the "
                   "tensors it bound as torch.randn/torch.zeros of their layout, so the data pipeline can go.")
@click.option("--replay-state/--no-replay-state", "replay_state", default=True, show_default=True,
              help="For a long original (its own run at least six times its import of torch: about 10 s here) "
                   "that fails past the first iteration of a loop: save its "
                   "state at the start of the failing iteration (weights, optimizer, scheduler, RNGs, the batch) as "
                   "<stem>.min.state.pt and offer candidates that start there, once a fresh interpreter showed the "
                   "replay fails the same way. The file holds your weights.")
@click.option("--ablate/--no-ablate", default=True, show_default=True,
              help="After the search, run the minimal case with one change at a time, each in a fresh interpreter "
                   "(for a torch.compile failure: the backend, fullgraph, dynamic, compilation off), and say in the "
                   "report which fail the same way.")
@click.option("--search", type=click.Choice(["probdd", "ddmin"]), default="probdd", show_default=True,
              help="probdd learns which edits are needed; ddmin is the classic algorithm.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Candidates run at once (default: one per GPU, else as many as fit beside the threads one run "
                   "uses).")
@click.option("--gpus", default=None, metavar="IDS",
              help="Pin workers to these GPUs, e.g. 0,1, or all (the default: every GPU this machine shows, one "
                   "candidate on each at once).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where candidates run: fork servers on this machine, or actors of a Ray cluster, one per GPU "
                   "(pip install 'shrinkgpu[ray]'; docs/executors.md).")
@click.option("--address", default=None, metavar="ADDR",
              help="With --executor ray: the cluster (HOST:PORT or ray://HOST:PORT; default: RAY_ADDRESS, else one "
                   "started on this machine with `ray start`); 'local' starts one for this reduction.")
@click.option("--gpus-per-worker", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="With --executor ray: the GPUs each worker takes (a fraction shares a GPU; 0 or a cluster "
                   "without GPUs: one worker per CPU).")
@click.option("--cpus-per-worker", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="With --executor ray: the CPUs each worker takes; a candidate's thread pools are sized to them.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="With --executor ray: how many workers (default: as many as the cluster's GPUs, or CPUs, hold).")
@root_option
@stdin_option
@sync_option
@click.option("--keep-temp", is_flag=True, help="Keep the temporary run directories (for debugging).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary at the end (and on every error).")
@click.option("-q", "--quiet", is_flag=True, help="No progress.")
@click.option("-v", "--verbose", is_flag=True, help="A line for every accepted edit.")
@click.option("--emit-test", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a pytest file that fails while the minimal case still reproduces the bug.")
@click.option("--propose-with", "propose_with", default=None, metavar="CMD",
              help="A shell command that proposes smaller programs (a language model, a script of yours): it reads "
                   "the best program so far on stdin and prints candidates, one JSON object a line "
                   "({\"text\": ...} or {\"files\": {...}}); each is judged like the passes' candidates, when they "
                   "find nothing more (docs/agents.md).")
@click.option("--progress-json", is_flag=True,
              help="Progress as one JSON object a line on stderr, for a program that drives shrinkgpu.")
def reduce_cmd(script, script_args, module, nproc, hang_after, keep_error, family_name, output, resume, timeout,
               isolation, strictness, confirm, hash_seed, max_tests, max_time, verify_runs, extract, load_objects,
               observed_sizes, replay_state, ablate, search, jobs,
               gpus, executor, address, gpus_per_worker, cpus_per_worker, workers, root,
               stdin_file,
               sync_launches, keep_temp, as_json, quiet, verbose, emit_test, propose_with, progress_json) -> None:
    """Reduce SCRIPT while its first error still matches --keep-error (or --family).

    Options come before SCRIPT; arguments after `--` are passed to the script. SCRIPT
    itself is never modified.
    """
    from shrinkgpu.cli.progress import JsonProgress, LiveProgress, ProgressPrinter
    from shrinkgpu.report import OutputError
    from shrinkgpu.worker.devices import parse_gpus

    try:
        gpu_ids = parse_gpus(gpus) if gpus is not None else None
    except ValueError as exc:
        fail(f"--gpus: {exc}", EXIT_USAGE, as_json)
    if keep_error is None and family_name is None:
        fail("say which error to keep: --keep-error REGEX, --family FAMILY, or both", EXIT_USAGE, as_json)
    notes: list[str] = []
    try:
        config = _config(
            script, script_args, module, nproc, hang_after,
            keep_error=keep_error, output=output, timeout=timeout,
            isolation=None if isolation == "auto" else Isolation(isolation),
            strictness=Strictness(strictness), max_tests=max_tests, max_time=max_time,
            verify_runs=verify_runs, root=root, stdin=_stdin_bytes(stdin_file, notes), keep_temp=keep_temp,
            jobs=jobs, gpus=gpu_ids, search=search, sync_launches=sync_launches,
            family=family_by_name(family_name) if family_name else None, confirm=confirm, hash_seed=hash_seed,
            resume=resume, extract=extract, save_objects=load_objects, observed_sizes=observed_sizes,
            replay_state=replay_state, ablate=ablate, propose_with=propose_with,
        )
    except (OSError, click.ClickException) as exc:
        fail(str(exc), EXIT_USAGE, as_json)
    cluster = _ray_cluster(config, executor, address, gpus_per_worker, cpus_per_worker, workers, as_json)
    if cluster is not None:
        count = cluster.workers()
        if config.jobs is None:
            # one candidate in flight per worker: the search's batches are that wide
            config = dataclasses.replace(config, jobs=count)
        notes.append(f"--executor ray: candidates on {count} Ray worker(s), {config.jobs} at once; the original's "
                     "fresh runs and the checks of the result on this machine")
    progress = JsonProgress() if progress_json else None
    if progress is None and not quiet:
        progress = LiveProgress(verbose=verbose) if sys.stderr.isatty() else ProgressPrinter(verbose=verbose)
    if progress is not None:
        for note in notes:
            progress.stage(note)
    try:
        result = reduce(config, on_event=progress) if cluster is None else reduce(config, on_event=progress,
                                                                                  executors=cluster)
    except NotReproduced as exc:
        obs = exc.observation
        fail(str(exc), EXIT_NOT_REPRODUCED, as_json,
              signature=obs.signature.to_json() if obs and obs.signature else None)
    except ReduceError as exc:
        fail(str(exc), exc.exit_code, as_json)
    except OutputError as exc:
        fail(str(exc), EXIT_USAGE, as_json)
    except RayUnavailable as exc:  # (what the cluster was asked to take, refused)
        fail(str(exc), EXIT_USAGE, as_json)
    except KeyboardInterrupt:
        # Before the search found anything: nothing to write, and the temporary space is gone.
        fail(f"interrupted ({signal.Signals(_received[-1]).name if _received else 'SIGINT'}) before any "
              "smaller program was found; nothing was written", _interrupt_code(), as_json)
    finally:
        if progress is not None:
            progress.close()
        if cluster is not None:
            cluster.close()
    code = _interrupt_code() if result.stopped == "interrupted" else EXIT_OK
    test_file = None
    if emit_test is not None and result.output is not None:
        from shrinkgpu.verify import write_regression_test

        test_file = write_regression_test(result.output, emit_test)
    if as_json:
        emit_json({**result.to_json(), "notes": notes + result.notes, "error": None, "exit_code": code,
                    "regression_test": str(test_file) if test_file else None})
    else:
        ratio = 100 * result.tokens_after / result.tokens_before if result.tokens_before else 0
        partial = " (partial: not verified)" if result.verified[1] == 0 else ""
        click.echo(
            f"wrote {result.output}{partial} ({result.tokens_before} -> {result.tokens_after} tokens, {ratio:.0f}%; "
            f"{result.candidates_tested} candidates in {result.seconds:.1f}s)"
        )
        if result.output.is_dir() or not result.command.startswith("python "):
            # a folder, ranks or variables the run needs: more than `python <file>`
            click.echo(f"run it with: {result.command}")
        click.echo(f"report: {result.report}")
        if result.jobs > 1 or result.where.executor != "local":
            from shrinkgpu.report import where_it_ran

            click.echo(f"ran on: {where_it_ran(result)}")
        if result.original_rate[0] < result.original_rate[1]:
            click.echo(
                f"flaky: in fresh interpreters the original reproduced in {describe_rate(*result.original_rate)}, "
                f"the result in {describe_rate(*result.verified)}"
            )
        if result.stopped:
            click.echo(f"stopped early: {result.stopped}")
        if test_file is not None:
            click.echo(f"regression test: {test_file}")
    sys.exit(code)


reduce_cmd.name = "reduce"


def _ray_cluster(config: ReduceConfig, executor: str, address, gpus_per_worker: float, cpus_per_worker: float,
                 workers, as_json: bool):
    """The connection to the cluster ``--executor ray`` names (None: the local executor),
    made before the reduction starts, so that a missing Ray or cluster is said at once."""
    if executor != "ray":
        source = click.get_current_context().get_parameter_source
        given = [f"--{name.replace('_', '-')}" for name in ("address", "workers", "gpus_per_worker", "cpus_per_worker")
                 if source(name) is click.core.ParameterSource.COMMANDLINE]
        if given:
            # (said, not ignored: a user who sized Ray workers believes the candidates run there)
            fail(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} for --executor ray; without it the "
                  "candidates run on this machine", EXIT_USAGE, as_json)
        return None
    if config.launch.ranks:
        fail("--executor ray runs one process per candidate; a script launched as torchrun's ranks runs with "
              "--executor local", EXIT_USAGE, as_json)
    from shrinkgpu.worker import RayCluster, RayOptions

    try:
        cluster = RayCluster(RayOptions(address=address, workers=workers, gpus_per_worker=gpus_per_worker,
                                        cpus_per_worker=cpus_per_worker))
    except RayUnavailable as exc:
        fail(str(exc), EXIT_USAGE, as_json)
    try:
        cluster.connect()
    except RayUnavailable as exc:
        fail(str(exc), EXIT_ERROR, as_json)
    return cluster


@cli.command("extract")
@script_argument
@args_argument
@module_option
@launch_options
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Where to write (default: <stem>.extracted.py beside SCRIPT).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None, help="Seconds per run.")
@root_option
@stdin_option
@sync_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def extract_cmd(script, script_args, module, nproc, hang_after, output, timeout, root, stdin_file, sync_launches,
                as_json) -> None:
    """Write the failing call of SCRIPT alone: a standalone script that rebuilds its arguments.

    Floating-point tensors are random with the same dtype, shape and strides, integer and
    bool tensors exact; if that does not fail the same way, every tensor is loaded from a
    .pt beside the script. The script is checked in a fresh interpreter.
    """
    from shrinkgpu.reducer import extract_call

    notes: list[str] = []
    try:
        config = _config(script, script_args, module, nproc, hang_after, timeout=timeout, root=root,
                         stdin=_stdin_bytes(stdin_file, notes), sync_launches=sync_launches)
        _first, result = extract_call(config, output)
    except ReduceError as exc:
        obs = exc.observation
        fail(str(exc), exc.exit_code, as_json,
              **({"signature": obs.signature.to_json()} if obs is not None and obs.signature else {}))
    if as_json:
        emit_json({"output": str(result.path), "data": str(result.data) if result.data else None,
                    "level": result.level, "lines": result.lines, "note": result.note,
                    "signature": result.signature.to_json(), "error": None, "exit_code": EXIT_OK})
    else:
        click.echo(f"wrote {result.path}" + (f" and {result.data.name}" if result.data else "")
                   + f" ({result.lines} lines, {result.level}): {result.signature.headline}")
        if result.note:
            click.echo(f"note: {result.note}")
    sys.exit(EXIT_OK)


@cli.command("ablate")
@click.argument("result", type=click.Path(path_type=Path))
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None, help="Seconds per run.")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Runs at once (default: half the cores, 4 at most).")
@click.option("--json", "as_json", is_flag=True, help="Print the comparisons as JSON.")
def ablate_cmd(result, timeout, jobs, as_json) -> None:
    """Compare RESULT (the x.min.py reduce wrote) again with one change at a time.

    The minimal case and the extracted call run with the changes `reduce` makes at its
    end (valid values, ignored targets, contiguous inputs, float32, one dtype, batch 1, another device,
    compile backends; cuDNN off and deterministic algorithms for a GPU case), each once
    in a fresh interpreter, and the bug's kind is read from the outcomes. Writes
    nothing. Exits 3 when the minimal case does not fail the recorded way here.
    """
    from shrinkgpu.ablate_case import NotReproducedHere, ablate_case
    from shrinkgpu.verify import CaseError

    def show(o) -> None:
        if not as_json:
            detail = f": {o.error}" if o.error else (f" -> {o.output}" if o.output else "")
            click.echo(f"{o.change} ({o.subject}): {o.result}{detail}")

    try:
        ablated = ablate_case(result, timeout=timeout, jobs=jobs, on_outcome=show)
    except CaseError as exc:
        fail(str(exc), EXIT_USAGE, as_json)
    except NotReproducedHere as exc:
        fail(str(exc), EXIT_NOT_REPRODUCED, as_json)
    except KeyboardInterrupt:
        fail("interrupted", _interrupt_code(), as_json)
    if as_json:
        emit_json({"ablation": ablated.to_json(), "error": None, "exit_code": EXIT_OK})
    else:
        if not ablated.outcomes:
            click.echo("no change applies to this case")
        if ablated.stage:
            click.echo(ablated.stage)
        click.echo(f"the kind: {ablated.kind}: {ablated.reason}")
        if ablated.hint:
            click.echo(f"hint: {ablated.hint}")
    sys.exit(EXIT_OK)


@cli.command("verify")
@click.argument("result", type=click.Path(path_type=Path))
@click.option("--original/--no-original", default=True, show_default=True,
              help="Also run the original script (with its arguments) from the case file.")
@click.option("--command", "command", default=None, metavar="CMD",
              help="A shell command that runs a representative part of the flow; it must exit 0.")
@click.option("--count", default=None, metavar="REGEX",
              help="Count processed items in the original's output (the largest number the regex's group "
                   "captures, or its matches) and warn if the fixed original processes fewer than when it failed.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None, help="Seconds per run.")
@click.option("--nproc-per-node", "nproc", type=click.IntRange(min=1), default=None, metavar="N",
              help="Run the minimal case and the original as N ranks under torchrun (default: as the case file "
                   "says the reduction ran them).")
@click.option("--emit-test", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a pytest file that fails while the minimal case still reproduces the bug.")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def verify_cmd(result, original, command, count, timeout, nproc, emit_test, as_json) -> None:
    """After a fix, check RESULT (the x.min.py reduce wrote) in fresh interpreters.

    Runs the minimal case, its neighbours (the failing index at -1, 0, C-1, C and
    ignore_index; a short and the last batch of a loader), the extracted call, the
    original script and --command, without diagnostic variables. Each is fixed,
    rejected (by the program's own check), still failing or failing differently.
    Exits 0 when every check passes, 4 otherwise.
    """
    from shrinkgpu.verify import CaseError, verify, write_regression_test

    def show(check) -> None:
        if not as_json:
            mark = "info" if check.informative else ("ok  " if check.ok else "FAIL")
            detail = f": {check.detail}" if check.detail else ""
            click.echo(f"{mark} {check.name}: {check.outcome} (expected {check.expectation}){detail}")

    try:
        report = verify(result, original=original, command=command, count=count, timeout=timeout, nproc=nproc,
                        on_check=show)
        test_file = write_regression_test(result, emit_test) if emit_test is not None else None
    except CaseError as exc:
        fail(str(exc), EXIT_USAGE, as_json)
    except KeyboardInterrupt:
        fail("interrupted", _interrupt_code(), as_json)
    code = EXIT_OK if report.ok else EXIT_STILL_FAILING
    if as_json:
        emit_json({**report.to_json(), "regression_test": str(test_file) if test_file else None,
                    "exit_code": code, "error": None if report.ok else "not every check passed"})
    else:
        for warning in report.warnings:
            click.echo(f"WARN {warning}")
        failing = [c.name for c in report.checks if not c.ok]
        click.echo("all checks pass" if report.ok else "not fixed: " + ("; ".join(failing) or "see the warnings"))
        if test_file is not None:
            click.echo(f"regression test: {test_file}")
    sys.exit(code)


@cli.command("check")
@click.argument("original", type=click.Path(dir_okay=False))
@click.argument("candidate", type=click.Path(dir_okay=False))
@args_argument
@click.option("--keep-error", "-k", default=None, metavar="REGEX",
              help="Regular expression the first error must match, as for reduce.")
@click.option("--family", "family_name", default=None, metavar="FAMILY", type=click.Choice([f.key for f in Family]),
              help="The first error must be a face of this family, as for reduce.")
@click.option("--strictness", type=click.Choice([s.value for s in Strictness]), default="strict", show_default=True,
              help="How much may change at the operator, as for reduce.")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Fresh-interpreter runs of each: a candidate of an original that always fails must fail the same "
                   "way in every one; for a flaky original (measured over 10 runs), a sequential test of the rates "
                   "decides.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None,
              help="Seconds per run (default: calibrated from the original's run).")
@root_option
@stdin_option
@sync_option
@click.option("--no-cache", is_flag=True,
              help="Run the original again, even if an earlier check kept what it showed (in the user's cache "
                   "directory, keyed by its text and these options).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def check_cmd(original, candidate, script_args, keep_error, family_name, strictness, runs, timeout, root, stdin_file,
              sync_launches, no_cache, as_json) -> None:
    """Is CANDIDATE the same bug as ORIGINAL, by the rule a reduction uses?

    Both run in fresh interpreters with the arguments after `--`. Same bug: the same
    class, message (numbers aside) and operator, with the same dtype, shape and stride at
    it (as --strictness allows), as often as the original fails. Exits 0 when it is the
    same bug, 3 when not (saying which part differs: class, message, operator, dtype,
    shape, stride, device, arguments, keep-error, family, no error, timeout, rate), 2
    when ORIGINAL does not fail as asked.
    """
    from shrinkgpu.check import CheckConfig, CheckError, check, default_cache

    notes: list[str] = []
    try:
        config = CheckConfig(
            original=Path(original), candidate=Path(candidate), args=tuple(script_args), keep_error=keep_error,
            family=family_by_name(family_name) if family_name else None, strictness=Strictness(strictness),
            runs=runs, timeout=timeout, root=root, env=dict(os.environ), stdin=_stdin_bytes(stdin_file, notes),
            sync_launches=sync_launches, cache=None if no_cache else default_cache(),
        )
        answer = check(config, on_stage=lambda message: click.echo(f"shrinkgpu: {message}", err=True))
    except CheckError as exc:
        fail(str(exc), exc.exit_code, as_json)
    except OSError as exc:
        fail(str(exc), EXIT_USAGE, as_json)
    except KeyboardInterrupt:
        fail("interrupted", _interrupt_code(), as_json)
    code = EXIT_OK if answer.same_bug else EXIT_NOT_REPRODUCED
    if as_json:
        emit_json({**answer.to_json(), "notes": notes, "error": None, "exit_code": code})
    else:
        click.echo(("same bug: " if answer.same_bug else "not the same bug: ") + answer.detail)
    sys.exit(code)


@cli.command("versions")
@click.argument("case", required=False, type=click.Path(dir_okay=False))
@args_argument
@click.option("--try", "tries", multiple=True, metavar="NAME==VERSION",
              help="A version to run in (repeatable; any package: torch==2.12.0, numpy==1.26.4).")
@click.option("--range", "span", nargs=2, default=None, metavar="NAME FROM..TO",
              help="Bisect the releases from FROM to TO (torch 2.10.0..2.15.0), or one nightly per date "
                   "(torch nightly:2026-09-01..2026-10-15) where an index pip is configured with serves them: the "
                   "first where it fails the same way and the last where it does not.")
@click.option("--keep-error", "-k", default=None, metavar="REGEX",
              help="With a script instead of a case file: the bug, as for check.")
@click.option("--family", "family_name", default=None, metavar="FAMILY", type=click.Choice([f.key for f in Family]),
              help="With a script: the bug's family, as for check.")
@click.option("--strictness", type=click.Choice([s.value for s in Strictness]), default="strict", show_default=True,
              help="With a script: how much may change at the operator (a case file says its own).")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True,
              help="Fresh-interpreter runs per version, as for check.")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=None,
              help="Seconds per run (default: twice the case's, at least 120).")
@root_option
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the environments are kept (default: $SHRINKGPU_VERSIONS_CACHE, else "
                   "~/.cache/shrinkgpu/versions).")
@click.option("--cache-max-gb", type=click.FloatRange(min=0), default=None,
              help="Size the cache is trimmed to after each call, the environments used longest ago first "
                   "(default 30).")
@click.option("--clear-cache", is_flag=True, help="Empty the cache of environments and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
def versions_cmd(case, script_args, tries, span, keep_error, family_name, strictness, runs, timeout, root, cache_dir,
                 cache_max_gb, clear_cache, as_json) -> None:
    """Which release broke it: run CASE in environments that differ from yours in one version.

    CASE is a case file (x.min.json, or the x.min.py beside it): its minimal case and its
    extracted call run in each version; or a script with -k/--family, judged against its
    first error here. Each environment is your Python with the other version (and what it
    needs that differs) layered in front of your packages, built once with uv from the
    indexes your pip is configured with, and kept. Each version is the same bug (by check's
    rule), another error, passes, or could not be installed. Exits 0 with the answer.
    """
    from shrinkgpu.layout import case_file
    from shrinkgpu.versions import Cache, VersionsConfig, VersionsError, default_cache_dir, versions

    cache = Cache(cache_dir or default_cache_dir())
    if cache_max_gb is not None:
        cache.max_bytes = int(cache_max_gb * 2**30)
    if clear_cache:
        freed = cache.clear()
        if as_json:
            emit_json({"cleared": str(cache.root), "freed_bytes": freed, "error": None, "exit_code": EXIT_OK})
        else:
            click.echo(f"emptied {cache.root} ({freed / 2**20:.0f} MiB)")
        sys.exit(EXIT_OK)
    if case is None:
        fail("give a case file (x.min.json) or a script with -k/--family", EXIT_USAGE, as_json)
    path = Path(case)
    as_case = path.suffix == ".json" or (keep_error is None and family_name is None and case_file(path).is_file())
    try:
        config = VersionsConfig(
            case=path if as_case else None, script=None if as_case else path, args=tuple(script_args),
            keep_error=keep_error, family=family_by_name(family_name) if family_name else None,
            strictness=Strictness(strictness), tries=tuple(tries), span=tuple(span) if span else None, runs=runs,
            timeout=timeout, root=root, cache=cache, env=dict(os.environ))
        answer = versions(config, on_stage=lambda message: click.echo(f"shrinkgpu: {message}", err=True))
    except VersionsError as exc:
        fail(str(exc), exc.exit_code, as_json)
    except KeyboardInterrupt:
        fail("interrupted", _interrupt_code(), as_json)
    if as_json:
        emit_json({**answer.to_json(), "error": None, "exit_code": EXIT_OK})
    else:
        from shrinkgpu.versions import version_table

        for row in version_table(answer):
            click.echo(" | ".join(row))
        click.echo(answer.sentence)
        if answer.report is not None:
            click.echo(f"report: {answer.report}")
    sys.exit(EXIT_OK)


@cli.command("mcp")
def mcp_cmd() -> None:
    """Serve these commands to a coding agent: an MCP server on stdin and stdout.

    Tools run, reduce, extract, verify, ablate, check and versions, each answering with the JSON
    the command prints with --json; a reduction reports its progress, and a cancelled
    one stops and keeps its best result, as Ctrl-C does. With wait=false a tool answers
    at once with a job id, for the tools job (its progress, then its answer) and cancel
    (docs/agents.md). Needs the agents extra: pip install 'shrinkgpu[agents]'.
    """
    try:
        from shrinkgpu.agents.server import serve
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "anyio", "pydantic"):
            raise
        fail(f"the MCP server needs the mcp package ({exc.name} is missing): pip install 'shrinkgpu[agents]'",
              EXIT_USAGE, False)
    serve()


def main(argv: list[str] | None = None) -> None:
    """The console script: click's own errors (exit 2) also print JSON under ``--json``,
    SIGTERM/SIGHUP stop a reduction the way Ctrl-C does, and so does the death of the
    MCP server that started it."""
    argv = sys.argv[1:] if argv is None else argv
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    from shrinkgpu.agents.calls import PARENT_VAR, stop_with_parent

    parent = os.environ.pop(PARENT_VAR, None)
    if parent is not None:
        # Started by `shrinkgpu mcp`: stop as Ctrl-C does when it dies (the variable is
        # the server's; the script never sees it).
        stop_with_parent(parent)
    before = argv[: argv.index("--")] if "--" in argv else argv
    wants_json = "--json" in before
    if wants_json:
        json_stdout()
    try:
        cli.main(args=argv, prog_name="shrinkgpu", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        if wants_json:
            emit_json({"error": exc.format_message(), "exit_code": exc.exit_code})
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        if wants_json:
            emit_json({"error": "interrupted", "exit_code": _interrupt_code()})
        sys.exit(_interrupt_code())
    except KeyboardInterrupt:
        sys.exit(_interrupt_code())
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
