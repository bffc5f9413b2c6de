"""The code is type-clean (mypy strict) and lint-clean (ruff): both ship in the test extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def check(*command: str) -> None:
    done = subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict() -> None:
    check("mypy")


def test_ruff() -> None:
    check("ruff", "check", "conformance", "tests", "benchmarks")
