"""The limit and segmentation probes against the reference broker: its configured limits
found exactly, cut and batched frames handled; and against faults and configurations that
break each probe's verdict. Plus the `probe` verb."""

from __future__ import annotations

import asyncio
import json
import resource

import pytest
from helpers import cli
from peers import endless, serving

from conformance.broker import BrokerConfig, embedded
from conformance.codec import Frame, Limits, Parser, encode
from conformance.probes import Grade, ProbeOptions, ProbeResult, probe, run_probes
from conformance.profiles import load_profile
from conformance.wire.target import HarnessError, Target
from conformance.wire.transport import parse_broker

LIMITS = Limits(max_headers=37, max_header_line=700, max_body=3000, max_frame=100_000)
QUICK = ProbeOptions(within=2.0, budget=20.0, slow_interval=0.2, slow_budget=3.0)


def run(*names: str, options: ProbeOptions = QUICK, **config: object) -> dict[str, ProbeResult]:
    broker = BrokerConfig(port=0, **config)  # type: ignore[arg-type]

    async def against_the_reference_broker() -> list[ProbeResult]:
        async with embedded(broker) as server:
            target = Target(parse_broker(f"127.0.0.1:{server.port}"), load_profile("reference"))
            return await run_probes(target, probes=names, options=options)

    return {v.probe: v for v in asyncio.run(against_the_reference_broker())}


def test_the_configured_limits_are_found_exactly() -> None:
    verdicts = run("header-count", "header-line", "body", limits=LIMITS)
    found = {name: (v.grade, v.limit, v.refused, v.exact, v.unit) for name, v in verdicts.items()}
    assert found == {
        "header-count": (Grade.PASSED, 37, 38, True, "headers"),
        "header-line": (Grade.PASSED, 700, 701, True, "octets"),
        "body": (Grade.PASSED, 3000, 3001, True, "octets"),
    }
    for verdict in verdicts.values():
        assert verdict.statements == ("size-limits.may-limit", "size-limits.error-then-close")
        assert "refused with ERROR then close" in verdict.summary


def test_other_limits_and_the_1_1_wording() -> None:
    limits = Limits(max_headers=1000, max_header_line=4096, max_body=65_536, max_frame=200_000)
    options = ProbeOptions(version="1.1", within=2.0)
    verdicts = run("header-count", "header-line", "body", options=options, limits=limits)
    assert [(v.limit, v.exact) for v in verdicts.values()] == [(1000, True), (4096, True),
                                                                (65_536, True)]
    assert verdicts["body"].statements == ("size-limits.may-limit",
                                           "size-limits.error-then-close-v11")


def test_a_limit_enforced_by_closing_without_error_is_non_strict() -> None:
    verdicts = run("header-count", "body", limits=LIMITS,
                   faults=frozenset({"limit-close-without-error"}))
    for verdict in verdicts.values():
        assert verdict.grade is Grade.NON_STRICT
        assert verdict.statements == ("size-limits.error-then-close",)
        assert verdict.exact and "a close without ERROR" in verdict.summary
    assert (verdicts["header-count"].limit, verdicts["body"].limit) == (37, 3000)


@pytest.mark.slow
def test_an_error_that_leaves_the_connection_open_fails() -> None:
    verdict = run("header-line", limits=LIMITS, faults=frozenset({"error-without-close"}))
    assert verdict["header-line"].grade is Grade.FAILED
    assert verdict["header-line"].statements == ("error.close-after",)


def test_no_limit_up_to_the_probe_cap_is_a_finding() -> None:
    ignored = Limits(max_headers=10**6, max_header_line=10**8, max_body=10**8,
                     max_frame=10**9)
    options = ProbeOptions(within=2.0, max_headers=2048, max_header_line=1 << 16,
                           max_body=1 << 20)
    verdicts = run("header-count", "header-line", "body", options=options, limits=ignored)
    assert [(v.grade, v.limit, v.refused) for v in verdicts.values()] == [
        (Grade.FINDING, 2048, None), (Grade.FINDING, 1 << 16, None),
        (Grade.FINDING, 1 << 20, None)]
    assert all("no limit found" in v.summary for v in verdicts.values())


def test_frames_cut_at_every_octet_and_batched_are_handled() -> None:
    verdicts = run("split", "many-frames")
    split, many = verdicts["split"], verdicts["many-frames"]
    assert split.grade is Grade.PASSED, split.summary
    octets = split.detail["octets"]
    assert isinstance(octets, int) and split.detail["rounds"] == octets  # each cut, + bytewise
    assert "frames.eol-cr-optional" in split.statements
    assert many.grade is Grade.PASSED, many.summary
    assert many.detail["receipts"] == many.detail["messages"] == QUICK.many


@pytest.mark.parametrize(("fault", "version", "words"), [
    ("no-unescaping", "1.1", "x-tricky came back as 'a\\\\cb"),  # escapes kept as sent
    ("no-unescaping", "1.2", "unknown command"),  # and the CR of CR LF kept in the command
    ("ignore-content-length", "1.2", "unexpected"),  # the body cut at its NUL
])
def test_split_fails_when_the_broker_mishandles_what_the_frames_hold(fault: str, version: str,
                                                                     words: str) -> None:
    options = ProbeOptions(version=version, within=1.0)  # type: ignore[arg-type]
    verdict = run("split", options=options, faults=frozenset({fault}))["split"]
    assert verdict.grade is Grade.FAILED
    assert words in verdict.summary, verdict.summary
    failures = verdict.detail["failures"]
    assert isinstance(failures, list) and len(failures) == 10  # it stops at ten


