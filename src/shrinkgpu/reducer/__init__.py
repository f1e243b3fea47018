"""The library entry point: ``reduce(config)``, ``run_once``/``run_observed`` (``shrinkgpu
run``) and ``extract_call`` (``shrinkgpu extract``).

A reduction is a ``Reduction`` (session.py) whose ``run`` reads like its phase table;
each phase is a function in a module of its own: ``original`` (the original and the
target), ``facts`` (the program and the facts of its run), ``pool`` (the workers:
plan, rate, calibration, compile contrast), ``extraction`` (the failing call alone),
``start`` (the saved state or a cut the search starts from), ``search`` (the core over
the passes, and the rebase), ``verification`` (the checks after the search),
``ablate`` (one change at a time) and ``result`` (what is written).  Around them:
``config`` (what is asked, and the errors that stop it), ``context`` (what every phase
reads), ``events`` (what a reduction says), ``setup`` (the spec, the program's text,
the output refused), ``first_run`` (the original as the user runs it), ``state``
(where the state is saved), ``resume`` (what ``--resume`` keeps) and ``stats`` (per
pass).
"""

from shrinkgpu.limits import calibrated_timeout, checks_reserve
from shrinkgpu.reducer.config import NotReproduced, ReduceConfig, ReduceError
from shrinkgpu.reducer.extraction import extract_call
from shrinkgpu.reducer.facts import facts_of, hot_loops, local_files
from shrinkgpu.reducer.first_run import FirstRun, launch_variable, run_observed, run_once
from shrinkgpu.reducer.pool import WorkerPlan, pin_variable_for, plan_jobs, run_threads
from shrinkgpu.reducer.session import Reduction, reduce
from shrinkgpu.reducer.setup import main_source, spec_for
from shrinkgpu.results import ReductionResult

__all__ = [
    "FirstRun",
    "NotReproduced",
    "ReduceConfig",
    "ReduceError",
    "Reduction",
    "ReductionResult",
    "WorkerPlan",
    "calibrated_timeout",
    "checks_reserve",
    "extract_call",
    "facts_of",
    "hot_loops",
    "launch_variable",
    "local_files",
    "main_source",
    "pin_variable_for",
    "plan_jobs",
    "reduce",
    "run_observed",
    "run_once",
    "run_threads",
    "spec_for",
]
