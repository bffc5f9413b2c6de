"""The pytest plugin, run in a child pytest against a peer on loopback."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from peers import TinyBroker, serving

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
