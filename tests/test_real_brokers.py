"""The catalogue against real brokers on loopback: RabbitMQ, ActiveMQ, coilmq and stompserver
(STOMP 1.0 only) over TCP, and over WebSocket RabbitMQ's Web-STOMP and stomp-broker-js,
started by the project's own scripts (.ci/brokers/NAME) when they are not already running.

Each run must end with exit code 0 through its shipped profile: every failure is a recorded
deviation, and every deviation not marked intermittent still shows up, so a profile can
neither hide a new failure nor keep a deviation the broker no longer has. Under CI=true a
broker that cannot be started fails the test; elsewhere it is skipped with the reason."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import cli

from conformance.profiles import load_profile

ROOT = Path(__file__).resolve().parents[1]
#: profile -> the .ci/brokers script that starts its broker, and where the broker listens
BROKERS = {"rabbitmq": ("rabbitmq", "127.0.0.1:61613"),
           "rabbitmq-web": ("rabbitmq", "ws://127.0.0.1:15674/ws"),
           "activemq": ("activemq", "127.0.0.1:61614"),
           "coilmq": ("coilmq", "127.0.0.1:61615"),
           "stompserver": ("stompserver", "127.0.0.1:61617"),
           "stomp-broker-js": ("stomp-broker-js", "ws://127.0.0.1:61619/ws")}
#: brokers whose CONNECTED names no server (a STOMP 1.0 CONNECTED has no server header)
NO_SERVER_HEADER = {"stompserver"}


def vhost(name: str) -> list[str]:
    """coilmq takes in a 1.2 CONNECT only the host name it runs under, which its start script
    records (localhost, unless it could not give coilmq a host name of its own)."""
    recorded = Path("/run/coilmq-61615.host")
    if name == "coilmq" and recorded.is_file():
        return ["--vhost", recorded.read_text().strip()]
    return []


def script(name: str, verb: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(ROOT / ".ci" / "brokers" / name), verb],
                          capture_output=True, text=True, timeout=timeout)


pytestmark = [pytest.mark.slow, pytest.mark.timing]


# "SCRIPT:PROFILE": the tests of one broker go to one worker, which starts it once (sharing.py)
@pytest.fixture(scope="module", params=sorted(BROKERS),
                ids=lambda profile: f"{BROKERS[profile][0]}:{profile}")
def broker(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    profile: str = request.param
    name, address = BROKERS[profile]
    started = False
    if script(name, "status", 30).returncode != 0:
        try:
            done = script(name, "start", 600)
            problem = "" if done.returncode == 0 else \
                (done.stderr.strip().splitlines() or ["no output"])[-1]
        except (OSError, subprocess.TimeoutExpired) as error:
            problem = str(error)
        if problem:
            why = f"cannot start {name} with .ci/brokers/{name} start: {problem}"
            if os.environ.get("CI"):
                pytest.fail(why)
            pytest.skip(why)
        started = True
    yield profile, address
    if started:
        script(name, "stop", 120)


def test_the_catalogue_against_a_real_broker(broker: tuple[str, str], tmp_path: Path) -> None:
    name, address = broker
    report_path = tmp_path / f"{name}.json"
    # a real broker's cases wait more than they work (stomp-broker-js answers few receipts):
    # twice the default run at once, as far as the profile's `jobs` lets
    done = cli("run", "--broker", address, "--profile", name, *vhost(name), "--jobs", "16",
               "--json", str(report_path), timeout=900)
    report = json.loads(report_path.read_text())
    bad = [f"{c['id']} [{c['version']}] {c['outcome']}: {c['message']}"
           for c in report["cases"] if c["outcome"] in ("failed", "error")]
    assert done.returncode == 0 and not bad, "\n".join(bad) or done.stderr[-2000:]
    if name not in NO_SERVER_HEADER:
        assert report["broker"]["server"], "the broker named no server in CONNECTED"
    if address.startswith("ws://"):  # the subprotocol it accepted is in the report
        assert report["broker"]["subprotocol"] in ("v10.stomp", "v11.stomp", "v12.stomp")
    deviations = load_profile(name).deviations
    # a deviation shows where a case run broke a statement it declares
    shown = {key for c in report["cases"] if any(b["declared"] for b in c["broken"])
             for key in (c["id"], f"{c['id']}@{c['version']}")}
    stale = [key for key, d in deviations.items() if key not in shown and not d.intermittent]
    assert not stale, f"deviations {name} no longer shows: {stale}"
    assert report["summary"]["outcomes"].get("known-deviation", 0) >= 1
