"""atheris harness for encode then parse: a frame built from the input (a command of the
grammar, headers and body from the input), encoded for a version, parses back the same
(conformance.fuzz.parsing.targets.roundtrip_target). What encode refuses with
LocalProtocolError is its contract, not a finding. The encoder and the parser are traced.

    python fuzz/roundtrip.py [libFuzzer flags] [corpus dirs]
    python fuzz/roundtrip.py ARTIFACT
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType

import _harness


def load(traced: dict[str, ModuleType]) -> Callable[[bytes], None]:
    from conformance.fuzz.parsing.targets import roundtrip_target

    return functools.partial(roundtrip_target, plant=_harness.plant())


if __name__ == "__main__":
    _harness.main(load, trace=(*_harness.PARSER, "conformance.codec.encoder"))
