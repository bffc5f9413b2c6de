"""The committed fuzz report (reports/fuzz.*) against the committed campaigns it was made
from, and its crash reproducers replayed against the broker they crashed (stomp-broker-js,
launched on a port of its own): what is published is what the tool makes of it, and
reproduces."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from helpers import cli

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"
REFRESH = "reports/refresh fuzz (root on Debian 12; FUZZ_BROKERS=NAME for one broker)"


def buckets(report: dict[str, object]) -> dict[tuple[str, str], tuple[str, bool]]:
    brokers = report["brokers"]
    assert isinstance(brokers, list)
    return {(b["name"], k["signature"]): (k["category"], k["known"])
            for b in brokers for k in b["buckets"]}


def test_the_committed_report_is_the_triage_of_the_committed_campaigns(tmp_path: Path) -> None:
    folders = sorted(p for p in (REPORTS / "fuzz").iterdir() if p.is_dir())
    assert {p.name for p in folders} >= {"rabbitmq", "rabbitmq-web", "activemq", "coilmq",
                                         "stompserver", "stomp-broker-js"}
    done = cli("triage", *map(str, folders), "--comparison", str(REPORTS / "comparison.json"),
               "--notes", str(REPORTS / "fuzz-notes.yaml"), "--json", str(tmp_path / "f.json"))
    assert done.returncode == 0, done.stderr
    committed = json.loads((REPORTS / "fuzz.json").read_text())
    made = json.loads((tmp_path / "f.json").read_text())
    changed = sorted(set(buckets(committed).items()) ^ set(buckets(made).items()))
    assert not changed, f"buckets changed since reports/fuzz.* was made: {changed[:10]}; " \
                        f"run {REFRESH}, or triage again"
    for broker in committed["brokers"]:  # reproducible: who, with what, for how long
        assert broker["version"] and broker["campaign"]["seed"], broker["name"]
        assert broker["campaign"]["tool_version"], broker["name"]
        assert broker["campaign"]["elapsed_s"] >= 60, broker["name"]
        # each finding replayed after its campaign, the tally published (a leak shows over
        # a campaign's window, not in a replay)
        unreplayed = [f["id"] for b in broker["buckets"] if b["generator"] == "grammar"
                      and b["kind"] != "leak" for f in b["findings"] if not f["replays"]]
        assert not unreplayed, f"{broker['name']}: not replayed: {unreplayed[:5]}; run " \
                               "reports/refresh replays"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("node") is None or
                    not Path("/var/tmp/stomp-conformance-stomp-broker-js/node_modules").is_dir(),
                    reason="stomp-broker-js is not installed (.ci/brokers/stomp-broker-js install)")
def test_each_committed_crash_of_stomp_broker_js_replays() -> None:
    folder = REPORTS / "fuzz" / "stomp-broker-js" / "findings"
    crashes = [p for p in sorted(folder.glob("*.json"))
               if json.loads(p.read_text())["kind"] == "crash"
               and json.loads(p.read_text())["confirmed"]]
    assert crashes, "the committed campaign found no crash of stomp-broker-js"
    for path in crashes:
        port = free_port()
        done = cli("replay", str(path), "--broker", f"ws://127.0.0.1:{port}/ws", "--profile",
                   "stomp-broker-js", "--launch",
                   f"STOMP_WS_PORT={port} {ROOT / '.ci/brokers/stomp-broker-js'} run")
        assert done.returncode == 1, (path.name, done.stdout, done.stderr)
        assert "reproduced 1/1" in done.stdout, done.stdout
