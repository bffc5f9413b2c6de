"""This checkout as the STOMP_CONFORMANCE_MYPYC=1 build (setup.py) for the benchmarks that
compare it with pure Python: a wheel built and unpacked into a folder. With that folder
first on PYTHONPATH and as the working directory, `python -m conformance` is the compiled
package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class BuildError(Exception):
    """The compiled build failed (one line: a C compiler and Python's headers are needed)."""


def build_compiled(work: Path) -> Path:
    """Build into `work` (about a minute); the folder to put on PYTHONPATH."""
    print("building this checkout with mypyc (about a minute)...", file=sys.stderr, flush=True)

    def pip(*args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "pip", "-q", "--disable-pip-version-check",
                               *args], capture_output=True, text=True,
                              env={**os.environ, "STOMP_CONFORMANCE_MYPYC": "1"})
        if done.returncode:
            lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
            raise BuildError(f"`pip {args[0]}` failed: {lines[-1][:200]}")

    pip("wheel", "--no-deps", "-w", str(work), str(ROOT))
    site = work / "site"
    pip("install", "--no-deps", "--target", str(site), *map(str, work.glob("*.whl")))
    check = subprocess.run([sys.executable, "-c", "import conformance.codec.parser as m; "
                            "print(m.__file__)"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(site)}, cwd=site)
    if not check.stdout.strip().endswith(".so"):
        raise BuildError(f"the wheel's parser is not compiled: {check.stdout or check.stderr}")
    return site
