"""atheris harness for the parser: any bytes, read whole and in reads the input chooses, in
each version and mode. Invariants (conformance.fuzz.parsing.readings.parse_target): only
StompError escapes; the same events and error for any chunking; what the parser keeps
after a read stays within max_frame; offsets rise and cover every octet; strict stops at
the first violation observing records; every cited statement exists and covers the
version.

Coverage comes from the chunked reading, which runs a traced copy of the parser; the whole
reading, the reference, runs the parser as installed (compiled, in the mypyc build): every
path of the whole reading is also one the input can choose for the chunked one. In the
coverage build (coverage_build.py) both run the compiled parser, which counts its own
coverage.

    python fuzz/parser.py [libFuzzer flags] [corpus dirs]    # fuzz
    python fuzz/parser.py ARTIFACT                           # replay one input
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType

import _harness


def load(traced: dict[str, ModuleType]) -> Callable[[bytes], None]:
    from conformance.fuzz.parsing.readings import parse_target

    return functools.partial(parse_target, plant=_harness.plant(),
                             traced=traced["conformance.codec.parser"].Parser)


if __name__ == "__main__":
    _harness.main(load, copies=True)
