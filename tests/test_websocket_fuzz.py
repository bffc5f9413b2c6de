"""fuzz, replay, probe and stateful over STOMP over WebSocket, through the command line in
child processes: against the reference broker they start (--transport ws) and against a
reference broker serving ws:// in a process of its own. Findings record the transport, and
a finding's reproducer case runs with `run --broker ws://...`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import cli

FAULT = "error-without-close"  # the connection stays open after an ERROR


def findings(folder: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((folder / "findings").glob("*.json"))]


def fuzz(corpus: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    # one mutation the broker answers with ERROR, so a few seconds find the fault
    done = cli("fuzz", "--time", "3s", "--seed", "7", "--corpus", str(corpus), "--minimise",
               "1", "--mutation", "header-without-colon", *flags)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


@pytest.fixture
def ws_broker() -> Iterator[str]:
    """A reference broker with FAULT in a process of its own; yields its ws:// address."""
    process = subprocess.Popen(
        [sys.executable, "-m", "conformance", "broker", "--port", "0", "--ws-port", "0",
         "--fault", FAULT, "--until-stdin-closes"],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    assert process.stdin is not None and process.stderr is not None
    try:
        line = process.stderr.readline()
        found = re.search(r"ws://\S+", line)
        assert found, line
        yield found.group(0)
    finally:
        process.stdin.close()
        process.wait(timeout=10)
        process.stderr.close()


@pytest.mark.timing
@pytest.mark.slow
def test_a_ws_campaign_finds_the_fault_tcp_finds_and_the_finding_replays_over_ws(
        tmp_path: Path) -> None:
    done = fuzz(tmp_path / "ws", "--transport", "ws", "--fault", FAULT)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "fuzzing reference@ws://embedded+error-without-close" in done.stdout + done.stderr
    found = findings(tmp_path / "ws")
    assert found and {f["kind"] for f in found} == {FAULT}, [f["kind"] for f in found]
    for finding in found:
        assert finding["broker"] == {
            "id": "reference@ws://embedded+error-without-close", "address": "",
            "profile": "reference", "faults": [FAULT], "embedded": True, "tls": False,
            "transport": "ws", "launch": ""}
    # the same kind of finding over TCP
    tcp = fuzz(tmp_path / "tcp", "--fault", FAULT)
    assert tcp.returncode == 1, tcp.stdout + tcp.stderr
    assert {f["kind"] for f in findings(tmp_path / "tcp")} == {FAULT}
    assert all(f["broker"]["transport"] == "tcp"  # type: ignore[index]
               for f in findings(tmp_path / "tcp"))
    # replayed with no flags: the reference broker again, over WebSocket again
    failed = next(f for f in found if f["grade"] == "failed")
    path = tmp_path / "ws" / "findings" / f"{failed['id']}.json"
    replayed = cli("replay", str(path))
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "replaying against reference@ws://embedded+error-without-close" in replayed.stdout
    assert "reproduced 1/1" in replayed.stdout
    # without the fault it does not reproduce
    clean = cli("replay", str(path), "--fault", "no-heartbeats")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "reference@ws://embedded+no-heartbeats" in clean.stdout


@pytest.mark.timing
@pytest.mark.slow
def test_a_finding_on_a_ws_broker_records_its_address_and_its_case_runs_there(
        tmp_path: Path, ws_broker: str) -> None:
    done = fuzz(tmp_path / "c", "--broker", ws_broker)
    assert done.returncode == 1, done.stdout + done.stderr
    found = [f for f in findings(tmp_path / "c") if f["grade"] == "failed"]
    assert found, findings(tmp_path / "c")
    finding = found[0]
    assert finding["kind"] == FAULT
    assert finding["broker"]["address"] == ws_broker  # type: ignore[index]
    assert finding["broker"]["id"] == f"reference@{ws_broker}"  # type: ignore[index]
    assert finding["broker"]["transport"] == "ws"  # type: ignore[index]
    stem = tmp_path / "c" / "findings" / str(finding["id"])
    replayed = cli("replay", f"{stem}.json")  # the recorded ws:// address
    assert replayed.returncode == 1 and "reproduced 1/1" in replayed.stdout, replayed.stdout
    ran = cli("run", "--broker", ws_broker, "--cases", f"{stem}.yaml")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert re.search(r"^failed +\S+ \[1\.\d\]", ran.stderr, re.M), ran.stderr
    # the reproducer is a case of its own, not the catalogue's: no verdict
    assert ran.stderr.endswith(
        "\n1 case run of cases outside the shipped catalogue: no certification verdict\n")


def test_probe_split_over_ws_passes() -> None:
    done = cli("probe", "--transport", "ws", "--probe", "split")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the reference broker over WebSocket" in done.stdout
    assert re.search(r"passed\s+split", done.stdout), done.stdout


@pytest.mark.timing
def test_stateful_over_ws_runs_clean(tmp_path: Path) -> None:
    done = cli("stateful", "--transport", "ws", "--examples", "5", "--seed", "3", "--time",
               "30s", "--output", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "exploring reference@ws://embedded with seed 3" in done.stderr
    assert "no failing session" in done.stdout


@pytest.mark.parametrize("verb", ["fuzz", "probe", "stateful"])
def test_a_transport_the_url_contradicts_is_a_usage_error(verb: str, tmp_path: Path) -> None:
    done = cli(verb, "--broker", "ws://127.0.0.1:1/ws", "--transport", "tcp",
               *(["--corpus", str(tmp_path)] if verb == "fuzz" else []))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--transport tcp contradicts --broker ws://127.0.0.1:1/ws" in done.stderr


@pytest.mark.timing
@pytest.mark.slow
def test_stateful_over_ws_finds_a_planted_fault_through_the_ws_port(tmp_path: Path) -> None:
    # the fault and seed tests/test_stateful_verb.py finds within a few seconds over TCP,
    # then 5 s of shrinking
    done = cli("stateful", "--transport", "ws", "--fault", "no-implicit-abort", "--seed", "1",
               "--examples", "400", "--time", "60s", "--shrink-time", "5s", "--output",
               str(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    (written,) = tmp_path.glob("*.yaml")
    # the case's note names where the session ran: the reference broker's WebSocket port
    assert re.search(r"against\s+#?\s*ws://127\.0\.0\.1:\d+/ws", written.read_text()), \
        written.read_text()[:600]
