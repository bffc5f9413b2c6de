"""atheris harness for the validator: every frame an observing parser yields from the
input goes through validate_server_frame, which must return violations and never raise,
citing only statements that cover the version (conformance.fuzz.parsing.targets). The
validator and the parser are traced.

    python fuzz/validator.py [libFuzzer flags] [corpus dirs]
    python fuzz/validator.py ARTIFACT
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType

import _harness


def load(traced: dict[str, ModuleType]) -> Callable[[bytes], None]:
    from conformance.fuzz.parsing.targets import validator_target

    return functools.partial(validator_target, plant=_harness.plant())


if __name__ == "__main__":
    _harness.main(load, trace=(*_harness.PARSER, "conformance.codec.validator"))
