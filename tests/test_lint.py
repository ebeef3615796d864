"""The code base is ruff-clean (configuration in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", str(REPO)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
