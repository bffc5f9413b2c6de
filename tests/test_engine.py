"""The engine over real sockets against small in-test peers: every step kind, every
outcome, timeouts, and peers that hang, send garbage, close mid-frame or never end a frame."""

from __future__ import annotations

import re
import resource
import time
from pathlib import Path

import pytest
from helpers import case, run_cases
from peers import TinyBroker, endless, endless_body, garbage, mid_frame, serving, silent

from conformance.runner.events import (
    CaseFinished,
    CaseStarted,
    RunEvent,
    RunFinished,
    RunStarted,
)
from conformance.runner.results import Outcome
from conformance.wire.target import HarnessError
from conformance.wire.transcript import Budget, Record, Transcript

CONVERSATION = case("""
    - connect: {}
    - send: {command: SUBSCRIBE, headers: {id: s1, destination: "${queue}", ack: client}}
    - send: {command: SEND, headers: {destination: "${queue}", receipt: r1, x-user: "a:b\\\\c"}, body: "héllo"}
    - expect:
        command: MESSAGE
        headers:
          destination: "${queue}"
          subscription: s1
          message-id: {regex: "[0-9]+"}
          ack: {present: true}
          x-user: "a:b\\\\c"
          content-length: {range: [1, 10]}
          receipt: {absent: true}
        body: "héllo"
        capture: {ack: ack}
    - expect: {command: RECEIPT, headers: {receipt-id: r1}}
    - send: {command: ACK, headers: {id: "${ack}", receipt: r2}}
    - expect: {command: RECEIPT, headers: {receipt-id: r2}}
    - raw: {data: "SEND\\ndestination:${queue}\\nreceipt:r3\\n\\n\\0", delivery: bytewise}
    - expect: {command: MESSAGE, body: {absent: true}}
    - expect: {command: RECEIPT, headers: {receipt-id: r3}}
    - raw: {data: "SEND\\ndestination:${queue}\\nreceipt:r4\\n\\nx", hex: "00", delivery: chunked, chunk: 3, pause: 0.001}
    - expect: {command: MESSAGE, body: {equals: x}}
    - expect: {command: RECEIPT, headers: {receipt-id: r4}}
    - expect_none: {within: 0.2}
    - open: {conn: second}
    - connect: {conn: second}
    - sleep: 0.01
    - send: {command: DISCONNECT, headers: {receipt: bye}}
    - expect: {command: RECEIPT, headers: {receipt-id: bye}}
    - expect_close: {within: 2}
    - close: {conn: second}
""")


def test_a_conformant_peer_passes_every_step_kind(tmp_path: Path) -> None:
    with serving(TinyBroker()) as port:
        (result,) = run_cases(tmp_path, port, CONVERSATION)
    assert result.outcome == Outcome.PASSED, result.message
    sent = b"".join(r.data for r in result.transcript if r.direction == "out")
    assert b"x-user:a\\cb\\\\c" in sent  # escaped per 1.2 on the wire
    pieces = [r.data for r in result.transcript if r.direction == "out"]
    assert [b"S", b"E", b"N", b"D"] == pieces[pieces.index(b"S"):pieces.index(b"S") + 4]
    assert any(r.direction == "close" for r in result.transcript)


def test_a_missing_receipt_fails_with_expected_and_observed(tmp_path: Path) -> None:
    with serving(TinyBroker("no-receipt")) as port:
        (result,) = run_cases(tmp_path, port, case("""
            - connect: {}
            - send: {command: SEND, headers: {destination: "${queue}", receipt: r1}}
            - expect: {command: RECEIPT, headers: {receipt-id: r1}, within: 0.3}
        """))
    assert result.outcome == Outcome.FAILED
    assert result.expected == "RECEIPT receipt-id 'r1'"
    assert result.observed == "nothing within 0.3 s" and result.step_line == 8
    assert result.message.startswith("line 8: expected RECEIPT")


ERROR_THEN_CLOSE = case("""
    - connect: {}
    - send: {command: FOO, headers: {receipt: r9}}
    - expect_error_close: {headers: {receipt-id: r9}, within: 0.5}
""", statements="error.close-after")


