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


def test_core_imports_nothing_of_ours_and_no_torch():
    import subprocess
    import sys

    code = (
        "import sys, shrinkgpu.core; "
        "bad = [m for m in sys.modules if m.startswith(('torch', 'libcst', 'shrinkgpu.worker', "
        "'shrinkgpu.syntax', 'shrinkgpu.passes'))]; print(bad); sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
