"""What the libraries users import do to a fork server: threads at import, and whether
those threads stop at a fork.

    python -m evaluation.fork_survey            # a markdown table on stdout

Each library is imported in its own fresh interpreter.  The table shows the threads
running after the import (names as the kernel or ``threading`` knows them), those left
after one fork for nothing (``forksafety.fork_hazard`` does exactly that), whether the
CUDA driver library got loaded, and what ``fork_hazard`` concludes.  A library that is not
installed is listed as such.  docs/executors.md records a run.
"""

from __future__ import annotations

import json
import subprocess
import sys

LIBRARIES = [
    ("numpy", "import numpy"),
    ("torch", "import torch"),
    ("torch + torch.cuda.is_available()", "import torch; torch.cuda.is_available()"),
    ("scipy", "import scipy.linalg, scipy.sparse"),
    ("pandas", "import pandas"),
    ("matplotlib", "import matplotlib.pyplot"),
    ("tensorboard", "import torch.utils.tensorboard"),
    ("tokenizers", "import tokenizers"),
    ("transformers", "import transformers, transformers.models.bert.modeling_bert"),
    ("pytorch_lightning", "import pytorch_lightning"),
    ("sklearn", "import sklearn"),
]

PROBE = """\
import json, os, sys, time
started = time.perf_counter()
try:
    exec(sys.argv[1])
except ImportError as exc:
    print(json.dumps({"missing": str(exc)}))
    raise SystemExit(0)
seconds = time.perf_counter() - started
from shrinkgpu.worker.forksafety import fork_hazard, loaded_driver, threads
before = threads()
driver = loaded_driver()
hazard = fork_hazard()
after = threads()
print(json.dumps({"seconds": seconds, "before": before, "after": after, "driver": driver,
                  "hazard": hazard, "modules": len(sys.modules)}))
"""


def survey(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, code], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    print("| import | modules | threads after import | threads after a fork for nothing | CUDA driver loaded "
          "| fork_hazard |")
    print("|---|---|---|---|---|---|")
    for name, code in LIBRARIES:
        row = survey(code)
        if "missing" in row or "error" in row:
            print(f"| {name} | not installed | | | | |" if "missing" in row
                  else f"| {name} | failed: {row['error']} | | | | |")
            continue
        before = f"{len(row['before'])} ({', '.join(row['before'][1:]) or 'main only'})"
        after = f"{len(row['after'])}"
        print(
            f"| {name} | {row['modules']} | {before} | {after} | {row['driver'] or 'no'} "
            f"| {row['hazard'] or 'none: forks'} |"
        )


if __name__ == "__main__":
    main()