@pytest.mark.parametrize(("faults", "outcome", "words"), [
    ((), Outcome.PASSED, ""),
    (("no-close-after-error",), Outcome.FAILED, "the connection closed within 0.5 s after ERROR"),
    (("extra-after-error",), Outcome.FAILED, "RECEIPT frame"),
    (("no-error-message",), Outcome.NON_STRICT, "error.message-header"),
])
def test_error_then_close(tmp_path: Path, faults: tuple[str, ...], outcome: Outcome,
                          words: str) -> None:
    with serving(TinyBroker(*faults)) as port:
        (result,) = run_cases(tmp_path, port, ERROR_THEN_CLOSE)
    assert result.outcome == outcome, result.message
    assert words in result.message + " ".join(result.violations)


def test_the_validator_fails_a_case_on_frames_it_did_not_look_at(tmp_path: Path) -> None:
    steps = """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: s, destination: "${queue}", ack: client}}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: hi}
        - expect: {command: MESSAGE, body: hi}
    """
    with serving(TinyBroker("no-ack-header")) as port:
        (result,) = run_cases(tmp_path, port, case(steps))
    assert result.outcome == Outcome.FAILED
    assert result.statement == "message.ack-required" and result.violations


@pytest.mark.parametrize(("subscribe", "read", "outcome"), [
    # a SUBSCRIBE written raw is known to the judge as a structured one is
    ('raw: {data: "SUBSCRIBE\\nid:s\\ndestination:${queue}\\nack:client\\n\\n\\0"}',
     "expect: {command: MESSAGE, body: hi}", Outcome.FAILED),
    # a MESSAGE no step reads is judged when the case drains its connections
    ('send: {command: SUBSCRIBE, headers: {id: s, destination: "${queue}", ack: client}}',
     "sleep: 0.2", Outcome.FAILED),
    # ack repeated with different values: the mode is the broker's pick, not judged here
    ('send: {command: SUBSCRIBE, headers: [[id, s], [destination, "${queue}"], [ack, client],'
     ' [ack, auto]]}', "expect: {command: MESSAGE, body: hi}", Outcome.PASSED),
])
def test_every_message_is_judged_against_the_ack_mode_subscribed(
        tmp_path: Path, subscribe: str, read: str, outcome: Outcome) -> None:
    steps = f"""
        - connect: {{}}
        - {subscribe}
        - send: {{command: SEND, headers: {{destination: "${{queue}}"}}, body: hi}}
        - {read}
    """
    with serving(TinyBroker("no-ack-header")) as port:
        (result,) = run_cases(tmp_path, port, case(steps))
    assert result.outcome == outcome, result.message
    if outcome == Outcome.FAILED:
        assert result.statement == "message.ack-required"


EITHER = """
    - connect: {}
    - send: {command: FOO}
    - expect_any:
        - {grade: passed, expect_error_close: {within: 0.3}}
        - {grade: non-strict, expect_close: {within: 0.3}, note: closed without ERROR}
        - {grade: informational, expect_none: {within: 0.3}, note: ignored the frame}
"""


@pytest.mark.parametrize(("peer", "outcome"), [
    (TinyBroker(), Outcome.PASSED),
    (mid_frame, Outcome.NON_STRICT),   # CONNECTED arrives broken... then a close
    (TinyBroker("no-close-after-error"), Outcome.NON_STRICT),  # no alternative: the level
])
def test_alternatives_grade_what_the_broker_did(tmp_path: Path, peer: object,
                                                outcome: Outcome) -> None:
    steps = EITHER if peer is not mid_frame else EITHER.replace(
        "    - connect: {}\n", "    - connect: {expect: nothing}\n")
    with serving(peer) as port:  # type: ignore[arg-type]
        (result,) = run_cases(tmp_path, port, case(steps, statements="size-limits.error-then-close"))
    assert result.outcome == outcome, result.message


def test_a_may_case_is_informational_and_profiles_decide_support(tmp_path: Path) -> None:
    may = case("""
        - connect: {}
        - expect: {command: MESSAGE, within: 0.2}
    """, id="t.may", statements="connected.optional-headers")
    needs = case("- sleep: 0", id="t.needs", extra="  requires: [nack]\n")
    with serving(TinyBroker()) as port:
        results = {r.id: r for r in run_cases(tmp_path, port, may, needs, profile="stompserver")}
        assert results["t.may"].outcome == Outcome.UNSUPPORTED  # stompserver speaks 1.0 only
        results = {r.id: r for r in run_cases(tmp_path, port, may, needs)}
    assert results["t.may"].outcome == Outcome.INFORMATIONAL
    assert results["t.needs"].outcome == Outcome.PASSED


