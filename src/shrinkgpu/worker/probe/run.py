"""One run: the user's script, watched, and the observation written for the reducer."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from shrinkgpu.worker.probe.children import Children, Zygote, child_setup, install_child, watch_children, watched_here
from shrinkgpu.worker.probe.collectives import watch_collectives
from shrinkgpu.worker.probe.compiled import (
    keep_compiled_call,
    module_source,
    stay_eager,
    watch_compile_options,
    watch_module_construction,
)
from shrinkgpu.worker.probe.library_cut import library_cut
from shrinkgpu.worker.probe.loading import keep_loading_call
from shrinkgpu.worker.probe.loops import LoopClock, LoopCounter
from shrinkgpu.worker.probe.objects import saved_objects
from shrinkgpu.worker.probe.ops import RAISED_KEPT, ShapeLog, keep_module_check, keep_torch_check, watch_torch_calls
from shrinkgpu.worker.probe.process import (
    dump_stack_on_crash,
    environment_facts,
    flush_streams,
    fresh_process,
    loaded_modules,
    prepare_process,
    run_exit_handlers,
)
from shrinkgpu.worker.probe.recorder import Recorder, exception_chain, message_of, record_chain, record_suppressed
from shrinkgpu.worker.probe.sizes import observed_sizes
from shrinkgpu.worker.probe.state import StateSaver, file_stamps, save_written_files
from shrinkgpu.worker.probe.watchers import watch_argparse, watch_config_loads, watch_reads, watch_seeding
from shrinkgpu.worker.protocol import FIRST_ERROR_SUFFIX, ProbeReport, RunRequest, RunStatus, run_length

# Exit statuses the probe itself uses when the user's script could not even start.
EXIT_PROBE_FAILURE = 70


def run(request: RunRequest, *, forked: bool) -> int:
    """Run the request's script; write the observation; return the exit status."""
    started = time.perf_counter()
    # what the report says beyond the fields every run fills in: the watch's answers
    obs: dict[str, Any] = {}
    roots = tuple(os.path.abspath(r) for r in request.roots)
    watch = request.watch
    recorder = Recorder(roots)
    raised_calls: list[dict[str, Any]] = []
    state_saved: dict[str, Any] = {}
    outputs: list[str] = []
    try:
        # (before anything of the run: the zygote is what the server handed this process)
        zygote = Zygote.start(fresh_process, watch.zygote) if watch.zygote and forked else None
        prepare_process(request, forked=forked)
        if request.crash_log:
            dump_stack_on_crash(request.crash_log)
        script = os.path.abspath(request.script)
        if request.capture_ops:
            mode, shapes = _watch_torch(watch, recorder, obs, raised_calls, outputs)
        else:
            mode, shapes = None, None
        if watch.eager:
            stay_eager()
        if watch.collectives:
            watch_collectives(watch.collectives, roots, recorder.rel)
        # The processes the script starts itself are watched too (probe/children.py).
        children = Children(request, roots, recorder.rel, zygote)
        watch_children(children)
        install_child(request, child_setup)
        watched_here(recorder)
        parses: list[dict[str, Any]] = []
        seed_sites: list[list[Any]] = []
        loads: list[dict[str, Any]] = []
        watch_argparse(recorder, parses)
        watch_config_loads(recorder, loads)
        watch_seeding(recorder, seed_sites)
        clock = None
        counter: LoopCounter | None = None
        if watch.count_loops:
            counter = recorder.loops = LoopCounter(roots, arguments=bool(watch.cut))
            clock = LoopClock(roots, recorder.rel)
        elif watch.state is not None:
            # (one counter at a time: a run that counts loops saves no state)
            # what the working directory held before the script ran: the files written
            # before the failing iteration are saved with the state
            counter = StateSaver(roots, recorder.rel, watch.state, state_saved, file_stamps())
        if counter is not None:
            counter.install()
        if clock is not None:
            clock.start()
    except BaseException as exc:  # the probe failed before the script ran
        traceback.print_exc()
        _write(request.observation, ProbeReport(status=RunStatus.PROBE_ERROR, exit_code=EXIT_PROBE_FAILURE,
                                                probe_error=message_of(exc)))
        return EXIT_PROBE_FAILURE

    # what the working directory held before the script ran: the files it writes are
    # copied when it ends (``Watch.written``)
    stamps = file_stamps() if watch.written else None
    reads: list[str] = []
    watch_reads(roots, reads)
    module = request.module
    code = 0
    status = RunStatus.OK
    try:
        if mode is not None:
            with mode:
                _run_main(script, module, counter)
        else:
            _run_main(script, module, counter)
    except SystemExit as exc:
        code = _exit_code(exc)
        if code != 0:
            obs["failed_at"] = time.time()
            status = RunStatus.EXIT
            obs["chain"] = record_chain(exc, recorder)
            obs["suppressed"] = record_suppressed(exc, recorder)
            _write_first_error(request.observation, watch, obs, recorder, status, code, raised_calls, started)
    except BaseException as exc:
        obs["failed_at"] = time.time()
        code = 1
        status = RunStatus.EXCEPTION
        obs["chain"] = record_chain(exc, recorder)
        obs["suppressed"] = record_suppressed(exc, recorder)
        _write_first_error(request.observation, watch, obs, recorder, status, code, raised_calls, started)
        if watch.keep_raised and len(raised_calls) < RAISED_KEPT:
            _keep_raised_calls(exc, roots, recorder, (watch.keep_raised, raised_calls))
        _print_traceback(exc, script)
        obs.update(_at_the_error(exc, watch, roots, recorder,
                                 time.perf_counter() - started - (obs.get("startup") or 0.0), obs.get("startup")))
    if clock is not None:
        obs["loop_time"] = clock.stop()
    obs["torch_errors"] = recorder.errors
    if outputs:
        obs["output"] = outputs[0]
    if shapes is not None:
        obs["op_shapes"] = shapes.of({(r.get("op") or {}).get("name") for r in recorder.errors} - {None})
    if watch.keep_raised:
        obs["raised_calls"] = raised_calls
    if watch.state is not None:
        obs["state"] = state_saved or None
    if watch.written:
        obs["written"] = (save_written_files(stamps, watch.written) if stamps is not None else
                          {"files": [], "files_error": "the working directory holds too many files to walk"})
    obs["parses"] = parses
    obs["loads"] = loads
    obs["reads"] = sorted(set(reads))
    obs["seed_sites"] = sorted({(f, n, bool(inner)) for f, n, inner in seed_sites})
    obs["duration"] = time.perf_counter() - started
    if watch.collect_modules:
        obs["modules"] = loaded_modules(roots)
    if watch.collect_env:
        obs["environment"] = environment_facts()
    obs["children"] = children.started
    flush_streams()
    _write(request.observation, ProbeReport.from_json({**obs, "status": status, "exit_code": code}))
    run_exit_handlers()
    return code


