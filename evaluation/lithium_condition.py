"""Lithium interestingness module: hands the candidate to the benchmark's shared oracle.

Lithium imports this file (``lithium /abs/path/lithium_condition.py WRAPPER TESTCASE``)
and calls ``interesting(["WRAPPER", "TESTCASE"], temp_prefix)``.  WRAPPER is the
executable ``interesting.sh`` the benchmark writes; it exits 0 iff the candidate is
interesting.  Only the standard library: this runs inside lithium's own environment.
"""

from __future__ import annotations

import subprocess


def interesting(cli_args, temp_prefix):  # noqa: ARG001 - lithium's signature
    return subprocess.run(list(cli_args), stdin=subprocess.DEVNULL, check=False).returncode == 0
