"""`stomp-conformance run` end to end: a real broker peer on loopback, the exit codes of the
contract, one-line errors, and no credentials in what it prints."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trustme
from helpers import cli
from peers import TinyBroker, serving

from conformance.cli.options import default_cases
from conformance.scenario import load_catalogue

CASE = """\
- id: receipts.send-gets-receipt
  title: SEND with a receipt header gets a RECEIPT
  statements: [receipt.receipt-id-required]
  versions: ["1.1", "1.2"]
  steps:
    - connect: {}
    - send: {command: SEND, headers: {destination: "${queue}", receipt: r1}}
    - expect: {command: RECEIPT, headers: {receipt-id: r1}, within: 0.5}
"""


def cases(tmp_path: Path) -> str:
    path = tmp_path / "cases.yaml"
    path.write_text(CASE)
    return str(path)


def test_a_conformant_broker_exits_0(tmp_path: Path) -> None:
    with serving(TinyBroker()) as port:
        done = cli("run", "--broker", f"stomp://alice:s3cret@127.0.0.1:{port}", "--cases",
                   cases(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "2 case runs" in done.stderr and "passed" in done.stderr
    assert "s3cret" not in done.stdout + done.stderr


def test_reports_are_written_without_credentials(tmp_path: Path) -> None:
    with serving(TinyBroker("no-receipt")) as port:
        done = cli("run", "--broker", f"127.0.0.1:{port}", "--login", "alice", "--passcode",
                   "s3cret", "--cases", cases(tmp_path), "--json", str(tmp_path / "r.json"),
                   "--junit", str(tmp_path / "out/junit.xml"), "--results", str(tmp_path / "rec"))
    assert done.returncode == 1
    report = json.loads((tmp_path / "r.json").read_text())
    assert {c["outcome"] for c in report["cases"]} == {"failed"}
    assert report["broker"]["url"] == f"127.0.0.1:{port}"
    records = list((tmp_path / "rec").glob("results-*.jsonl"))
    assert len(records) == 1 and len(records[0].read_text().splitlines()) == 2
    for path in (tmp_path / "r.json", tmp_path / "out/junit.xml", records[0]):
        assert b"s3cret" not in path.read_bytes()
    assert b"passcode:***" in (tmp_path / "r.json").read_bytes()


def test_no_color_is_respected(tmp_path: Path) -> None:
    with serving(TinyBroker("no-receipt")) as port:
        coloured = cli("run", "--broker", f"127.0.0.1:{port}", "--cases", cases(tmp_path),
                       env={"FORCE_COLOR": "1"})
        plain = cli("run", "--broker", f"127.0.0.1:{port}", "--cases", cases(tmp_path),
                    env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    colour = re.compile(r"\x1b\[[0-9;]*3[0-7]m|;3[0-7]m")
    assert colour.search(coloured.stderr) and not colour.search(plain.stderr)


def test_a_failure_exits_1_and_names_expected_and_observed(tmp_path: Path) -> None:
    with serving(TinyBroker("no-receipt")) as port:
        done = cli("run", "--broker", f"127.0.0.1:{port}", "--cases", cases(tmp_path),
                   "--stomp-version", "1.2")
    assert done.returncode == 1
    assert "receipts.send-gets-receipt [1.2]" in done.stderr
    assert "expected RECEIPT receipt-id 'r1'; observed nothing within 0.5 s" in done.stderr


def test_a_failure_keeps_its_case_path_whole_in_a_log(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder-with-a-name-long-enough-to-cross-eighty-columns" / "escaping"
    folder.mkdir(parents=True)
    path = folder / "undefined-escapes.yaml"
    path.write_text(CASE)
    with serving(TinyBroker("no-receipt")) as port:  # stderr is a pipe, as in CI
        done = cli("run", "--broker", f"127.0.0.1:{port}", "--cases", str(path),
                   "--stomp-version", "1.2", env={"COLUMNS": "80"})
    assert done.returncode == 1
    failure = re.compile(rf"failed +receipts\.send-gets-receipt \[1\.2\]  {re.escape(str(path))}"
                         r":\d+$")
    assert any(failure.match(line) for line in done.stderr.splitlines()), done.stderr
    assert "    line 8: expected RECEIPT receipt-id 'r1'; observed nothing within 0.5 s" in \
        done.stderr.splitlines()


def test_nothing_listening_exits_3_with_one_line(tmp_path: Path) -> None:
    done = cli("run", "--broker", "127.0.0.1:1", "--cases", cases(tmp_path))
    assert done.returncode == 3
    assert done.stderr == "stomp-conformance: cannot connect to 127.0.0.1:1: connection refused\n"


def test_a_broken_case_file_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(CASE.replace("    - connect: {}", "    - connect: {command: HELLO}"))
    done = cli("run", "--broker", "127.0.0.1:1", "--cases", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"stomp-conformance: {path}:6: [0].steps[0].connect.command:")


def test_bad_flags_exit_2(tmp_path: Path) -> None:
    for args in (["--jobs", "0"], ["--broker", "127.0.0.1:99999"], ["--profile", "nope"],
                 ["--timeout", "-1"]):
        done = cli("run", "--cases", cases(tmp_path), "--broker", "127.0.0.1:1", *args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, args
        assert len(done.stderr.strip().splitlines()) <= 12


def test_tls_with_a_ca_and_without_verification(tmp_path: Path) -> None:
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    with serving(TinyBroker(), ssl=server) as port:
        url = f"stomp+ssl://127.0.0.1:{port}"
        verified = cli("run", "--broker", url, "--tls-ca", str(tmp_path / "ca.pem"),
                       "--cases", cases(tmp_path))
        unverified = cli("run", "--broker", url, "--tls-no-verify", "--cases", cases(tmp_path))
        refused = cli("run", "--broker", url, "--cases", cases(tmp_path))
    assert verified.returncode == 0, verified.stderr
    assert unverified.returncode == 0, unverified.stderr
    assert refused.returncode == 3 and "TLS handshake" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


#: What a run of cases that are not the shipped catalogue's says in place of a verdict.
OUTSIDE = "2 case runs of cases outside the shipped catalogue: no certification verdict"


def shipped_runs(chosen: str = "") -> tuple[int, int]:
    """(case runs over TCP whose id holds `chosen`, all of them) in the shipped catalogue."""
    runs = [case.id for case in load_catalogue([default_cases()]).cases
            if "tcp" in case.transports for _ in case.versions]
    return sum(chosen in run for run in runs), len(runs)


@pytest.mark.slow
def test_run_with_no_arguments_runs_the_catalogue_against_the_reference_broker(
        tmp_path: Path) -> None:
    """The whole shipped catalogue is certified, and the report names it."""
    done = cli("run", "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stderr
    assert "(profile reference)" in done.stderr and "failed" not in done.stderr
    line = "conforms to STOMP 1.0, 1.1 and 1.2: every MUST passed"
    assert done.stderr.endswith(f"\n{line}\nwrote {tmp_path / 'r.json'}\n")
    certification = json.loads((tmp_path / "r.json").read_text())["certification"]
    _, total = shipped_runs()
    assert (certification["verdict"], certification["conforms"]) == (line, True)
    assert certification["catalogue"] == {
        "version": "0.1.0", "digest": load_catalogue([default_cases()]).digest,
        "shipped": True, "whole": True, "selected": total, "total": total}


def test_a_selection_of_the_catalogue_is_not_certified_and_exits_as_before(
        tmp_path: Path) -> None:
    """-k (or --cases within the shipped catalogue) runs part of it: the line says how much
    in place of a verdict, passing or failing; the exit code is the grades' as ever."""
    selected, total = shipped_runs("negotiation")
    line = f"{selected} of {total} case runs selected: no certification verdict"
    done = cli("run", "-k", "negotiation", "--json", str(tmp_path / "k.json"))
    assert done.returncode == 0, done.stderr
    assert f"\n{line}\n" in done.stderr and "conforms" not in done.stderr
    certification = json.loads((tmp_path / "k.json").read_text())["certification"]
    assert (certification["verdict"], certification["conforms"]) == (line, None)
    assert certification["catalogue"] == {
        "version": "0.1.0", "digest": load_catalogue([default_cases()]).digest,
        "shipped": True, "whole": False, "selected": selected, "total": total}
    # a folder of the catalogue is a selection of it too
    folder = default_cases() / "escaping"
    escaping = sum(len(c.versions) for c in load_catalogue([folder]).cases)
    broker = subprocess.Popen([sys.executable, "-m", "conformance", "broker", "--port", "0",
                               "--fault", "no-escaping"], stderr=subprocess.PIPE, text=True)
    try:
        assert broker.stderr is not None
        port = broker.stderr.readline().rsplit(":", 1)[1].split()[0]
        done = cli("run", "--broker", f"127.0.0.1:{port}", "--cases", str(folder))
    finally:
        broker.terminate()
        broker.wait(30)
    assert done.returncode == 1, done.stderr  # a failure, as before
    assert re.search(r"^failed +escaping\.", done.stderr, re.M), done.stderr
    assert done.stderr.endswith(
        f"\n{escaping} of {total} case runs selected: no certification verdict\n")


