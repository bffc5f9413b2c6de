"""The floor of any parser harness's cost under atheris (the ceiling of its rate): the parser
as fuzz/parser.py runs it (traced; in the coverage build, compiled with clang's coverage),
one observing parse of that harness's stream per input, no check. benchmarks/fuzz.py runs
it beside the real harnesses, to tell the parser's own cost from what a harness adds.

    python benchmarks/atheris_bare.py [libFuzzer flags] [corpus dirs]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import _harness  # noqa: E402


def load(traced: dict[str, ModuleType]) -> Callable[[bytes], None]:
    from conformance.codec import StompError
    from conformance.fuzz.parsing.readings import parse_input

    parser = traced["conformance.codec.parser"].Parser

    def parse(data: bytes) -> None:
        version, _, limits, _, stream = parse_input(data)  # the parser harness's input
        reader = parser(version=version, strict=False, limits=limits)
        try:
            reader.feed(stream)
            reader.eof()
        except StompError:
            pass

    return parse


if __name__ == "__main__":
    _harness.main(load, copies=True)
