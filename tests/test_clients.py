"""Client conformance: the reference driver passes every client case over TCP, each of its
faults kills the cases tagged with it, a driver that crashes, hangs or prints garbage gives
a one-line error, a bad client case file names its line, and the verb's exit codes; over
WebSocket, the scripted broker's negotiation, the transcript's messages, the report's
subprotocols and the selftest's kills."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance.cli import main
from conformance.clients import REFERENCE_DRIVER, ClientInfo, driver_process, run_client_cases
from conformance.clients.driver_process import Driver
from conformance.clients.faults import CLIENT_FAULTS, WEBSOCKET_CLIENT_FAULTS
from conformance.codec import Frame, validate_client_frame
from conformance.runner.results import SEVERITY, CaseResult, Outcome
from conformance.scenario import CaseLoadError
from conformance.scenario.loader import load_cases
from conformance.selftest import client_selftest

ROOT = Path(__file__).resolve().parent.parent
CASES = load_cases([ROOT / "cases"], client=True)
PY = shlex.quote(sys.executable)


def run(cases: list, driver: str = REFERENCE_DRIVER, transport: str = "tcp") -> list[CaseResult]:
    return asyncio.run(run_client_cases(cases, driver, jobs=8, timeout=20, transport=transport))


def script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "driver.py"
    path.write_text(textwrap.dedent(body))
    return f"{PY} {shlex.quote(str(path))}"


def test_the_client_catalogue_is_loaded_apart_from_the_broker_cases() -> None:
    assert len(CASES) >= 12
    assert all(c.id.startswith("clients.") for c in CASES)
    assert not any(c.id.startswith("clients.") for c in load_cases([ROOT / "cases"]))


@pytest.fixture(scope="session")
def selftests(shared: Callable[[str, Callable[[Path], None]], Path]
              ) -> Callable[[str], dict[str, Any]]:
    """The client self-test's JSON over a transport (tcp, ws), run once for the whole run:
    the catalogue through the reference driver, then under each fault the cases name."""
    def over(transport: str) -> dict[str, Any]:
        def make(folder: Path) -> None:
            result = asyncio.run(client_selftest(CASES, jobs=8, timeout=20,
                                                 transport=transport))
            (folder / "selftest.json").write_text(json.dumps(result.to_json()))

        made = shared(f"client-selftest-{transport}", make) / "selftest.json"
        report: dict[str, Any] = json.loads(made.read_text())
        return report

    return over


@pytest.mark.timing
@pytest.mark.slow
def test_the_reference_driver_passes_every_client_case(
        selftests: Callable[[str], dict[str, Any]]) -> None:
    report = selftests("tcp")
    assert report["not_passing"] == []
    over_tcp = [c for c in CASES if "tcp" in c.transports]
    assert report["case_runs"] == sum(len(c.versions) for c in over_tcp)


@pytest.mark.parametrize("fault", sorted(CLIENT_FAULTS))
@pytest.mark.timing
@pytest.mark.slow
def test_each_fault_kills_the_cases_tagged_with_it(
        fault: str, selftests: Callable[[str], dict[str, Any]]) -> None:
    tagged = [c.id for c in CASES if f"fault:{fault}" in c.tags]
    assert tagged, f"no client case is tagged fault:{fault}"
    row = selftests("ws" if fault in WEBSOCKET_CLIENT_FAULTS else "tcp")["matrix"][fault]
    for case in tagged:  # each case's worst version under the fault
        assert row[case] != Outcome.ERROR.value, (case, row[case])
        assert SEVERITY[Outcome(row[case])] > SEVERITY[Outcome.PASSED], case


def test_a_handshake_defect_is_graded_where_checked_and_served_elsewhere() -> None:
    """A CONNECT without host fails the case that checks it; a case about another rule
    serves it (a lenient handshake, named) and grades the rest: one defect hides nothing."""
    picked = [c for c in CASES if c.id in ("clients.connect.required-headers",
                                           "clients.send.required-headers")]
    results = {(r.id, r.version): r for r in run(picked, f"{REFERENCE_DRIVER} --fault no-host")}
    checked = results["clients.connect.required-headers", "1.2"]
    assert checked.outcome == Outcome.FAILED and checked.statement == "connect.required-headers"
    served = results["clients.send.required-headers", "1.2"]
    assert served.outcome == Outcome.PASSED, served.message
    assert "lenient handshake" in served.message and "connect.required-headers" in served.message
    # the rest is still judged: a SEND without destination fails the served case
    (bad,) = run([c for c in picked if c.id == "clients.send.required-headers"],
                 f"{REFERENCE_DRIVER} --fault no-host --fault send-destination-capitalized")[-1:]
    assert bad.outcome == Outcome.FAILED and "lenient handshake" in bad.message


def one_line_error(results: list[CaseResult]) -> str:
    (result,) = results
    assert result.outcome == Outcome.ERROR
    assert result.message and "\n" not in result.message and "Traceback" not in result.message
    return result.message


def test_a_driver_that_crashes_gives_a_one_line_error(tmp_path: Path) -> None:
    driver = script(tmp_path, """
        import sys
        print("boom", file=sys.stderr)
        sys.exit(7)
    """)
    message = one_line_error(run(CASES[:1], driver)[:1])
    assert "exited (7)" in message and "boom" in message


def test_a_driver_that_prints_garbage_gives_a_one_line_error(tmp_path: Path) -> None:
    driver = script(tmp_path, """
        print("hello, I am not JSON", flush=True)
        import time; time.sleep(30)
    """)
    assert "not JSON" in one_line_error(run(CASES[:1], driver)[:1])


def test_a_driver_that_never_says_ready_gives_a_one_line_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_process, "READY_WITHIN", 1.0)
    driver = script(tmp_path, "import time; time.sleep(30)\n")
    assert "ready" in one_line_error(run(CASES[:1], driver)[:1])


def test_a_driver_that_hangs_on_a_command_gives_a_one_line_error(tmp_path: Path) -> None:
    driver = script(tmp_path, """
        import json, sys, time
        print(json.dumps({"event": "ready", "library": "hang", "version": "0"}), flush=True)
        sys.stdin.readline()
        time.sleep(30)
    """)
    case = tmp_path / "clients" / "hang.yaml"
    case.parent.mkdir()
    case.write_text(textwrap.dedent("""
        id: clients.hang
        title: a command that never returns
        statements: [connect.required-headers]
        versions: ["1.2"]
        steps:
          - driver: {op: connect, url: "${url}", version: "${version}", wait: true, within: 1}
    """))
    message = one_line_error(run(load_cases([case.parent], client=True), driver))
    assert "did not finish 'connect'" in message


def test_a_driver_that_cannot_gives_unsupported(tmp_path: Path) -> None:
    driver = script(tmp_path, """
        import json, sys
        print(json.dumps({"event": "ready", "library": "x", "version": "0"}), flush=True)
        for line in sys.stdin:
            op = json.loads(line)["op"]
            print(json.dumps({"event": "failed", "op": op,
                              "error": "unsupported: no such thing"}), flush=True)
    """)
    (result,) = run([c for c in CASES if c.id == "clients.ack.v11-message-id"], driver)
    assert result.outcome == Outcome.UNSUPPORTED


def test_a_bad_client_case_file_names_its_line(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "clients" / "bad.yaml"
    bad.parent.mkdir()
    bad.write_text("id: clients.bad\ntitle: bad\nstatements: [connect.required-headers]\n"
                   "versions: ['1.2']\nsteps:\n  - handshake: {}\n  - expect_frame: {nope: 1}\n")
    with pytest.raises(CaseLoadError, match=r"bad.yaml:7: "):
        load_cases([bad.parent], client=True)
    assert main(["clients", "--cases", str(bad.parent)]) == 2
    assert "bad.yaml:7:" in capsys.readouterr().err


def test_the_verb_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.json"
    assert main(["clients", "-k", "send.nul-body", "--json", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["client"]["library"] == "stomp-conformance reference driver"
    assert "broker" not in data and data["summary"]["outcomes"]["passed"] == 2
    assert main(["clients", "-k", "send.nul-body", "--driver",
                 f"{REFERENCE_DRIVER} --fault no-content-length"]) == 1
    crash = script(tmp_path, "import sys; sys.exit(1)\n")
    assert main(["clients", "-k", "send.nul-body", "--driver", crash]) == 3
    assert main(["clients", "--driver", "'unbalanced"]) == 2
    assert main(["clients", "-k", "no-such-case"]) == 2
    err = capsys.readouterr().err
    assert "no case could be graded" in err and "--driver:" in err


def test_the_console_masks_the_passcode_as_the_report_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.json"
    assert main(["clients", "-k", "connect.credentials", "--json", str(report), "--driver",
                 f"{REFERENCE_DRIVER} --fault no-passcode"]) == 0  # a MAY: informational
    shown = capsys.readouterr().err + report.read_text()
    assert "password:***" in shown and "pw-" not in shown


def test_the_client_frame_validator() -> None:
    def broken(command: str, headers: list[tuple[str, str]], version: str) -> list[str]:
        return [v.statement for v in validate_client_frame(Frame(command, headers),
                                                           version=version)]  # type: ignore[arg-type]

    # a 1.0 UNSUBSCRIBE "requires either a destination header or an id header"
    assert broken("UNSUBSCRIBE", [("id", "s1")], "1.0") == []
    assert broken("UNSUBSCRIBE", [("destination", "/queue/a")], "1.0") == []
    assert broken("UNSUBSCRIBE", [], "1.0") == ["unsubscribe.id-or-destination-v10"]
    assert broken("UNSUBSCRIBE", [("destination", "/queue/a")], "1.2") == \
        ["unsubscribe.id-required"]
    # accept-version: "a comma separated list of incrementing STOMP protocol versions"
    for offer in ("1.2", "1.1,1.2", "1.0,1.1,1.2"):
        assert broken("CONNECT", [("accept-version", offer), ("host", "h")], "1.2") == []
    for offer in ("1.2,1.0", "1.1,1.1", "1.2,", "v1.2", "1.0, 1.1"):
        assert broken("CONNECT", [("accept-version", offer), ("host", "h")], "1.2") == \
            ["negotiation.accept-version-format"], offer


def test_coverage_counts_client_statements_apart(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["coverage", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    clients = report["clients"]
    assert clients["uncovered"] == [] and clients["covered_pairs"] >= 130
    assert {"statement": "ack.id-required", "version": "1.2",
            "cases": ["clients.ack.v12-ack-header"]} in clients["covered"]
    assert report["uncovered"] == []  # the broker numbers are unchanged


def test_an_event_taken_by_a_cancelled_wait_is_kept_for_the_next() -> None:
    """A step waits for the client's connection and the driver's next event at once and
    cancels the wait that lost; an event that wait had just taken is not lost."""
    async def scenario() -> dict[str, Any] | None:
        driver = Driver(["true"])
        waiting = asyncio.create_task(driver.next_event(5))
        await asyncio.sleep(0)
        driver.events.put_nowait({"event": "receipt", "id": "r1"})
        waiting.cancel()  # in the same tick: the queue has handed the event over
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        return await driver.next_event(0.1)

    assert asyncio.run(scenario()) == {"event": "receipt", "id": "r1"}


# -- over WebSocket ---------------------------------------------------------------------------

def test_over_websocket_the_transcript_has_each_message_and_the_report_the_subprotocol(
        tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    assert main(["clients", "--transport", "ws", "-k", "send.nul-body", "--json",
                 str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["client"]["transport"] == "ws"
    assert data["client"]["websocket"] == {
        v: {"offered": [f"v1{v[-1]}.stomp"], "accepted": f"v1{v[-1]}.stomp"}
        for v in ("1.1", "1.2")}
    notes = [r["note"] for r in data["cases"][0]["transcript"] if r["dir"] == "note"]
    assert any(n.startswith("WebSocket upgrade of /ws offering v1") for n in notes)
    # the client's SEND, holding a NUL, came as one text message; CONNECTED went as one
    assert any(n.startswith("in text message, ") for n in notes)
    assert any(n.startswith("out text message, ") for n in notes)


def test_over_websocket_a_client_offering_no_subprotocol_is_refused_at_its_accept(
        tmp_path: Path) -> None:
    driver = script(tmp_path, """
        import asyncio, json, sys
        from conformance.wire.transport import open_transport, parse_broker
        print(json.dumps({"event": "ready", "library": "bare", "version": "0"}), flush=True)
        for line in sys.stdin:
            command = json.loads(line)
            if command["op"] != "connect":
                break
            try:
                asyncio.run(open_transport(parse_broker(command["url"]), subprotocols=[]))
            except Exception as error:
                print(json.dumps({"event": "failed", "op": "connect", "error": str(error)}),
                      flush=True)
    """)
    info = ClientInfo(driver="bare", transport="ws")
    results = asyncio.run(run_client_cases(
        [c for c in CASES if c.id == "clients.send.receipt"], driver, transport="ws",
        info=info))
    (result,) = [r for r in results if r.version == "1.2"]
    assert result.outcome == Outcome.INFORMATIONAL  # the case's level: a MAY
    assert "offering v12.stomp" in result.expected
    assert "offering no subprotocol refused with HTTP 400" in result.observed
    assert info.websocket["1.2"] == {"offered": [], "accepted": None}


@pytest.mark.timing
@pytest.mark.slow
def test_the_client_selftest_over_websocket_kills_every_case(
        selftests: Callable[[str], dict[str, Any]],
        capsys: pytest.CaptureFixture[str]) -> None:
    report = selftests("ws")
    assert report["ok"] and report["kill_rate"] == 1.0 and report["not_passing"] == []
    assert set(WEBSOCKET_CLIENT_FAULTS) <= set(report["matrix"])
    # the verb shows the kills, here of the cases that run over WebSocket only (the other
    # faults then kill nothing: exit 1)
    assert main(["clients", "--selftest", "--transport", "ws", "--jobs", "8", "--cases",
                 str(ROOT / "cases" / "clients" / "websocket.yaml")]) == 1
    out = capsys.readouterr().out
    assert "clients.websocket.frames-across-messages: ws-message-is-frame" in out
    assert "kill rate 100.0%" in out and "fault no-host makes no case fail" in out
