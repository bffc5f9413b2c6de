"""Fuzz campaigns through the command line, in child processes, against the reference
broker (embedded, with and without a fault) and hostile peers: findings saved as found
and replayed, exit codes, kill -9 and resume, refusal of remote targets."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cli
from peers import serving

from conformance.fuzz.network.where import UsageError, parse_duration
from conformance.scenario import load_file

FAULT = "accept-undefined-escape"  # an undefined escape is accepted, not refused


def findings(folder: Path) -> dict[str, dict[str, object]]:
    out = {}
    for path in sorted((folder / "findings").glob("*.json")):
        data = json.loads(path.read_text())
        out[data["id"]] = data
    return out


def state(folder: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((folder / "state.json").read_text())
    return data


def counters(folder: Path) -> dict[str, int | float]:
    value = state(folder)["counters"]
    assert isinstance(value, dict)
    return value


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr


@pytest.mark.timing
@pytest.mark.slow
def test_a_campaign_with_a_fault_finds_it_and_the_finding_replays(tmp_path: Path) -> None:
    corpus, results = tmp_path / "campaign", tmp_path / "results"
    done = cli("fuzz", "--time", "6s", "--seed", "11", "--corpus", str(corpus), "--fault",
               FAULT, "--results", str(results), "--minimise", "3")
    no_traceback(done)
    assert done.returncode == 1, done.stderr
    found = findings(corpus)
    escapes = [f for f in found.values() if f["kind"] == "accepted-silently"
               and str(f["statement"]).startswith("value-encoding.undefined-escape-fatal")]
    assert escapes, found.keys()
    for finding in escapes:
        assert finding["grade"] == "failed" and finding["confirmed"] is True
        assert (corpus / "findings" / f"{finding['id']}.yaml").is_file()
        assert str(finding["replay"]).startswith("stomp-conformance replay ")
        replayed = cli("replay", str(corpus / "findings" / f"{finding['id']}.json"))
        no_traceback(replayed)
        assert replayed.returncode == 1, replayed.stdout + replayed.stderr
        assert "reproduced 1/1" in replayed.stdout
    # The same finding against a broker without the fault does not reproduce.
    path = corpus / "findings" / f"{escapes[0]['id']}.json"
    clean = cli("replay", str(path), "--fault", "no-heartbeats")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    # what another broker does is not recorded as the finding's
    other = cli("replay", str(path), "--fault", "no-heartbeats", "--record")
    assert other.returncode == 2 and "--record" in other.stderr, other.stderr
    # the whole folder, each finding twice, the tally kept in each file
    replayed = cli("replay", str(corpus / "findings"), "--times", "2", "--record")
    no_traceback(replayed)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert f"{len(found)} finding{'s' if len(found) > 1 else ''}, 2 tries each: " \
        in replayed.stdout
    again = findings(corpus)
    for finding in escapes:
        assert again[str(finding["id"])]["replays"]["reproduced"] == 2
    assert all(f["replays"]["tries"] == 2 for f in again.values() if f["kind"] != "leak")
    records = [json.loads(line) for line in (results / "findings.jsonl").read_text().splitlines()]
    assert {r["finding_id"] for r in records} == set(found)
    assert all(r["kind"] == "fuzz_finding" and r["schema_version"] == 1 for r in records)


@pytest.mark.timing
@pytest.mark.slow
def test_one_fault_is_one_finding_that_keeps_its_worst_graded_input(tmp_path: Path) -> None:
    """Every refused input shows error-without-close, in every version: one finding. With
    one job and seed 6 the first input that shows it is a 1.0 one, where error.close-after
    is not stated (informational); the finding then takes a 1.2 input, where it fails."""
    corpus = tmp_path / "c"
    done = cli("fuzz", "--time", "3s", "--seed", "6", "--jobs", "1", "--corpus", str(corpus),
               "--fault", "error-without-close", "--mutation", "unknown-command",
               "--minimise", "1")
    no_traceback(done)
    assert done.returncode == 1, done.stderr
    (finding,) = findings(corpus).values()
    assert finding["signature"] == ["error-without-close", "error.close-after", ""]
    assert finding["grade"] == "failed" and finding["input"]["version"] == "1.2"
    assert int(str(finding["hits"])) > 1 and finding["confirmed"] is True


@pytest.mark.timing
@pytest.mark.slow
def test_a_campaign_without_a_fault_finds_nothing(tmp_path: Path) -> None:
    done = cli("fuzz", "--time", "3s", "--seed", "11", "--corpus", str(tmp_path / "c"))
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert findings(tmp_path / "c") == {}
    # each of the 16 jobs sent inputs: a quiet machine sends thousands in 3 s, one starved
    # by the tests beside it under a hundred
    assert counters(tmp_path / "c")["inputs"] > 16
    assert "0 findings" in done.stderr


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc: no procps needed)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:  # pid (comm) state ppid ...: comm may hold spaces, so split after its ')'
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.timing
@pytest.mark.slow
def test_kill_9_then_resume_loses_nothing(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    command = [sys.executable, "-m", "conformance", "fuzz", "--time", "120s", "--seed", "5",
               "--corpus", str(corpus), "--fault", FAULT, "--fault", "error-without-close",
               "--minimise", "2"]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if len(findings(corpus)) >= 2 and (corpus / "state.json").exists() and \
                    counters(corpus)["inputs"] > 200:
                break
        time.sleep(0.5)  # mid-run: inputs, minimising and saves under way
        brokers = children(child.pid)  # the reference broker it started
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    assert len(brokers) == 1
    for _ in range(100):  # it sees its standard input close and stops
        if not Path(f"/proc/{brokers[0]}").exists():
            break
        time.sleep(0.1)
    else:
        os.kill(brokers[0], signal.SIGKILL)
        pytest.fail("the reference broker outlived the fuzzer killed with SIGKILL")
    before = findings(corpus)
    counted = counters(corpus)
    assert len(before) >= 2 and counted["runs"] == 1
    again = cli("fuzz", "--time", "5s", "--seed", "5", "--corpus", str(corpus), "--fault",
                FAULT, "--fault", "error-without-close", "--minimise", "2")
    no_traceback(again)
    assert again.returncode == 1, again.stderr
    assert "resumed" in again.stderr
    after = findings(corpus)
    assert set(before) <= set(after)
    for finding_id in before:  # a finding rewritten on resume is the same finding
        assert after[finding_id]["signature"] == before[finding_id]["signature"]
        assert after[finding_id]["minimised"] is True
    now = counters(corpus)
    assert now["runs"] == 2
    assert now["inputs"] > counted["inputs"] and now["frontier"] >= counted["frontier"]
    assert now["elapsed_s"] > counted["elapsed_s"]


def test_a_folder_of_another_campaign_is_refused(tmp_path: Path) -> None:
    first = cli("fuzz", "--time", "1s", "--seed", "1", "--corpus", str(tmp_path / "c"))
    assert first.returncode == 0, first.stderr
    other = cli("fuzz", "--time", "1s", "--seed", "2", "--corpus", str(tmp_path / "c"))
    assert other.returncode == 2
    assert other.stderr.count("\n") == 1 and "seed 1, not 2" in other.stderr


def test_remote_targets_are_refused_without_allow_remote(tmp_path: Path) -> None:
    done = cli("fuzz", "--broker", "10.1.2.3:61613", "--time", "1s", "--corpus",
               str(tmp_path / "c"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--allow-remote" in done.stderr
    assert not (tmp_path / "c").exists()  # refused before anything was made or sent
    replayed = cli("replay", "no-such-finding.json", "--broker", "10.1.2.3")
    assert replayed.returncode == 2 and replayed.stderr.count("\n") == 1


def test_allow_remote_lets_a_remote_address_through_without_sending() -> None:
    import argparse

    from conformance.cli.options import where_from_flags

    args = argparse.Namespace(allow_remote=True, tls_ca=None, tls_cert=None, tls_key=None,
                              tls_no_verify=False, login=None, passcode=None, vhost=None)
    where = where_from_flags(args, broker="10.1.2.3:61613", profile="reference", faults=())
    assert where.info.id == "reference@10.1.2.3:61613"
    args.allow_remote = False
    with pytest.raises(UsageError, match="allow-remote"):
        where_from_flags(args, broker="10.1.2.3:61613", profile="reference", faults=())


@pytest.mark.parametrize(("flags", "message"), [
    (["--fault", "no-such-fault"], "unknown fault"),
    (["--broker", "127.0.0.1:1", "--fault", FAULT], "cannot be used with --broker"),
    (["--time", "ten minutes"], "--time"),
    (["--mutation", "nope"], "unknown mutation"),
])
def test_usage_errors_are_one_line(tmp_path: Path, flags: list[str], message: str) -> None:
    done = cli("fuzz", "--corpus", str(tmp_path / "c"), *flags)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and message in done.stderr


def test_an_unreachable_broker_exits_3(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    done = cli("fuzz", "--broker", f"127.0.0.1:{port}", "--time", "2s", "--corpus",
               str(tmp_path / "c"))
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "cannot fuzz" in done.stderr


async def _hangs(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED to every CONNECT, then nothing ever again."""
    try:
        await reader.read(65536)
        writer.write(b"CONNECTED\nversion:1.2\nserver:hostile/1\n\n\x00")
        await writer.drain()
        while await reader.read(65536):
            pass
    except (ConnectionError, OSError):  # the fuzzer resets every connection
        pass


