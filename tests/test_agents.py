"""shrinkgpu.agents (the package): importing it costs nothing and brings no SDK; only
``agents.server`` imports ``mcp`` (tests/agents/ tests its modules)."""

from __future__ import annotations

import subprocess
import sys


def test_the_package_imports_no_sdk():
    code = ("import sys, shrinkgpu.agents; "
            "loaded = [m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'anyio'))]; "
            "print(loaded); sys.exit(1 if loaded else 0)")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