def _keep_raised_calls(exc: BaseException, roots, recorder: Recorder, raised: tuple[str, list]) -> None:
    """What the mode could not keep as the error was raised: a module's own check that
    raised before any operator ran, the module of torch around a torch function whose
    check raised (the mode kept the function), a compiled function's call."""
    for member in exception_chain(exc):
        seen = recorder.by_id.get(id(member))
        if seen is None:
            keep_torch_check(member.__traceback__, roots, raised, module_source)
        elif (seen.get("op") or {}).get("name"):
            keep_module_check(member.__traceback__, roots, raised, seen["op"]["name"], seen.get("call"), module_source)
    keep_compiled_call(exc.__traceback__, roots, raised)
    for member in exception_chain(exc):
        before = len(raised[1])
        keep_loading_call(member.__traceback__, roots, raised)
        if len(raised[1]) > before:
            break


def _watch_torch(watch, recorder: Recorder, obs: dict[str, Any], raised_calls: list, outputs: list):
    """torch imported (timed: the pace of this machine now, ``obs["startup"]``, when this
    process imports it) and its calls watched: (the mode, the shape log or None)."""
    loaded = "torch" in sys.modules
    before = time.perf_counter()
    import torch  # noqa: F401  (the mode needs it; the script imports it anyway)

    if not loaded:
        # Run lengths are decided in units of it: a busy machine slows the import and
        # the script alike.
        obs["startup"] = time.perf_counter() - before
    shapes = ShapeLog() if watch.op_shapes else None
    raised = (watch.keep_raised, raised_calls) if watch.keep_raised else None
    output_of = (watch.output_of, outputs) if watch.output_of else None
    mode = watch_torch_calls(recorder.note, watch.capture, shapes, raised, output_of)
    if raised is not None:
        watch_compile_options()
    if raised is not None or watch.cut:
        # (a module in the library's saved call is written as it was built, too)
        watch_module_construction()
    return mode, shapes


