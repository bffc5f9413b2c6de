"""What the atheris harnesses in fuzz/ share: the modules coverage needs are traced (compiled
from their Python source with atheris's instrumentation), the STOMP dictionary and a length
cap are added unless the command line gives its own, then libFuzzer takes over.

Only the modules a harness names are traced, each compiled from its `.py` source: the rest of
the codec, the targets' own checks and the statement catalogue run as installed, so their
branches neither slow every execution nor count as coverage. The package is the one
installed, pure Python or the mypyc build (STOMP_CONFORMANCE_MYPYC=1, setup.py), whose
compiled modules atheris could not trace; this working tree when none is. In the coverage
build (coverage_build.py: the mypyc modules compiled by clang with SanitizerCoverage, and
libFuzzer beside the package) the compiled modules count their own coverage and are not
traced: only the named modules that are Python still are. The first line a harness prints
says which (`INFO: codec ...`).

`python fuzz/NAME.py [libFuzzer flags] [corpus dirs]` fuzzes; `python fuzz/NAME.py FILE`
runs one input once (the replay of a finding). libFuzzer writes the inputs it keeps into
the first corpus directory: give a scratch one first to leave the seeds as they are.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, ModuleType

import atheris  # type: ignore[import-untyped]
from coverage_build import LIBFUZZER

HERE = Path(__file__).resolve().parent
if importlib.util.find_spec("conformance") is None:  # not installed: this working tree
    sys.path.insert(0, str(HERE.parent))


def _package() -> Path:
    """The installed package's folder, found without importing it."""
    spec = importlib.util.find_spec("conformance")
    assert spec is not None and spec.origin is not None  # the working tree at least
    return Path(spec.origin).parent


#: The coverage build's libFuzzer: its compiled modules call libFuzzer's hooks, which must be
#: loaded, with their symbols global, before any of them is (atheris then uses this one).
_LIBFUZZER = _package().parent / LIBFUZZER
COVERAGE_BUILD = _LIBFUZZER.is_file()
if COVERAGE_BUILD:
    ctypes.CDLL(str(_LIBFUZZER), mode=os.RTLD_GLOBAL)

#: Flags added unless given: the dictionary, and inputs short enough to keep the rate up
#: (every rule of the grammar fits in a few hundred octets; the targets' small limits too).
DEFAULT_FLAGS = {"-dict": str(HERE / "stomp.dict"), "-max_len": "2048"}

#: Environment variable naming a fault to plant (conformance.fuzz.parsing.targets.PLANTS):
#: for the tests that show a harness can fail, never for a real campaign.
PLANT_VARIABLE = "STOMP_FUZZ_PLANT"

#: The module a plant patches where it is not a target's own code: a compiled one would not
#: see the patch, so the coverage build runs it traced from source too.
PLANTED_IN = {"no-escape": "conformance.codec.encoder"}

#: The parser's modules: what every codec harness traces.
PARSER = ("conformance.codec.commandline", "conformance.codec.escaping",
          "conformance.codec.headblock", "conformance.codec.parser")

Load = Callable[[dict[str, ModuleType]], Callable[[bytes], None]]


def plant() -> str | None:
    """The fault named by STOMP_FUZZ_PLANT, if any; an unknown name ends the run."""
    from conformance.fuzz.parsing.targets import PLANTS

    name = os.environ.get(PLANT_VARIABLE) or None
    if name is not None and name not in PLANTS:
        sys.exit(f"{PLANT_VARIABLE}={name} is not a plant; choose one of {', '.join(PLANTS)}")
    return name


class _TracingLoader(importlib.machinery.SourceFileLoader):
    """Loads a module from its source with atheris's instrumentation."""

    def get_code(self, fullname: str) -> CodeType:
        code = super().get_code(fullname)
        assert code is not None  # a source file always has code
        return atheris.patch_code(code, True)  # type: ignore[no-any-return]


class _SourceTracer(importlib.abc.MetaPathFinder):
    """Finds the modules named in their `.py` source (beside a compiled one too), traced."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        found = importlib.machinery.PathFinder.find_spec(fullname, path)
        if found is None or found.origin is None:
            return None
        source = Path(found.origin)
        if source.suffix != ".py":  # an extension module: its source sits beside it
            source = source.with_name(fullname.rpartition(".")[2] + ".py")
            if not source.is_file():
                sys.exit(f"{fullname} is compiled and its source is not beside it: "
                         "atheris cannot trace it")
        return importlib.util.spec_from_file_location(
            fullname, source, loader=_TracingLoader(fullname, str(source)),
            submodule_search_locations=found.submodule_search_locations)


@contextmanager
def _tracing(names: Sequence[str]) -> Iterator[None]:
    finder = _SourceTracer(names)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def _traced_copies(names: Sequence[str]) -> dict[str, ModuleType]:
    """Traced copies of the modules `names`, which import each other; the installed modules
    stay in place for everything else."""
    saved = {name: importlib.import_module(name) for name in names}
    for name in names:
        del sys.modules[name]
    try:
        with _tracing(names):
            return {name: importlib.import_module(name) for name in names}
    finally:
        for name, module in saved.items():  # and the package's attribute, the import's too
            sys.modules[name] = module
            package, _, child = name.rpartition(".")
            setattr(sys.modules[package], child, module)


def installed() -> tuple[str, Path]:
    """How the codec is installed ("pure Python", "compiled (mypyc)", or in the coverage
    build "compiled (mypyc) with clang's coverage"), and where: read off its folder, before
    anything imports it."""
    package = _package()
    if not _is_extension(package / "codec" / "parser"):
        return "pure Python", package
    return ("compiled (mypyc) with clang's coverage" if COVERAGE_BUILD
            else "compiled (mypyc)"), package


def _is_extension(stem: Path) -> bool:
    return any(stem.with_name(stem.name + suffix).is_file()
               for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def main(load: Load, *, trace: Sequence[str] = PARSER, copies: bool = False,
         argv: Sequence[str] | None = None) -> None:
    """Trace the modules `trace`, load the target with `load`, then fuzz it (or replay the
    files named on the command line). The traced modules replace the installed ones, or
    with `copies` sit beside them, which keep serving everything else: `load` gets them
    by name and its target runs them where it wants coverage."""
    build, folder = installed()
    # The coverage build's compiled modules count their own coverage: they run as installed.
    planted = PLANTED_IN.get(os.environ.get(PLANT_VARIABLE, ""))
    own = [name for name in trace if COVERAGE_BUILD and name != planted
           and _is_extension(folder.parent.joinpath(*name.split(".")))]
    names = [name for name in trace if name not in own]
    if copies:
        traced = _traced_copies(names)
    else:
        with _tracing(names):
            traced = {name: importlib.import_module(name) for name in names}
    traced |= {name: importlib.import_module(name) for name in own}
    target = load(traced)
    print(f"INFO: codec {build} ({folder}); traced from source"
          f"{', beside the installed modules' if copies and names else ''}: "
          f"{', '.join(names) or 'none'}"
          + (f"; counting their own coverage: {', '.join(own)}" if own else ""),
          file=sys.stderr, flush=True)
    args = list(sys.argv if argv is None else argv)
    for flag, value in DEFAULT_FLAGS.items():
        if not any(arg.startswith(flag + "=") for arg in args[1:]):
            args.insert(1, f"{flag}={value}")
    atheris.Setup(args, target)
    atheris.Fuzz()