def test_a_listed_deviation_is_graded_as_such(tmp_path: Path) -> None:
    profile = tmp_path / "mine.yaml"
    profile.write_text("name: mine\ndeviations:\n  t.case: {observed: no receipt, reason: "
                       "known bug 12, statement: receipt.receipt-id-required}\n")
    steps = """
        - connect: {}
        - send: {command: SEND, headers: {destination: "${queue}", receipt: r1}}
        - expect: {command: RECEIPT, within: 0.2}
    """
    with serving(TinyBroker("no-receipt")) as port:
        (result,) = run_cases(tmp_path, port, case(steps), profile=str(profile))
    assert result.outcome == Outcome.KNOWN_DEVIATION and "known bug 12" in result.deviation


# -- each failure graded by its own statement --------------------------------------------

#: a MESSAGE on a client-ack subscription (its ack header: message.ack-required, a MUST),
#: then the RECEIPT of the SEND (receipt.receipt-id-required, a MUST)
TWO_CHECKS = case("""
    - connect: {}
    - send: {command: SUBSCRIBE, headers: {id: s1, destination: "${queue}", ack: client}}
    - send: {command: SEND, headers: {destination: "${queue}", receipt: r1}, body: x}
    - expect: {command: MESSAGE}
    - expect: {command: RECEIPT, within: 0.2}
""", statements="receipt.receipt-id-required, message.ack-required")


@pytest.mark.parametrize(("declared", "outcome"), [
    ("receipt.receipt-id-required", Outcome.FAILED),
    ("[receipt.receipt-id-required, message.ack-required]", Outcome.KNOWN_DEVIATION),
])
def test_a_deviation_excuses_only_the_statements_it_names(
        tmp_path: Path, declared: str, outcome: Outcome) -> None:
    profile = tmp_path / "mine.yaml"
    profile.write_text(f"name: mine\ndeviations:\n  t.case: {{observed: no receipt, "
                       f"reason: bug 12, statement: {declared}}}\n")
    with serving(TinyBroker("no-receipt", "no-ack-header")) as port:
        (result,) = run_cases(tmp_path, port, TWO_CHECKS, profile=str(profile))
    assert result.outcome == outcome
    assert "bug 12" in result.deviation  # the declared part shown beside the rest
    broken = {b["statement"]: b["declared"] for b in result.broken}
    assert broken == {"receipt.receipt-id-required": True,
                      "message.ack-required": outcome == Outcome.KNOWN_DEVIATION}
    if outcome == Outcome.FAILED:  # reported against what nobody declared
        assert result.statement == "message.ack-required"


def test_a_should_broken_in_a_must_case_is_non_strict_and_leaves_the_must_score(
        tmp_path: Path) -> None:
    from conformance.report.verdict import certify
    from conformance.runner.results import level_counts

    steps = """
        - connect: {}
        - send: {command: SEND, headers: {destination: "${queue}", receipt: r1}}
        - expect: {command: RECEIPT}
        - send: {command: SEND, headers: {destination: "${queue}", receipt: r2}}
        - expect_none: {within: 0.2}
          statements: [error.receipt-id]
    """
    mixed = case(steps, statements="receipt.receipt-id-required, error.receipt-id")
    with serving(TinyBroker()) as port:
        (result,) = run_cases(tmp_path, port, mixed)
    assert result.outcome == Outcome.NON_STRICT and result.statement == "error.receipt-id"
    assert result.level == "must" and result.levels == ("must", "should")
    assert level_counts([result]) == {"must": {"passed": 1, "total": 1},
                                      "should": {"passed": 0, "total": 1}}
    verdict = certify([result])
    assert verdict.conforms and verdict.text.endswith("every MUST passed, 1 SHOULD not met")


def test_a_frame_no_step_reads_is_judged(tmp_path: Path) -> None:
    """The broker's fault breaks a rule only in a MESSAGE that arrives after the last step:
    the drain at the case's end judges it."""
    import asyncio

    from conformance.broker import BrokerConfig, embedded
    from conformance.profiles import load_profile
    from conformance.runner.engine import Engine
    from conformance.scenario import load_file
    from conformance.wire.target import Target
    from conformance.wire.transport import parse_broker

    path = tmp_path / "case.yaml"
    path.write_text(case("""
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: s1, destination: "${queue}", ack: client,
                                               receipt: r0}}
        - expect: {command: RECEIPT}
        - open: {conn: other}
        - connect: {conn: other}
        - send: {conn: other, command: SEND, headers: {destination: "${queue}", receipt: r1}}
        - expect: {conn: other, command: RECEIPT}
    """, statements="receipt.receipt-id-required, message.ack-required"))

    async def run(faults: frozenset[str]) -> Outcome:
        async with embedded(BrokerConfig(port=0, faults=faults)) as broker:
            target = Target(parse_broker(f"127.0.0.1:{broker.port}"),
                            load_profile("reference"))
            (result,) = await Engine(target).run(load_file(path))
        if faults:
            assert result.statement == "message.ack-required", result.message
        return result.outcome

    assert asyncio.run(run(frozenset())) == Outcome.PASSED
    assert asyncio.run(run(frozenset({"no-ack-header"}))) == Outcome.FAILED


