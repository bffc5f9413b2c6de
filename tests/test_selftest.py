"""coverage and selftest: the mechanics, on small case sets (the whole catalogue's own
self-test is a test of its own)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from helpers import case, cli

from conformance.scenario import load_file
from conformance.selftest import coverage, selftest

ACK = case("""
    - connect: {}
    - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}", ack: client}}
    - send: {command: SEND, headers: {destination: "${queue}"}, body: m}
    - expect: {command: MESSAGE, headers: {ack: {present: true}}}
""", id="t.ack", statements="message.ack-required", extra='  tags: ["fault:no-ack-header"]\n')
RECEIPT = case("""
    - connect: {}
    - send: {command: SEND, headers: {destination: "${queue}", receipt: r}}
    - expect: {command: RECEIPT, headers: {receipt-id: r}}
""", id="t.receipt", extra='  tags: ["fault:no-ack-header"]\n')


def write(tmp_path: Path, *texts: str) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text("".join(texts))
    return path


def test_coverage_counts_statement_version_pairs(tmp_path: Path) -> None:
    report = coverage(load_file(write(tmp_path, ACK, RECEIPT)))
    assert report.covered[("message.ack-required", "1.2")] == ["t.ack"]
    assert ("message.ack-required", "1.2") not in report.uncovered
    assert ("error.close-after", "1.2") in report.uncovered and 0 < report.rate < 0.1
    done = cli("coverage", "--json", "--cases", str(tmp_path))
    assert done.returncode == 1  # not everything is covered
    assert json.loads(done.stdout)["covered_pairs"] == len(report.covered)


def test_selftest_finds_killers_survivors_and_idle_faults(tmp_path: Path) -> None:
    cases = load_file(write(tmp_path, ACK, RECEIPT))
    result = asyncio.run(selftest(cases, jobs=4))
    assert result.not_passing == []
    assert result.killers("t.ack") == ["no-ack-header"]
    assert result.survivors == ["t.receipt"]  # its tag names a fault that does not kill it
    assert "no-ack-header" not in result.idle_faults and "drop-receipts" in result.idle_faults
    assert result.kill_rate == 0.5 and not result.ok
    done = cli("selftest", "--cases", str(tmp_path), "--jobs", "4")
    assert done.returncode == 1
    assert "t.ack: no-ack-header" in done.stdout
    assert "t.receipt: SURVIVES every fault" in done.stdout and "kill rate 50.0%" in done.stdout


def test_the_shipped_catalogue_passes_the_selftest() -> None:
    """Every case passes on the reference broker, fails under a fault its tags name, and
    every fault makes some case fail."""
    done = cli("selftest", "--json")
    report = json.loads(done.stdout)
    assert report["not_passing"] == [] and report["survivors"] == []
    assert report["idle_faults"] == [] and report["kill_rate"] == 1.0
    assert done.returncode == 0


def test_the_shipped_catalogue_covers_every_observable_statement() -> None:
    done = cli("coverage", "--json")
    report = json.loads(done.stdout)
    assert report["uncovered"] == [] and report["orphans"] == [] and done.returncode == 0
