"""The architecture's layering, as contracts in pyproject.toml checked by import-linter."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    result = subprocess.run([lint, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout
