"""The atheris harnesses of fuzz/ for the codec: each runs under real libFuzzer and passes on
the codec as it is, and each fails, with a reproducer, on a codec with a planted fault."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.fuzz.parsing.targets import PLANTS, TARGETS, InvariantBroken

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"

#: Enough runs to mutate well past the seeds, few enough for a test.
RUNS = {"parser": 1_500, "roundtrip": 10_000, "validator": 5_000}

#: Which target each plant breaks.
PLANTED = {"lone-eol": "parser", "unbounded": "parser", "no-escape": "roundtrip",
           "base-ids": "validator"}


def harness(target: str, *args: str, plant: str | None = None, site: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """fuzz/TARGET.py, on this checkout or on the build in `site` (its folder first on the
    path and the working directory, so that this checkout's own package is not found)."""
    env = {k: v for k, v in os.environ.items() if k != "STOMP_FUZZ_PLANT"}
    if plant is not None:
        env["STOMP_FUZZ_PLANT"] = plant
    if site is not None:
        env["PYTHONPATH"] = str(site)
    # One stream: libFuzzer writes to stderr, atheris prints an uncaught exception to stdout.
    return subprocess.run([sys.executable, str(FUZZ / f"{target}.py"), *args], cwd=site,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600, env=env)


def seeds(target: str) -> list[Path]:
    found = sorted((FUZZ / "corpus" / target).iterdir())
    assert found, f"no seeds in fuzz/corpus/{target}: run fuzz/make_corpus.py"
    return found


@pytest.mark.parametrize("target", sorted(RUNS))
def test_every_seed_passes_its_target(target: str) -> None:
    for seed in seeds(target):
        TARGETS[target](seed.read_bytes())


@pytest.mark.parametrize("target", sorted(RUNS))
def test_the_harness_fuzzes_the_codec_without_a_finding(target: str, tmp_path: Path) -> None:
    # A scratch corpus first: libFuzzer writes what it keeps there, not among the seeds.
    result = harness(target, f"-runs={RUNS[target]}", f"-artifact_prefix={tmp_path}/",
                     str(tmp_path), str(FUZZ / "corpus" / target))
    assert result.returncode == 0, result.stdout[-3000:]
    done = re.search(r"^Done (\d+) runs", result.stdout, re.M)
    # libFuzzer may count one run past -runs
    assert done is not None and int(done.group(1)) >= RUNS[target], result.stdout[-2000:]
    assert not list(tmp_path.glob("crash-*"))


def test_the_parser_harness_prints_libfuzzer_stats_for_a_timed_run(tmp_path: Path) -> None:
    # benchmarks/fuzz.py reads exec/s and cov: off this line.
    result = harness("parser", "-max_total_time=2", str(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:]
    done = re.search(r"#(\d+)\s+DONE\s+cov: (\d+) .* exec/s: (\d+)", result.stdout)
    assert done is not None, result.stdout[-3000:]
    assert int(done.group(1)) > 0 and int(done.group(2)) > 0
    # ... and which codec it ran (the mypyc build's run: tests/test_compiled.py).
    assert re.search(r"^INFO: codec pure Python \(.*\); traced from source, beside the "
                     r"installed modules: .*conformance\.codec\.parser", result.stdout, re.M)


@pytest.mark.parametrize("plant", sorted(PLANTED))
def test_a_planted_fault_is_found_and_its_reproducer_replays(plant: str,
                                                             tmp_path: Path) -> None:
    target = PLANTED[plant]
    result = harness(target, "-runs=20000", f"-artifact_prefix={tmp_path}/", str(tmp_path),
                     str(FUZZ / "corpus" / target), plant=plant)
    assert result.returncode != 0
    assert "InvariantBroken" in result.stdout, result.stdout[-3000:]
    (crash,) = tmp_path.glob("crash-*")
    # The reproducer fails with the plant and passes without it: the fault, not the input.
    assert harness(target, str(crash), plant=plant).returncode != 0
    replay = harness(target, str(crash))
    assert replay.returncode == 0, replay.stdout[-3000:]


def test_an_unknown_plant_is_a_usage_error() -> None:
    result = harness("parser", "-runs=1", plant="no-such-fault")
    assert result.returncode != 0 and "is not a plant" in result.stdout
    assert set(PLANTED) == set(PLANTS)


# -- the properties, called plainly on inputs that break them ---------------------------------

def roundtrip_input(version: int, command: str, headers: list[tuple[str, str]],
                    options: int = 0) -> bytes:
    """The roundtrip target's input for a frame (see roundtrip_target)."""
    from conformance.fuzz.parsing.targets import _COMMANDS

    fields = b"".join(bytes([len(t.encode())]) + t.encode() for pair in headers for t in pair)
    return bytes([version, _COMMANDS.index(command), options, len(headers)]) + fields


def test_the_roundtrip_property_holds_escapes_and_reports_an_encoder_without_them() -> None:
    data = roundtrip_input(2, "SEND", [("a:b", "line\nbreak\\ \r")])
    TARGETS["roundtrip"](data)
    with pytest.raises(InvariantBroken, match="parser refuses it|came back as"):
        TARGETS["roundtrip"](data, plant="no-escape")


def test_the_roundtrip_property_says_what_encode_must_refuse() -> None:
    from conformance.codec import Frame
    from conformance.fuzz.parsing.targets import _unencodable

    assert _unencodable(Frame("SEND", [("k", "a\nb")]), "1.0", None) is not None
    assert _unencodable(Frame("CONNECT", [("k", "a\rb")]), "1.2", None) is not None
    assert _unencodable(Frame("CONNECT", [("k", "a\rb")]), "1.1", None) is None
    assert _unencodable(Frame("SEND", [("k", "a\nb")]), "1.1", None) is None
    assert _unencodable(Frame("SEND", [], b"\x00"), "1.2", False) is not None
    assert _unencodable(Frame("ACK", [], b"x"), "1.0", None) is None


def test_the_parser_property_reports_a_parser_that_loses_an_eol() -> None:
    # config 0: STOMP 1.0, strict, small limits; one read size of 1: byte by byte.
    data = bytes([0, 1, 0]) + b"\nRECEIPT\nreceipt-id:1\n\n\x00"
    TARGETS["parser"](data)
    with pytest.raises(InvariantBroken, match="different events"):
        TARGETS["parser"](data, plant="lone-eol")


def test_the_validator_property_reports_a_statement_of_another_version() -> None:
    data = bytes([0, 0, 0]) + b"MESSAGE\ndestination:/q\n\n\x00"  # 1.0: no message-id
    TARGETS["validator"](data)
    with pytest.raises(InvariantBroken, match="does not cover|not in statements.yaml"):
        TARGETS["validator"](data, plant="base-ids")
