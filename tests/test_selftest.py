"""coverage and selftest: the mechanics, on small case sets (the whole catalogue's own
self-test is a test of its own)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from helpers import case, cli

from conformance.broker.variants import VARIANTS, Variant, variant
from conformance.runner.results import Outcome
from conformance.scenario import load_file
from conformance.selftest import coverage, selftest, selftest_variants

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
    # no case carries fault:drop-receipts: it was tried on none
    assert "drop-receipts" in result.untried_faults
    assert "no-ack-header" not in result.untried_faults
    assert result.kill_rate == 0.5 and not result.ok
    done = cli("selftest", "--cases", str(tmp_path), "--jobs", "4")
    assert done.returncode == 1
    assert "t.ack: no-ack-header" in done.stdout
    assert "t.receipt: SURVIVES every fault" in done.stdout and "kill rate 50.0%" in done.stdout
    # a fault no case is tagged with says so, and how to mend it
    assert "fault drop-receipts makes no case fail: no case chosen is tagged " \
           "fault:drop-receipts, so none was tried under it (add the tag to the cases that " \
           "check its statement receipt-header.server-acknowledges; --full tries every case " \
           "under it)" in " ".join(done.stdout.split())


CLIENT_CASE = """\
- id: clients.t.not-escaped
  title: CONNECT header values go unescaped
  statements: [value-encoding.connect-not-escaped]
  versions: ["1.2"]
  tags: ["fault:escape-connect"]
  steps:
    - driver: {op: connect, url: "${url}", version: "${version}", host: "${host}",
               login: "user:one\\\\two", passcode: "${passcode}"}
    - handshake: {expect: {headers: {login: "user:one\\\\two"}}}
    - expect_event: {event: connected}
"""


def test_the_client_selftest_names_a_fault_no_case_is_tagged_with(tmp_path: Path) -> None:
    path = tmp_path / "clients" / "cases.yaml"
    path.parent.mkdir()
    path.write_text(CLIENT_CASE)
    done = cli("clients", "--selftest", "--cases", str(path), "--jobs", "2", "--json", "-")
    report = json.loads(done.stdout)
    assert report["matrix"]["escape-connect"] == {"clients.t.not-escaped": "failed"}
    assert "escape-connect" not in report["untried_faults"]
    assert "no-host" in report["untried_faults"] and report["matrix"]["no-host"] == {}
    done = cli("clients", "--selftest", "--cases", str(path), "--jobs", "2")
    assert done.returncode == 1  # the other faults kill nothing
    out = " ".join(done.stdout.split())
    assert "clients.t.not-escaped: escape-connect" in out and "kill rate 100.0%" in out
    assert "fault no-host makes no case fail: no case chosen is tagged fault:no-host, so none " \
           "was tried under it (add the tag to the cases that check its statement " \
           "connect.required-headers; --full tries every case under it)" in out
    assert "fault escape-connect makes no case fail" not in out


@pytest.mark.slow
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


# -- variants: the catalogue under legal configurations of the broker -------------------------

def test_every_variant_is_a_valid_configuration() -> None:
    names = [v.name for v in VARIANTS]
    assert len(set(names)) == len(names) and "default" in names
    for known in VARIANTS:
        assert known.broker_config().faults == frozenset(), known.name  # legal: no fault
    switched = {k for v in VARIANTS for k in v.config} | {"limits"}
    assert {"heartbeat", "nack", "vhosts", "unknown_vhost", "users", "v10_anonymous",
            "minimal_connected", "colon_ids", "server_headers", "unknown_command"} <= switched


def test_variants_report_each_bad_case_run_and_none_when_clean(tmp_path: Path) -> None:
    cases = load_file(write(tmp_path, ACK, RECEIPT))
    broken = Variant("broken", "colon ids and a fault", {"colon_ids": True,
                                                         "faults": frozenset({"no-ack-header"})})
    result = asyncio.run(selftest_variants(
        cases, [variant("secured"), variant("austere"), broken], jobs=4))
    assert [(r.variant.name, len(r.results), len(r.bad)) for r in result.runs] == \
        [("secured", 2, 0), ("austere", 2, 0), ("broken", 2, 1)]
    assert [(name, r.id, r.version, r.outcome) for name, r in result.bad] == \
        [("broken", "t.ack", "1.2", Outcome.FAILED)]
    report = result.to_json()
    assert report["ok"] is False and report["bad"] == [
        {"variant": "broken", "id": "t.ack", "version": "1.2", "outcome": "failed",
         "message": result.bad[0][1].message}]
    done = cli("selftest", "--variants", "--variant", "credentials", "--variant",
               "vhost-named", "--cases", str(tmp_path), "--json")
    report = json.loads(done.stdout)
    assert (done.returncode, report["ok"], report["bad"]) == (0, True, [])
    assert [(v["name"], v["case_runs"], v["clean"]) for v in report["variants"]] == \
        [("credentials", 2, 2), ("vhost-named", 2, 2)]
    done = cli("selftest", "--variant", "nope", "--cases", str(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "unknown variant 'nope'" in done.stderr


@pytest.mark.slow
def test_the_shipped_catalogue_holds_under_legal_configurations() -> None:
    """The short form of `selftest --variants`: the combinations, which switch on every
    switch between them."""
    done = cli("selftest", "--variant", "austere", "--variant", "secured", "--variant",
               "lenient", "--json")
    report = json.loads(done.stdout)
    assert report["bad"] == [] and done.returncode == 0
