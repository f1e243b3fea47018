"""What runs inside a candidate process: the user's script, watched.

The probe makes the process look to the script exactly like ``python SCRIPT ARGS`` run
from the user's directory (argv, cwd, ``sys.path[0]``, ``__main__``), runs it under a
``TorchFunctionMode`` that notes every torch call that raises, and writes what it saw
as JSON for the reducer.  It is used two ways:

* forked from the supervisor, which already imported torch and the script's libraries
  (``run(request, forked=True)``);
* as ``python -c "...probe.main()" REQUEST.json`` in a fresh interpreter.

One module per job: ``run`` (the run itself), ``process`` (the process the script
sees), ``recorder`` and ``ops`` (the first error and the torch call that raised it),
``loops``, ``watchers`` (argparse, configuration reads, seeding, files read),
``library_cut``, ``objects`` (data objects saved at the first error), ``literals``
and ``paths``.  The request it reads is ``worker.protocol.RunRequest``.

It must import nothing heavy at module level: in the fresh case torch is imported by
the script's own first ``import torch`` timing-wise, here just before it.
"""

from shrinkgpu.worker.probe.process import THREAD_VARIABLES, disown_finalizers, limit_threads
from shrinkgpu.worker.probe.run import main, run

__all__ = ["THREAD_VARIABLES", "disown_finalizers", "limit_threads", "main", "run"]
