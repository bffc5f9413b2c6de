"""The pytest plugin, run in a child pytest against a peer on loopback."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from peers import TinyBroker, serving

from conformance.scenario import load_cases, shipped_catalogue

pytest_plugins = ["pytester"]

CASES = """\
- id: receipts.send-gets-receipt
  title: SEND with a receipt header gets a RECEIPT
  statements: [receipt.receipt-id-required]
  versions: ["1.2"]
  steps:
    - connect: {}
    - send: {command: SEND, headers: {destination: "${queue}", receipt: r1}}
    - expect: {command: RECEIPT, headers: {receipt-id: r1}, within: 0.3}
- id: heart-beat.maybe
  title: a MAY case
  statements: [connected.optional-headers]
  versions: ["1.2"]
  steps:
    - connect: {}
- id: receipts.old-version
  title: a 1.0 case
  statements: [receipt.receipt-id-required-v10]
  versions: ["1.0"]
  steps:
    - connect: {}
"""


def test_cases_become_items_with_markers_and_domain_failures(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", cases=CASES)
    # a folder of client cases beside them is not collected (the `clients` verb runs them)
    pytester.mkdir("clients").joinpath("c.yaml").write_text("not: [a broker case")
    profile = pytester.makefile(".yaml", only12="name: only12\ncapabilities: {versions: ['1.2']}")
    with serving(TinyBroker("no-receipt")) as port:
        result = pytester.runpytest_subprocess(
            "--stomp-broker", f"127.0.0.1:{port}", "--stomp-profile", str(profile),
            "-p", "no:cacheprovider", "-rs", "--junitxml=out.xml", "cases.yaml", "clients")
        must = pytester.runpytest_subprocess("--stomp-broker", f"127.0.0.1:{port}", "-m",
                                             "must and receipts", "cases.yaml", "-q")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    text = result.stdout.str()
    assert "cases.yaml:8: failed: receipts.send-gets-receipt [STOMP 1.2]" in text
    assert "receipt.receipt-id-required (MUST): A `RECEIPT` frame MUST include" in text
    assert "expected: RECEIPT receipt-id 'r1'" in text and "observed: nothing within 0.3 s" in text
    assert "transcript (end):" in text and "Traceback" not in text
    assert "does not speak STOMP 1.0" in text
    cases = ET.parse(Path(pytester.path, "out.xml")).getroot().iter("testcase")
    assert {c.get("name") for c in cases} >= {"receipts.send-gets-receipt[1.2]"}
    must.assert_outcomes(failed=1, passed=1)  # heart-beat.maybe is deselected


def test_an_unreachable_broker_ends_the_session_with_code_3(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", cases=CASES)
    result = pytester.runpytest_subprocess("--stomp-broker", "127.0.0.1:1", "cases.yaml")
    assert result.ret == 3
    assert "cannot connect to 127.0.0.1:1: connection refused" in result.stderr.str() + \
        result.stdout.str()


def test_yaml_files_are_not_collected_without_a_broker(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", cases=CASES)
    result = pytester.runpytest_subprocess("cases.yaml")
    assert result.ret in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.NO_TESTS_COLLECTED)
    assert "collected 0 items" in result.stdout.str()


@contextlib.contextmanager
def reference_broker() -> Iterator[int]:
    """The reference broker in a child process on a free port: its port."""
    process = subprocess.Popen([sys.executable, "-m", "conformance", "broker", "--port", "0"],
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert "listening on 127.0.0.1:" in line, line
        yield int(line.rsplit(":", 1)[1].split()[0])
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_given_no_paths_the_shipped_catalogue_is_the_gate(pytester: pytest.Pytester) -> None:
    """`pytest --stomp-broker ADDRESS -m must` in an empty folder: the catalogue `run` takes
    with no --cases, client cases left out, selected by -m and -k as path-collected cases."""
    shipped = load_cases([shipped_catalogue()])
    runs = sum(len(case.versions) for case in shipped)
    must = sum(len(case.versions) for case in shipped if case.level == "must")
    assert not any(pytester.path.iterdir())  # nothing here to collect
    with reference_broker() as port:
        broker = ("--stomp-broker", f"127.0.0.1:{port}", "-p", "no:cacheprovider")
        listed = pytester.runpytest_subprocess(*broker, "-m", "must", "--collect-only", "-q")
        gate = pytester.runpytest_subprocess(*broker, "-m", "must", "-k",
                                             "send-gets-its-receipt or receipt-has-no-body",
                                             "-v", "-rs")
    assert f"{must}/{runs} tests collected ({runs - must} deselected)" in listed.stdout.str()
    assert "clients." not in listed.stdout.str()
    gate.assert_outcomes(passed=4)  # receipt-has-no-body at 1.0 to 1.2, the other at 1.2
    text = gate.stdout.str()
    assert "receipts/receipt-per-frame.yaml::receipts.send-gets-its-receipt[1.2] PASSED" in text
    assert "receipts/receipt-frame.yaml::receipts.receipt-has-no-body[1.2] PASSED" in text


def test_without_a_broker_a_project_collects_no_stomp_case(pytester: pytest.Pytester) -> None:
    empty = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert empty.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "collected 0 items" in empty.stdout.str()
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    own = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    own.assert_outcomes(passed=1)
    assert "collected 1 item" in own.stdout.str() and ".yaml" not in own.stdout.str()
