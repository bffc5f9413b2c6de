"""The ceiling of any parser harness under atheris: the parser instrumented as fuzz/parser.py
instruments it, one observing parse of that harness's stream per input, no check.
benchmarks/fuzz.py runs it beside the real harnesses, to tell the parser's own cost under
instrumentation from what a harness adds.

    python benchmarks/atheris_bare.py [libFuzzer flags] [corpus dirs]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import _harness  # noqa: E402


def load() -> Callable[[bytes], None]:
    from conformance.codec import Parser, StompError
    from conformance.fuzz.parsing.targets import parse_input

    def parse(data: bytes) -> None:
        version, _, limits, _, stream = parse_input(data)  # the parser harness's input
        parser = Parser(version=version, strict=False, limits=limits)
        try:
            parser.feed(stream)
            parser.eof()
        except StompError:
            pass

    return parse


if __name__ == "__main__":
    _harness.main(load)