def test_case_problems_and_timeouts_are_errors(tmp_path: Path) -> None:
    unopened = case("- expect: {conn: other}", id="t.unopened")
    slow = case("- sleep: 5", id="t.slow", extra="  timeout: 0.3\n")
    with serving(TinyBroker()) as port:
        results = {r.id: r for r in run_cases(tmp_path, port, unopened, slow)}
    assert results["t.unopened"].outcome == Outcome.ERROR
    assert "'other' is not open" in results["t.unopened"].message
    assert results["t.slow"].outcome == Outcome.ERROR
    assert "timeout of 0.3 s" in results["t.slow"].message


@pytest.mark.parametrize(("peer", "observed"), [
    (mid_frame, "in the middle of a frame"),
    (garbage, "'HTTP/1.1 400 Bad Request' frame"),
])
def test_hostile_peers_get_a_graded_verdict(tmp_path: Path, peer: object, observed: str) -> None:
    steps = """
        - connect: {expect: nothing}
        - expect: {command: CONNECTED, within: 0.3}
    """
    if peer is mid_frame:
        steps = steps.replace("{command: CONNECTED, within: 0.3}", "{command: MESSAGE}")
    # a broker of 1.2 alone: the run's own CONNECT at 1.0 and 1.1, whose parsers never see
    # the garbage's CR LF blank line, would each wait out its answer (5 s) to no end here
    only12 = tmp_path / "only12.yaml"
    only12.write_text("name: only12\ncapabilities: {versions: ['1.2']}\n")
    with serving(peer) as port:  # type: ignore[arg-type]
        (result,) = run_cases(tmp_path, port, case(steps), profile=str(only12))
    assert result.outcome == Outcome.FAILED and observed in result.observed, result.observed


def test_a_broker_that_never_answers_connect_errs_every_case_at_once(tmp_path: Path) -> None:
    """The run's CONNECT at each version finds it before the cases: each is graded error
    with one message, without waiting out its own timeout."""
    steps = """
        - connect: {expect: nothing}
        - expect: {command: CONNECTED, within: 30}
    """
    started = time.monotonic()
    with serving(silent) as port:
        results = run_cases(tmp_path, port, *(case(steps, id=f"t.c{i}") for i in range(20)))
    assert time.monotonic() - started < 10
    assert {r.outcome for r in results} == {Outcome.ERROR}
    assert all(r.setup_refused and "never answered CONNECT within 5 s" in r.message
               for r in results)


@pytest.mark.parametrize("peer", [endless, endless_body])
def test_an_endless_frame_is_cut_and_memory_stays_bounded(tmp_path: Path, peer: object) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with serving(peer) as port:  # type: ignore[arg-type]
        (result,) = run_cases(tmp_path, port, case("""
            - connect: {}
            - expect: {command: MESSAGE, within: 20}
        """))
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.outcome == Outcome.FAILED and "harness's limits" in result.observed
    assert grown_mb < 120, f"memory grew by {grown_mb:.0f} MB"
    assert sum(len(r.data) for r in result.transcript) <= (256 + 64) << 10
    if peer is endless_body:  # 1 MiB arrives before the body limit: the middle is cut
        assert any(re.fullmatch(r"transcript cut: 1\.\d+ MiB exchanged, first 256 KiB and "
                                r"last 64 KiB kept", r.note) for r in result.transcript)