def test_the_report_names_the_case_files_by_their_digest(tmp_path: Path) -> None:
    """Cases outside the shipped catalogue are never certified; the report's digest is of
    the files the run read, and follows a change to one."""
    path = Path(cases(tmp_path))
    digests = []
    with serving(TinyBroker()) as port:
        for edit in ("", "# an edit that changes no case\n"):
            path.write_text(CASE + edit)
            done = cli("run", "--broker", f"127.0.0.1:{port}", "--cases", str(path),
                       "--json", str(tmp_path / "r.json"), "--markdown", "-")
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith(f"**{OUTSIDE}**\n")
            certification = json.loads((tmp_path / "r.json").read_text())["certification"]
            assert (certification["verdict"], certification["conforms"]) == (OUTSIDE, None)
            catalogue = certification["catalogue"]
            assert catalogue == {"version": "0.1.0", "digest": catalogue["digest"],
                                 "shipped": False, "whole": False, "selected": 2, "total": 2}
            assert catalogue["digest"] == load_catalogue([path]).digest
            short = catalogue["digest"][:len("sha256:") + 12]
            assert (f"Catalogue: cases outside the shipped catalogue of 0.1.0 ({short}): "
                    "2 of 2 case runs selected\n") in done.stdout
            digests.append(catalogue["digest"])
    assert digests[0] != digests[1]


