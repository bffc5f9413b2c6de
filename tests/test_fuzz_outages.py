"""The resource oracle and crash attribution: campaigns that launch their broker
(`fuzz --launch`), against brokers that crash, hang and leak as real ones do
(tests/fragile.py), and against a real broker that crashes (stomp-broker-js, launched by
its .ci/brokers script); the oracle's rules in memory."""

from __future__ import annotations

import json
import shutil
import socket
import sys
from pathlib import Path

import pytest
from helpers import cli

from conformance.fuzz.network.process import (
    Resources,
    Sample,
    Thresholds,
    crash_line,
    crash_site,
)

ROOT = Path(__file__).resolve().parents[1]
FRAGILE = Path(__file__).with_name("fragile.py")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fragile(mode: str, port: int) -> str:
    return f"{sys.executable} {FRAGILE} {mode} {port}"


def findings(folder: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((folder / "findings").glob("*.json"))]


def resources(folder: Path) -> dict[str, object]:
    value = json.loads((folder / "state.json").read_text())["resources"]
    assert isinstance(value, dict)
    return value


# -- the oracle's rules, in memory ------------------------------------------------------------

def test_a_crash_is_told_by_the_error_the_broker_printed_its_numbers_blanked() -> None:
    log = ("server started on port 61619\n/opt/broker/lib/frame.js:42\n"
           "TypeError: Cannot read properties of undefined (reading 'substr') at 0x7f3a\n"
           "    at parse (/opt/broker/lib/frame.js:42:17)\n")
    again = log.replace("0x7f3a", "0x9c01").replace("61619", "62000")
    assert crash_line(log, 1) == crash_line(again, 1)
    assert "TypeError: Cannot read properties of undefined (reading 'substr')" in \
        crash_line(log, 1)
    # the input's octets quoted in the message are blanked, a name is kept
    assert crash_line("SyntaxError: Unexpected token 'S', \"SEND,\" is not valid JSON", 1) == \
        crash_line("SyntaxError: Unexpected token '\u00e9', \"\u00e9\" is not valid JSON", 1) == \
        crash_line("SyntaxError: Unexpected token 'h', \"hello\" is not valid JSON", 1)
    assert crash_site(log) == "at parse (/opt/broker/lib/frame.js:42:17)"
    python = 'Traceback:\n  File "/srv/broker.py", line 7, in read\n    x()\nKeyError: 1\n'
    assert crash_site(python) == 'File "/srv/broker.py", line 7, in read'
    assert crash_line("bye\n", -9) == "killed by signal 9"
    assert crash_line("", 3) == "exit status 3"
    assert crash_line("", None) == "alive, not answering"


def sample(at: float, mib: int, fds: int = 10) -> Sample:
    return Sample(at, mib << 20, 1.0, fds, 4, 1)


def test_growth_is_a_leak_only_when_it_lasts_the_whole_window() -> None:
    oracle = Resources(Thresholds(rss=100 << 20, fds=50, threads=50, window=10.0))
    assert oracle.add(sample(0, 200)) is None
    assert oracle.add(sample(5, 400)) is None          # above, but not for a window yet
    assert oracle.add(sample(9, 250)) is None          # back below: no leak
    assert oracle.add(sample(14, 450)) is None         # the window 4..14 holds 250 MiB
    assert oracle.add(sample(18, 460)) is None         # and 8..18 too
    growth = oracle.add(sample(25, 470))               # 15..25: all above 300 MiB
    assert growth is not None and growth.resource == "rss"
    assert "200 MiB to 470 MiB" in str(growth)
    oracle.restarted()
    assert oracle.add(sample(30, 470)) is None         # a new start, a new baseline
    assert oracle.summary()["peak_rss"] == 470 << 20


def test_file_descriptors_that_pile_up_are_a_leak() -> None:
    oracle = Resources(Thresholds(rss=1 << 40, fds=50, threads=50, window=2.0))
    for at, fds in ((0, 10), (1, 70), (2, 80), (3, 90)):
        growth = oracle.add(sample(at, 100, fds))
    assert growth is not None and growth.resource == "fds"


# -- campaigns that launch their broker -------------------------------------------------------

