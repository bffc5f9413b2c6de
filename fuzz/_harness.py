"""What the atheris harnesses in fuzz/ share: the code under test is instrumented as it is
imported (so coverage guides the mutations), the STOMP dictionary and a length cap are
added unless the command line gives its own, then libFuzzer takes over.

Only the code under test is instrumented: the codec (and, for the differential target,
the peers' parsers). The targets' own checks and the statement catalogue are imported
plainly, so their branches neither slow every execution nor count as coverage.

`python fuzz/NAME.py [libFuzzer flags] [corpus dirs]` fuzzes; `python fuzz/NAME.py FILE`
runs one input once (the replay of a finding). libFuzzer writes the inputs it keeps into
the first corpus directory: give a scratch one first to leave the seeds as they are.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import atheris  # type: ignore[import-untyped]

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the working tree's conformance, installed or not

#: Flags added unless given: the dictionary, and inputs short enough to keep the rate up
#: (every rule of the grammar fits in a few hundred octets; the targets' small limits too).
DEFAULT_FLAGS = {"-dict": str(HERE / "stomp.dict"), "-max_len": "2048"}

#: Environment variable naming a fault to plant (conformance.fuzz.parsing.targets.PLANTS):
#: for the tests that show a harness can fail, never for a real campaign.
PLANT_VARIABLE = "STOMP_FUZZ_PLANT"

#: Imported before instrumentation starts, so they stay plain: the package, the
#: statement catalogue (YAML loading) and the grammar tables.
PLAIN = ("conformance", "conformance.spec", "conformance.spec.grammar")


def plant() -> str | None:
    """The fault named by STOMP_FUZZ_PLANT, if any; an unknown name ends the run."""
    from conformance.fuzz.parsing.targets import PLANTS

    name = os.environ.get(PLANT_VARIABLE) or None
    if name is not None and name not in PLANTS:
        sys.exit(f"{PLANT_VARIABLE}={name} is not a plant; choose one of {', '.join(PLANTS)}")
    return name


def main(load: Callable[[], Callable[[bytes], None]], *,
         instrument: Sequence[str] = ("conformance.codec",),
         argv: Sequence[str] | None = None) -> None:
    """Import the `instrument` modules (and what they import) under instrumentation, then
    the target with `load`, then fuzz it (or replay the files named on the command line)."""
    for name in PLAIN:
        importlib.import_module(name)
    with atheris.instrument_imports(include=[name.split(".")[0] for name in instrument]):
        for name in instrument:
            importlib.import_module(name)
    target = load()
    args = list(sys.argv if argv is None else argv)
    for flag, value in DEFAULT_FLAGS.items():
        if not any(arg.startswith(flag + "=") for arg in args[1:]):
            args.insert(1, f"{flag}={value}")
    atheris.Setup(args, target)
    atheris.Fuzz()
