"""`stomp-conformance stateful` end to end against the reference broker in the command's
process: a planted fault gives exit 1 and the shrunk session as a case file, a correct
broker exit 0 and no file, and mistakes are one-line usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import cli

from conformance.scenario import load_file


@pytest.mark.timing
@pytest.mark.slow
def test_a_planted_fault_exits_1_and_writes_the_failing_session_as_a_case(
        tmp_path: Path) -> None:
    # the fault and seed tests/test_fuzz_stateful.py finds within about 3 s, then 5 s of
    # shrinking
    done = cli("stateful", "--fault", "no-implicit-abort", "--seed", "1", "--examples", "400",
               "--time", "60s", "--shrink-time", "5s", "--output", str(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    (written,) = tmp_path.glob("*.yaml")
    (case,) = load_file(written)
    assert "stateful" in case.tags
    assert str(written) in done.stdout and "begin.implicit-abort" in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.timing
def test_a_correct_broker_exits_0_and_writes_nothing(tmp_path: Path) -> None:
    done = cli("stateful", "--seed", "11", "--examples", "15", "--time", "30s", "--output",
               str(tmp_path / "cases"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no failing session (seed 11)" in done.stdout
    assert not (tmp_path / "cases").exists()


@pytest.mark.parametrize(("args", "code", "words"), [
    (["--broker", "10.1.2.3:61613"], 2, "--allow-remote"),
    (["--broker", "127.0.0.1:1", "--fault", "no-implicit-abort"], 2, "cannot be used with"),
    (["--time", "ten minutes"], 2, "--time"),
    (["--shrink-time", "0s"], 2, "--shrink-time: the duration must be above 0"),
    (["--fault", "no-such-fault"], 2, "unknown fault"),
    (["--broker", "127.0.0.1:1", "--time", "5s"], 3, "connection refused"),
])
def test_stateful_mistakes_are_one_line(args: list[str], code: int, words: str,
                                        tmp_path: Path) -> None:
    done = cli("stateful", *args, "--output", str(tmp_path))
    assert done.returncode == code, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("stomp-conformance:") == 1
