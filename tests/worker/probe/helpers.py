"""How the probe tests run a script: in the fork server of tests/worker/probe/conftest.py,
watched for what a pass needs beyond its first error.
"""

from __future__ import annotations

import textwrap

from shrinkgpu.worker import Watch


def watched(runner, text: str, **watch):
    return runner.run({"s.py": textwrap.dedent(text)}, timeout=60, watch=Watch(**watch))
