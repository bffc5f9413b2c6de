"""The build is pure Python unless STOMP_CONFORMANCE_MYPYC=1: then mypyc compiles the modules
every message of the reference broker passes through (about twice its messages per second,
see benchmarks/broker.py), and the parser fuzz target's own work (fuzz/parser.py runs it for
every input; benchmarks/fuzz.py). That needs a C compiler and Python's headers; pip fetches
mypy.

    STOMP_CONFORMANCE_MYPYC=1 pip install .

The package list is here too (see below); everything else is in pyproject.toml."""

import os

from setuptools import find_namespace_packages, setup

#: the reference broker's hot path: the codec, the store, the protocol and what it writes,
#: and the session's I/O (CONNECT's answer, the configuration and the faults run once per
#: connection: they stay Python)
COMPILED = [
    "conformance/codec/events.py",
    "conformance/codec/commandline.py",
    "conformance/codec/escaping.py",
    "conformance/codec/encoder.py",
    "conformance/codec/parser.py",
    "conformance/codec/headblock.py",
    "conformance/broker/destinations.py",
    "conformance/broker/outgoing.py",
    "conformance/broker/protocol.py",
    "conformance/broker/session.py",
    # the parser fuzz target's readings and checks (the parser it traces is a Python copy)
    "conformance/fuzz/parsing/draw.py",
    "conformance/fuzz/parsing/readings.py",
]

# Every folder is a package to setuptools, data folders too: listed whole, none is dropped
# or warned about.
options: dict[str, object] = {
    "packages": find_namespace_packages(include=["conformance*"]) + ["conformance.cases"]
    + [f"conformance.cases.{name}" for name in find_namespace_packages("cases")],
}
if os.environ.get("STOMP_CONFORMANCE_MYPYC") == "1":
    try:
        from mypyc.build import mypycify
    except ImportError:  # pip's first pass, asking what the build needs
        options["setup_requires"] = ["mypy>=1.5"]
    else:
        options["ext_modules"] = mypycify(COMPILED, opt_level="3")

setup(**options)  # type: ignore[arg-type]
