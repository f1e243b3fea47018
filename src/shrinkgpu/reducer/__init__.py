"""The library entry point: ``reduce(config)``, ``run_once``/``run_observed`` (``shrinkgpu
run``) and ``extract_call`` (``shrinkgpu extract``).

A reduction is a ``Reduction`` (session.py): its phases are methods, its state is on
``self``.  Around it, one module per job: ``config`` (what is asked, and the errors that
stop it), ``setup`` (the spec, the program's text, the output refused), ``first_run``
(the original as the user runs it), ``facts`` (what a run tells the passes), ``workers``
(jobs, GPUs, threads, calibration), ``budget`` (where the time goes), ``verification``
(the result in fresh interpreters) and ``stats`` (per pass).
"""

from shrinkgpu.reducer.budget import checks_reserve, hot_loops
from shrinkgpu.reducer.config import NotReproduced, ReduceConfig, ReduceError
from shrinkgpu.reducer.extract_only import extract_call
from shrinkgpu.reducer.facts import facts_of, local_files
from shrinkgpu.reducer.first_run import FirstRun, launch_variable, run_observed, run_once
from shrinkgpu.reducer.session import Reduction, reduce
from shrinkgpu.reducer.setup import main_source, spec_for
from shrinkgpu.reducer.workers import WorkerPlan, calibrated_timeout, pin_variable_for, plan_jobs, run_threads
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
