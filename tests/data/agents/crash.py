"""A proposer that crashes: ``--propose-with`` must skip it and go on."""

import sys

sys.stdin.read()
raise RuntimeError("the model server is down")