def test_baseline_gate_fails_only_on_regressions(tmp_path: Path) -> None:
    passing, failing = tmp_path / "passing.json", tmp_path / "failing.json"
    with serving(TinyBroker()) as good, serving(TinyBroker("no-receipt")) as bad:
        def run(port: int, *extra: str) -> tuple[int, str]:
            done = cli("run", "--broker", f"127.0.0.1:{port}", "--cases", cases(tmp_path),
                       *extra)
            return done.returncode, done.stderr

        assert run(good, "--json", str(passing))[0] == 0
        assert run(bad, "--json", str(failing))[0] == 1
        # a broker that fails where its baseline failed too may adopt the suite: exit 0
        code, err = run(bad, "--baseline", str(failing))
        assert code == 0, err
        assert "0 regressions, 0 new passes, 2 still failing" in err
        # what passed in the baseline and fails now: exit 1, each regression named
        code, err = run(bad, "--baseline", str(passing))
        assert code == 1
        assert "regression (passed in the baseline): receipts.send-gets-receipt [1.1]" in err
        assert "2 regressions" in err
        # fixed since the baseline: new passes listed
        code, err = run(good, "--baseline", str(failing))
        assert code == 0
        assert "new pass (not passing in the baseline): receipts.send-gets-receipt [1.2]" in err


def test_a_baseline_that_is_not_a_report_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "junk.json").write_text('{"cases": []}')
    (tmp_path / "text.json").write_text("not json")
    for name, says in (("junk.json", "is not a stomp-conformance JSON report"),
                       ("text.json", "is not JSON"), ("missing.json", "cannot read")):
        done = cli("run", "--cases", cases(tmp_path), "--baseline", str(tmp_path / name))
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


PROFILE = """\
name: tiny
deviations:
  receipts.send-gets-receipt:
    observed: no RECEIPT
    statement: receipt.receipt-id-required
    reason: the tiny broker drops receipts
"""


def test_strict_grades_known_deviations_as_failures(tmp_path: Path) -> None:
    """The same broker, the same profile: without --strict its declared failures are
    known deviations and exit 0; with it they fail and exit 1. Both say the same verdict,
    on the console and at the top of every report."""
    (tmp_path / "tiny.yaml").write_text(PROFILE)
    line = OUTSIDE  # cases of its own: the counts behind the line say the same
    with serving(TinyBroker("no-receipt")) as port:
        def run(name: str, *extra: str) -> tuple[int, str, dict[str, Any]]:
            out = tmp_path / name
            done = cli("run", "--broker", f"127.0.0.1:{port}", "--cases", cases(tmp_path),
                       "--profile", str(tmp_path / "tiny.yaml"), "--json", f"{out}.json",
                       "--html", f"{out}.html", "--markdown", f"{out}.md", *extra)
            assert "Traceback" not in done.stderr
            assert f"\n{line}\n" in done.stderr  # the console's last word before the files
            assert (out.with_suffix(".md")).read_text().splitlines()[0] == f"**{line}**"
            assert f'id="verdict">{line}</div>' in out.with_suffix(".html").read_text()
            return done.returncode, done.stderr, json.loads(out.with_suffix(".json")
                                                            .read_text())

        code, err, report = run("tolerant")
        assert code == 0, err
        assert {c["outcome"] for c in report["cases"]} == {"known-deviation"}
        assert report["certification"] == {
            "strict": False, "conforms": None, "verdict": line, "must_failed": 2,
            "known_deviations": 2, "should_not_met": 0, "errors": 0,
            "catalogue": report["certification"]["catalogue"]}

        code, err, report = run("strict", "--strict")
        assert code == 1, err
        assert {c["outcome"] for c in report["cases"]} == {"failed"}
        assert all(c["deviation"] == "no RECEIPT (the tiny broker drops receipts)"
                   for c in report["cases"])
        assert report["certification"]["strict"] is True
        assert report["certification"]["verdict"] == line
        assert (report["certification"]["must_failed"],
                report["certification"]["known_deviations"]) == (2, 2)

        # strict grades feed the baseline: failing where the baseline had a known
        # deviation is no regression
        code, err, _ = run("gated", "--strict", "--baseline", str(tmp_path / "tolerant.json"))
        assert code == 0, err
        assert "0 regressions, 0 new passes, 2 still failing" in err


def test_a_run_of_other_cases_says_so_on_the_console(tmp_path: Path) -> None:
    with serving(TinyBroker()) as port:
        done = cli("run", "--broker", f"127.0.0.1:{port}", "--cases", cases(tmp_path),
                   "--strict")
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith(f"\n{OUTSIDE}\n")