def test_a_transcript_keeps_its_head_and_tail_and_says_what_it_cut() -> None:
    transcript = Transcript(head=10, tail=6)
    for n in range(8):  # 8 records of 4 octets: 0000 1111 ... 7777
        transcript.add(Record(float(n), "in", "main", str(n).encode() * 4))
    transcript.add(Record(8.0, "close", "main", note="closed"))
    assert transcript.kept == 16 and transcript.total == 32
    kept = transcript.finish()
    assert b"".join(r.data for r in kept) == b"0000111122" + b"667777"
    notes = [r.note for r in kept if r.note]
    assert notes == ["transcript cut: 32 B exchanged, first 10 B and last 6 B kept", "closed"]
    assert [r.t for r in kept] == sorted(r.t for r in kept)  # the note stands at the cut

    budget = Budget(total=20)
    budget.keep(kept)  # 16 octets fit; the next does not
    assert budget.left == 4
    other = Transcript()
    other.add(Record(0.0, "in", "main", b"x" * 40_000))
    budget.keep(other.finish())
    assert other.kept == (16 << 10) + (4 << 10)
    assert other[-2].note.startswith("transcript cut: 39.1 KiB exchanged, first 16 KiB and "
                                     "last 4 KiB kept (the run's 20 B for transcripts")


def test_many_small_records_are_bounded_too() -> None:
    transcript = Transcript()
    for n in range(100_000):
        transcript.add(Record(float(n), "in", "main", b"\n"))
    kept = transcript.finish()
    assert len(kept) <= 2 * Transcript.MAX_RECORDS + 1 and kept[-1].t == 99_999.0


def test_parallel_jobs_events_and_stable_order(tmp_path: Path) -> None:
    texts = [case("- connect: {}\n- sleep: 0.2", id=f"t.c{i}") for i in (3, 1, 2, 0)]
    events: list[RunEvent] = []
    with serving(TinyBroker()) as port:
        results = run_cases(tmp_path, port, *texts, events=events, jobs=4)
    assert [r.id for r in results] == ["t.c0", "t.c1", "t.c2", "t.c3"]
    assert isinstance(events[0], RunStarted) and isinstance(events[-1], RunFinished)
    assert sum(isinstance(e, CaseStarted) for e in events) == 4
    assert sum(isinstance(e, CaseFinished) for e in events) == 4
    finish = events[-1]
    assert isinstance(finish, RunFinished) and finish.server["server"] == "tiny/1.0"
    assert finish.duration < 0.75  # the four 0.2 s cases overlapped


def test_a_case_the_profile_runs_alone_has_nothing_beside_it(tmp_path: Path) -> None:
    profile = tmp_path / "lonely.yaml"
    profile.write_text("name: lonely\nalone: [t.c2]\n")
    texts = [case("- connect: {}\n- sleep: 0.1", id=f"t.c{i}") for i in range(4)]
    events: list[RunEvent] = []
    with serving(TinyBroker()) as port:
        results = run_cases(tmp_path, port, *texts, events=events, jobs=4,
                            profile=str(profile))
    assert {r.outcome for r in results} == {Outcome.PASSED}
    order = [(type(e).__name__, e.case.id if isinstance(e, CaseStarted) else e.result.id)
             for e in events if isinstance(e, CaseStarted | CaseFinished)]
    # it starts first and finishes before any other starts; the others then overlap
    assert order[:2] == [("CaseStarted", "t.c2"), ("CaseFinished", "t.c2")]
    assert [kind for kind, _ in order[2:5]] == ["CaseStarted"] * 3


def test_the_deadline_skips_what_is_left(tmp_path: Path) -> None:
    texts = [case("- sleep: 0.3", id=f"t.d{i}") for i in range(3)]
    with serving(TinyBroker()) as port:
        results = run_cases(tmp_path, port, *texts, jobs=1, deadline=0.1)
    assert [r.outcome for r in results] == [Outcome.PASSED, Outcome.SKIPPED, Outcome.SKIPPED]


def test_an_unreachable_broker_stops_the_run_with_one_line(tmp_path: Path) -> None:
    with serving(silent) as port:
        pass  # the port is free again
    with pytest.raises(HarnessError) as caught:
        run_cases(tmp_path, port, case("- sleep: 0"))
    assert str(caught.value) == f"cannot connect to 127.0.0.1:{port}: connection refused"


def test_the_run_keeps_its_transcript_budget(tmp_path: Path) -> None:
    """Past the run's budget, a case keeps only a small remainder, and says so."""
    with serving(endless_body) as port:
        results = run_cases(tmp_path, port, *(case("""
            - connect: {}
            - expect: {command: MESSAGE, within: 20}
        """, id=f"t.flood{i}") for i in range(3)), jobs=1, transcripts=400 << 10)
    kept = [sum(len(r.data) for r in result.transcript) for result in results]
    assert kept[0] == (256 + 64) << 10 and kept[1:] == [(16 + 4) << 10] * 2
    assert all(any("--transcript-budget" in r.note for r in result.transcript)
               for result in results[1:])