def _write_first_error(path: str, watch, obs: dict[str, Any], recorder: Recorder, status: RunStatus, code: int,
                       raised_calls: list, started: float) -> None:
    """The first error as it left the script, beside the observation, before anything
    slow (the raised calls' arguments, the data objects, the sizes are saved next): a
    run stopped by its time limit in that work (a first run cut by --max-time) still
    says which error it reached (``Observation.raised_before_timeout``).  Only for a
    run whose watch asks for that work (the original's first run): a candidate's report
    follows its error at once."""
    if not (watch.keep_raised or watch.save_objects or watch.cut or watch.sizes or watch.written
            or watch.collect_modules):
        return
    try:
        _write(path + FIRST_ERROR_SUFFIX, ProbeReport.from_json({
            **obs, "status": status, "exit_code": code, "torch_errors": recorder.errors,
            "raised_calls": list(raised_calls), "duration": time.perf_counter() - started}))
    except Exception:
        pass  # an offer: the run's own report comes at its end as always


def _at_the_error(exc: BaseException, watch, roots, recorder: Recorder, elapsed: float,
                  startup: float | None) -> dict[str, Any]:
    """What the watch asks to be read at the first error, while its frames are alive:
    the library's call into the user's code, the data objects, the sizes the failing
    frames read.  Each is an offer: its failure must not change the run.  ``elapsed``:
    the script's own time so far (after torch's import, which took ``startup``)."""
    out: dict[str, Any] = {}
    if watch.cut:
        try:
            root = recorder.by_id.get(id(exception_chain(exc)[-1])) or {}
            out["cut"] = library_cut(exc, roots, watch.cut, autocast=root.get("autocast", ()))
        except Exception:
            out["cut"] = None
    if watch.save_objects:
        try:
            after = watch.save_results_after
            out["saved_objects"] = saved_objects(exc, roots, watch.save_objects,
                                                 results=after is not None and run_length(elapsed, startup) >= after)
        except Exception:
            out["saved_objects"] = []
    if watch.sizes:
        try:
            out["sizes"] = observed_sizes(exc, roots, recorder.rel)
        except Exception:
            out["sizes"] = []
    return out


def _run_main(path: str, module: str | None = None, counter: LoopCounter | None = None) -> None:
    """Execute ``path`` as ``__main__`` the way ``python path`` does (or, with
    ``module``, the way ``python -m module`` does: package-relative imports work);
    with ``counter``, its loops counted (the import system compiles the modules).

    Not ``runpy.run_path``: it rewrites ``sys.argv[0]`` to the path it is given, while
    Python keeps argv[0] as typed and makes only ``__file__`` absolute.
    """
    if module:
        import runpy

        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    import builtins
    import importlib.machinery
    import types

    with open(path, "rb") as fh:
        source = fh.read()
    code = counter.compile(source, path) if counter is not None else compile(source, path, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__cached__ = None
    module.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    module.__spec__ = None
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    exec(code, module.__dict__)


def _print_traceback(exc: BaseException, script: str) -> None:
    """Print the traceback Python would print, without the probe's own frames on top."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    try:
        traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
    except Exception:
        pass


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    try:
        print(exc.code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _write(path: str, report: ProbeReport) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(report.to_json(), fh, default=str)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> None:
    """The fresh-interpreter path (see the supervisor's ``FRESH_COMMAND``)."""
    argv = sys.argv[1:] if argv is None else argv
    request = RunRequest.from_json(json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    if request.per_rank:  # one of torchrun's ranks: a report of its own
        request = request.for_rank(int(os.environ.get("RANK", "0")))
    code = run(request, forked=False)
    # Like the fork path: no waiting for non-daemon threads the script left behind;
    # the run is over once the script's main code returned or raised.
    os._exit(code)