async def _babbles(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED, then garbage and a torrent of octets for whatever comes next."""
    try:
        await reader.read(65536)
        writer.write(b"CONNECTED\nversion:1.2\n\n\x00")
        await writer.drain()
        if await reader.read(65536):
            writer.write(b"\xff\xfe\x00BLAH\n:\n\n\x00" + b"\x01" * 200_000)
            await writer.drain()
        while await reader.read(65536):
            pass
    except (ConnectionError, OSError):
        pass


@pytest.mark.parametrize("peer", [_hangs, _babbles])
def test_a_hostile_broker_gives_findings_not_a_harness_error(tmp_path: Path,
                                                             peer: object) -> None:
    with serving(peer) as port:  # type: ignore[arg-type]
        done = cli("fuzz", "--broker", f"127.0.0.1:{port}", "--time", "3s", "--deadline",
                   "0.3", "--minimise", "0", "--jobs", "4", "--corpus", str(tmp_path / "c"))
    no_traceback(done)
    assert done.returncode in (0, 1), done.stderr
    assert "harness error" not in done.stderr
    found = findings(tmp_path / "c")
    assert found, done.stderr
    assert all(len(str(f["response"])) <= 64 * 1024 for f in found.values())


def test_durations() -> None:
    assert parse_duration("90") == 90 and parse_duration("90s") == 90
    assert parse_duration("10m") == 600 and parse_duration("1h30m") == 5400
    assert parse_duration("2m30s") == 150
    for bad in ("", "0", "ten", "5x", "-3m"):
        with pytest.raises(UsageError):
            parse_duration(bad)


def test_a_second_campaign_in_the_same_folder_is_refused_while_one_runs(tmp_path: Path) -> None:
    corpus = tmp_path / "c"
    command = [sys.executable, "-m", "conformance", "fuzz", "--time", "30s", "--corpus",
               str(corpus), "--seed", "3"]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        state = corpus / "state.json"
        while not state.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        # the campaign saves its state again once it runs, its SIGTERM handler set: a
        # SIGTERM before that (a loaded machine starting its broker) would kill it outright
        first = state.stat().st_mtime_ns
        while state.stat().st_mtime_ns == first and time.monotonic() < deadline:
            time.sleep(0.05)
        done = cli("fuzz", "--time", "1s", "--corpus", str(corpus), "--seed", "3")
        assert done.returncode == 2 and "another campaign is running" in done.stderr
    finally:
        os.kill(child.pid, signal.SIGTERM)
        assert child.wait(30) in (0, 1)  # SIGTERM stops it cleanly, findings or not


@pytest.mark.timing
def test_a_broker_that_stops_answering_is_a_crash_finding(tmp_path: Path) -> None:
    """A peer that answers like a broker for a while, then stops listening: the liveness
    probe fails, the crash is saved with the inputs sent before it and those under way, the
    campaign stops."""
    from conformance.fuzz.network.campaign import Campaign, open_folder
    from conformance.fuzz.network.events import Settings
    from conformance.fuzz.network.findings import BrokerInfo, worst
    from conformance.fuzz.network.generators import GrammarGenerator
    from conformance.fuzz.network.oracle import Oracle
    from conformance.profiles import load_profile
    from conformance.runner.results import Outcome
    from conformance.spec.grammar import VERSIONS
    from conformance.wire.target import Target
    from conformance.wire.transport import parse_broker

    async def main() -> list[object]:
        served = 0
        server: asyncio.Server | None = None

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal served
            served += 1
            if served == 40 and server is not None:
                server.close()  # the "crash": nothing listens any more
            try:
                await reader.read(65536)
                writer.write(b"CONNECTED\nversion:1.2\n\n\x00")
                await writer.drain()
                if await reader.read(65536):
                    writer.write(b"ERROR\nmessage:no\n\n\x00")
                    await writer.drain()
                writer.close()
            except (ConnectionError, OSError):
                pass

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        oracle = Oracle(Target(parse_broker(f"127.0.0.1:{port}"), load_profile("reference"),
                               host="h"), deadline=0.5)
        folder, state, _ = open_folder(tmp_path / "c", seed=1, broker=BrokerInfo(
            f"tiny@127.0.0.1:{port}", f"127.0.0.1:{port}", "reference"), generator="grammar",
            versions=VERSIONS, tool_version="0")
        notes: list[object] = []
        campaign = Campaign(oracle=oracle, generator=GrammarGenerator(VERSIONS),
                            folder=folder, state=state, handlers=[notes.append],
                            settings=Settings(budget=30, jobs=4, deadline=0.5, minimise=0,
                                              recovery=1.0))
        found = await campaign.run()
        folder.unlock()
        assert campaign._reason == "the broker stopped answering"
        assert worst(found) is Outcome.FAILED
        return list(found)

    started = time.monotonic()
    found = asyncio.run(main())
    assert time.monotonic() - started < 25  # stopped long before its 30 s budget
    crashes = [f for f in findings(tmp_path / "c").values() if f["kind"] == "crash"]
    assert len(crashes) == 1 and crashes[0]["grade"] == "failed"
    # the last 16 judged and the 4 under way; none tied to it (none was sent alone: the
    # broker never came back)
    assert 1 <= len(crashes[0]["suspects"]) <= 16 + 4  # type: ignore[arg-type]
    assert crashes[0]["confirmed"] is None
    case = tmp_path / "c" / "findings" / f"{crashes[0]['id']}.yaml"
    (loaded,) = load_file(case)  # the crash's YAML case: the suspects, then a new CONNECT
    assert loaded.steps[-1].kind == "connect"
    assert found