def test_many_frames_fails_when_answers_go_missing() -> None:
    verdict = run("many-frames", faults=frozenset({"drop-receipts"}))["many-frames"]
    assert verdict.grade is Grade.FAILED
    assert "0 RECEIPTs" in verdict.summary


def test_slow_loris_is_dropped_by_a_broker_with_timeouts() -> None:
    verdict = run("slow-loris", connect_timeout=1.0, frame_timeout=1.0)["slow-loris"]
    assert verdict.grade is Grade.PASSED, verdict.summary
    assert verdict.summary.count("dropped after") == 2


def test_slow_loris_kept_open_is_a_finding() -> None:
    options = ProbeOptions(within=2.0, slow_interval=0.2, slow_budget=1.5)
    verdict = run("slow-loris", options=options, connect_timeout=30.0,
                  frame_timeout=30.0)["slow-loris"]
    assert verdict.grade is Grade.FINDING
    assert verdict.summary.count("still open after") == 2


async def two_errors(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED; a RECEIPT for a SEND of up to 100 headers; beyond, ERROR for the frame
    then a second ERROR (for the rest of it, read as a frame) and only then the close."""
    parser = Parser(strict=False)
    while data := await reader.read(65536):
        for event in parser.feed(data):
            if not isinstance(event, Frame):
                continue
            if event.command == "CONNECT":
                writer.write(encode(Frame("CONNECTED", [("version", "1.2")])))
            elif len(event.headers) <= 100:
                writer.write(encode(Frame("RECEIPT", [("receipt-id", event.get("receipt") or "")])))
            else:
                for message in ("too many headers", "unknown command"):
                    writer.write(encode(Frame("ERROR", [("message", message)])))
                await writer.drain()
                writer.close()
                return
        await writer.drain()


def test_an_error_followed_by_more_frames_before_the_close_fails() -> None:
    with serving(two_errors) as port:
        target = Target(parse_broker(f"127.0.0.1:{port}"), load_profile("reference"))
        (verdict,) = probe(target, probes=["header-count"], options=QUICK)
    assert (verdict.grade, verdict.limit, verdict.refused) == (Grade.FAILED, 100, 101)
    assert "ERROR, then ERROR before the close" in verdict.summary
    assert "error.close-after" in verdict.statements


def test_a_hostile_peer_cannot_hang_the_probes_or_fill_memory() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    options = ProbeOptions(within=1.0, budget=5.0, slow_interval=0.2, slow_budget=1.0,
                           max_body=1 << 20)
    with serving(endless) as port:
        target = Target(parse_broker(f"127.0.0.1:{port}"), load_profile("reference"))
        verdicts = probe(target, options=options)
    assert [v.probe for v in verdicts] == ["header-count", "header-line", "body", "split",
                                           "slow-loris", "many-frames"]
    assert all(v.grade is not Grade.PASSED or v.probe == "slow-loris" for v in verdicts)
    assert all(v.duration_s < options.budget + options.slow_budget * 2 + 10 for v in verdicts)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < 200 * 1024, f"{grown} KiB more"  # ru_maxrss is in KiB on Linux


def test_a_broker_that_does_not_answer_connect_is_a_harness_error() -> None:
    target = Target(parse_broker("127.0.0.1:1"), load_profile("reference"))
    with pytest.raises(HarnessError, match="connection refused"):
        probe(target, probes=["body"])
    with pytest.raises(ValueError, match="unknown probe"):
        probe(target, probes=["bogus"])
    with pytest.raises(ValueError, match="budget"):
        ProbeOptions(budget=0)


# -- the verb ------------------------------------------------------------------------------

@pytest.mark.slow
def test_probe_verb_prints_json_and_exits_by_the_verdicts() -> None:
    done = cli("probe", "--probe", "many-frames", "--probe", "header-count", "--json")
    assert done.returncode == 0, done.stderr
    verdicts = json.loads(done.stdout)
    assert [(v["probe"], v["grade"]) for v in verdicts] == [("many-frames", "passed"),
                                                           ("header-count", "passed")]
    assert verdicts[1]["limit"] == 1000 and verdicts[1]["exact"] is True
    failed = cli("probe", "--probe", "many-frames", "--fault", "drop-receipts")
    assert failed.returncode == 1
    assert "failed" in failed.stdout and "many-frames" in failed.stdout


@pytest.mark.parametrize(("args", "code", "words"), [
    (["--probe", "nope"], 2, "unknown probe nope"),
    (["--broker", "127.0.0.1:1", "--probe", "body"], 3, "connection refused"),
    (["--broker", "192.0.2.1:61613"], 2, "not on this machine"),
    (["--broker", "127.0.0.1:1", "--fault", "drop-receipts"], 2, "leave out --broker"),
    (["--budget", "0"], 2, "seconds above 0"),
])
def test_probe_verb_mistakes_are_one_line(args: list[str], code: int, words: str) -> None:
    done = cli("probe", *args)
    assert done.returncode == code
    assert words in done.stderr and "Traceback" not in done.stderr
