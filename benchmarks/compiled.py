"""This checkout as the STOMP_CONFORMANCE_MYPYC=1 build (setup.py) for the benchmarks that
compare it with pure Python, built by fuzz/coverage_build.py: a wheel built and unpacked
into a folder. With that folder first on PYTHONPATH and as the working directory,
`python -m conformance` is the compiled package. With `coverage`, the build whose compiled
modules report their coverage to libFuzzer (the atheris harnesses only)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fuzz"))
from coverage_build import BuildError, build  # noqa: E402

__all__ = ["ROOT", "BuildError", "build_compiled"]


def build_compiled(work: Path, *, coverage: bool = False) -> Path:
    """Build into `work` (about a minute); the folder to put on PYTHONPATH."""
    print(f"building this checkout with mypyc{' and clang coverage' if coverage else ''} "
          "(about a minute)...", file=sys.stderr, flush=True)
    return build(work, coverage=coverage)
