"""The coverage build: the package's mypyc modules (setup.py's COMPILED: the codec, the parser
target's readings) compiled by clang with SanitizerCoverage, so that libFuzzer counts their
edges and comparisons itself, at the speed of C, instead of atheris tracing Python source.
Only the codec's functions are instrumented (an allowlist): its coverage is what guides the
harnesses, not that of their own checks or of the broker's modules compiled alongside.

    python fuzz/coverage_build.py DIR       # about a minute; needs clang and Python's headers
    PYTHONPATH=DIR/site python fuzz/parser.py [libFuzzer flags] [corpus dirs]

DIR/site holds the package and LIBFUZZER, libFuzzer from the same clang's compiler-rt as a
shared library: the compiled modules call libFuzzer's hooks, so it must be loaded, with its
symbols global, before any of them (fuzz/_harness.py does that when it finds the file
beside the package; atheris then uses it). Only the harnesses use this build: its modules
cannot be imported without libFuzzer.

`build(work, coverage=False)` is the plain mypyc build (the system's C compiler), which
benchmarks/compiled.py and tests/test_compiled.py compare with pure Python. Both are built
from a copy of the sources, so that no object file of an earlier build in this checkout's
build/ is reused, with or without coverage.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: libFuzzer as a shared library, in the site folder beside the package
LIBFUZZER = "libfuzzer.so"
#: SanitizerCoverage as libFuzzer wants it: inline 8-bit counters, comparisons, PC tables
COVERAGE_FLAGS = "-fsanitize=fuzzer-no-link"
#: what the wheel is built from (pyproject.toml: the package, and cases/ as its catalogue)
SOURCES = ("setup.py", "pyproject.toml", "README.md", "conformance", "cases")


class BuildError(Exception):
    """A build could not be made: one line saying why."""


def clang() -> str:
    """The clang to build with: $CLANG, else `clang` on the PATH."""
    found = shutil.which(os.environ.get("CLANG", "clang"))
    if found is None:
        raise BuildError("the coverage build needs clang (Debian: apt install clang), or "
                         "CLANG naming one")
    return found


def _run(what: str, command: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        raise BuildError(f"{what} failed: {lines[-1][:200]}")
    return done.stdout


def build(work: Path, *, coverage: bool = True) -> Path:
    """Build into `work` (its src/ and site/ are replaced); the site folder, to put on
    PYTHONPATH. Without `coverage`, the plain mypyc build."""
    env = {**os.environ, "STOMP_CONFORMANCE_MYPYC": "1"}
    if coverage:
        compiler = clang()
        archive = _run("finding libFuzzer", [
            compiler, f"-print-file-name=libclang_rt.fuzzer_no_main-{platform.machine()}.a"
        ]).strip()
        if not os.path.isabs(archive):  # clang echoes a name it does not find
            raise BuildError(f"{compiler} has no libFuzzer (Debian: apt install "
                             "libclang-rt-dev)")
    src, site = work / "src", work / "site"
    for folder in (src, site):
        shutil.rmtree(folder, ignore_errors=True)
    src.mkdir(parents=True)
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    if coverage:
        # mypyc names a module's functions CPyDef_<module>___<name>, all in one C file
        allowlist = work / "coverage-allowlist.txt"
        allowlist.write_text("src:*\n" + "".join(
            f"fun:CPyDef_{module.stem}___*\n"
            for module in sorted((src / "conformance" / "codec").glob("*.py"))))
        env |= {"CC": compiler, "LDSHARED": f"{compiler} -shared",
                "CFLAGS": f"{COVERAGE_FLAGS} -fsanitize-coverage-allowlist={allowlist}"}
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    _run("the mypyc build" + (" with clang" if coverage else ""),
         [*pip, "wheel", "--no-deps", "-w", str(src / "dist"), str(src)], env=env)
    _run("installing the wheel", [*pip, "install", "--no-deps", "--target", str(site),
                                  *map(str, (src / "dist").glob("*.whl"))])
    if not any((site / "conformance" / "codec").glob("parser.*.so")):
        raise BuildError("the wheel's parser is not compiled")
    if coverage:
        _run("linking libFuzzer", [compiler, "-shared", "-o", str(site / LIBFUZZER),
                                   "-Wl,--whole-archive", archive, "-Wl,--no-whole-archive",
                                   "-lstdc++", "-lpthread", "-lm"])
    return site


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: python fuzz/coverage_build.py DIR")
    try:
        site = build(Path(sys.argv[1]).resolve())
    except BuildError as error:
        sys.exit(f"coverage build: {error}")
    print(f"built: PYTHONPATH={site} python fuzz/parser.py [flags] [corpus dirs]")


if __name__ == "__main__":
    main()