@pytest.mark.slow
def test_a_crash_is_tied_to_the_input_that_causes_it_and_replays(tmp_path: Path) -> None:
    port, corpus = free_port(), tmp_path / "campaign"
    launch = fragile("crash", port)
    done = cli("fuzz", "--broker", f"127.0.0.1:{port}", "--launch", launch, "--time", "4s",
               "--seed", "5", "--corpus", str(corpus), "--minimise", "4", "--jobs", "4",
               "--mutation", "missing-required-header")
    assert done.returncode == 1, done.stderr
    crashes = [f for f in findings(corpus) if f["kind"] == "crash"]
    assert len(crashes) == 1, crashes
    crash = crashes[0]
    # told apart by what the broker printed; tied to one input, which alone crashes it
    assert "TypeError: cannot read 'destination'" in str(crash["about"])
    assert crash["confirmed"] is True and crash["suspects"] == []
    assert "SEND" in "".join(crash["input"]["chunks"])  # type: ignore[index]
    # what the inputs cut short by the crash showed is not shown again: none counts
    assert not [f for f in findings(corpus) if f["kind"] != "crash" and f["confirmed"]]
    assert int(resources(corpus)["starts"]) >= 2  # type: ignore[call-overload]
    # replay starts the broker itself, and the input crashes it again
    replayed = cli("replay", str(corpus / "findings" / f"{crash['id']}.json"),
                   "--launch", launch)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "reproduced 1/1" in replayed.stdout
    assert "Traceback" not in replayed.stderr
    # The same input filed as a close without ERROR (as an input cut short by the crash
    # is): replayed, the close is the broker dying, a crash's, and that finding's own
    # anomaly never shows; the broker is started again for each try.
    closed = tmp_path / "closed" / "findings"
    closed.mkdir(parents=True)
    (closed / "closed.json").write_text(json.dumps({
        **crash, "kind": "closed-without-error", "about": "", "suspects": []}))
    replayed = cli("replay", str(closed), "--launch", launch, "--times", "2", "--record")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert replayed.stdout.count("the broker down: crash") == 2, replayed.stdout
    assert json.loads((closed / "closed.json").read_text())["replays"]["reproduced"] == 0


@pytest.mark.timing  # a broker slower than --hang-after would look hung
@pytest.mark.slow
def test_a_broker_that_stops_answering_is_a_hang_and_is_started_again(tmp_path: Path) -> None:
    port, corpus = free_port(), tmp_path / "campaign"
    done = cli("fuzz", "--broker", f"127.0.0.1:{port}", "--launch", fragile("hang", port),
               "--time", "4s", "--seed", "5", "--corpus", str(corpus), "--hang-after", "1",
               "--minimise", "0", "--jobs", "2", "--deadline", "1",
               "--mutation", "missing-required-header")
    assert done.returncode == 1, done.stderr
    hangs = [f for f in findings(corpus) if f["kind"] == "hang"]
    assert len(hangs) == 1 and hangs[0]["confirmed"] is True, hangs
    assert "lives but gives no CONNECTED" in str(hangs[0]["detail"])
    assert int(resources(corpus)["starts"]) >= 3  # type: ignore[call-overload]


@pytest.mark.slow
def test_a_broker_that_grows_for_a_whole_window_leaks(tmp_path: Path) -> None:
    port, corpus = free_port(), tmp_path / "campaign"
    done = cli("fuzz", "--broker", f"127.0.0.1:{port}", "--launch", fragile("leak", port),
               "--time", "6s", "--seed", "5", "--corpus", str(corpus), "--leak-rss", "64",
               "--leak-window", "2", "--jobs", "4", "--mutation", "unknown-command")
    assert "Traceback" not in done.stderr, done.stderr
    leaks = [f for f in findings(corpus) if f["kind"] == "leak"]
    assert len(leaks) == 1, findings(corpus)
    leak = leaks[0]
    assert leak["about"] == "rss" and "RSS grew from" in str(leak["detail"])
    # a leak grows over many inputs: kept with the last ones, tied to none
    assert leak["confirmed"] is False and leak["suspects"]
    figures = resources(corpus)
    assert int(figures["peak_rss"]) > int(figures["baseline_rss"]) + (64 << 20)  # type: ignore[call-overload]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("node") is None or
                    not Path("/var/tmp/stomp-conformance-stomp-broker-js/node_modules").is_dir(),
                    reason="stomp-broker-js is not installed (.ci/brokers/stomp-broker-js install)")
def test_a_campaign_finds_a_real_broker_crash_and_ties_it_to_its_input(tmp_path: Path) -> None:
    """stomp-broker-js 1.3.0, launched on a port of its own: a SUBSCRIBE without destination
    kills its process (a TypeError in its destination parsing); the campaign finds it, starts
    it again, and sends the suspects alone until one brings it down."""
    port, corpus = free_port(), tmp_path / "campaign"
    launch = f"STOMP_WS_PORT={port} {ROOT / '.ci/brokers/stomp-broker-js'} run"
    done = cli("fuzz", "--broker", f"ws://127.0.0.1:{port}/ws", "--profile", "stomp-broker-js",
               "--launch", launch, "--time", "8s", "--seed", "1", "--corpus", str(corpus),
               "--minimise", "5", "--mutation", "missing-required-header")
    assert done.returncode == 1, done.stderr
    crashes = [f for f in findings(corpus) if f["kind"] == "crash" and f["confirmed"]]
    assert crashes, findings(corpus)
    assert any("TypeError" in str(c["about"]) for c in crashes), crashes
    assert int(resources(corpus)["starts"]) >= 2  # type: ignore[call-overload]
