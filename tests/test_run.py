"""`stomp-conformance run` end to end: a real broker peer on loopback, the exit codes of the
contract, one-line errors, and no credentials in what it prints."""

from __future__ import annotations

import json
import re
import ssl
from pathlib import Path
from typing import Any

import pytest
import trustme
from helpers import cli
from peers import TinyBroker, serving

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


@pytest.mark.slow
def test_run_with_no_arguments_runs_the_catalogue_against_the_reference_broker() -> None:
    done = cli("run")
    assert done.returncode == 0, done.stderr
    assert "(profile reference)" in done.stderr and "failed" not in done.stderr


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
    reason: the tiny broker drops receipts
"""


def test_strict_grades_known_deviations_as_failures(tmp_path: Path) -> None:
    """The same broker, the same profile: without --strict its declared failures are
    known deviations and exit 0; with it they fail and exit 1. Both say the same verdict,
    on the console and at the top of every report."""
    (tmp_path / "tiny.yaml").write_text(PROFILE)
    line = "does not conform: 2 MUST case runs failed, 2 of them known deviations"
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
            "strict": False, "conforms": False, "verdict": line, "must_failed": 2,
            "known_deviations": 2, "should_not_met": 0, "errors": 0}

        code, err, report = run("strict", "--strict")
        assert code == 1, err
        assert {c["outcome"] for c in report["cases"]} == {"failed"}
        assert all(c["deviation"] == "no RECEIPT (the tiny broker drops receipts)"
                   for c in report["cases"])
        assert report["certification"]["strict"] is True
        assert report["certification"]["verdict"] == line

        # strict grades feed the baseline: failing where the baseline had a known
        # deviation is no regression
        code, err, _ = run("gated", "--strict", "--baseline", str(tmp_path / "tolerant.json"))
        assert code == 0, err
        assert "0 regressions, 0 new passes, 2 still failing" in err


def test_a_conformant_run_says_so_on_the_console(tmp_path: Path) -> None:
    with serving(TinyBroker()) as port:
        done = cli("run", "--broker", f"127.0.0.1:{port}", "--cases", cases(tmp_path),
                   "--strict")
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith("conforms to STOMP 1.1 and 1.2: every MUST passed\n")
