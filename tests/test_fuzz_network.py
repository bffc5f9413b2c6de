"""The network fuzzer's parts over real sockets: grammar strategies and mutations (each
judged by the project's own parser and a session model), the oracle against the reference
broker with and without faults and against hostile peers, the minimiser, the reproducer
YAML case, and the finding record."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import run_cases
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from peers import serving

from conformance.broker import Broker, BrokerConfig
from conformance.codec import Frame, LimitExceeded, Parser, ProtocolViolation
from conformance.fuzz.inputs.choices import Choices
from conformance.fuzz.inputs.expected import Delivery, compare, deliveries, frames_of
from conformance.fuzz.inputs.fuzz_input import Expect, FuzzInput
from conformance.fuzz.inputs.mutations import MUTATIONS, fuzz_input, weighted
from conformance.fuzz.inputs.rules import breaks_its_rule, is_what_it_says, well_formed
from conformance.fuzz.inputs.strategies import (
    frames,
    fuzz_inputs,
    mutated_inputs,
    segmentations,
    valid_inputs,
)
from conformance.fuzz.inputs.wellformed import Written, valid_input
from conformance.fuzz.network.finding_records import (
    FINDING_FIELDS,
    FINDING_NULLABLE,
    finding_record,
    write_finding_records,
)
from conformance.fuzz.network.findings import BrokerInfo, Finding, new_finding, signature
from conformance.fuzz.network.minimise import minimise
from conformance.fuzz.network.oracle import (
    MAX_RESPONSE,
    Anomaly,
    Judgement,
    Kind,
    Oracle,
    Unreachable,
    grade,
)
from conformance.fuzz.network.reproducer import case_yaml
from conformance.profiles import load_profile
from conformance.runner.results import Outcome
from conformance.scenario import load_file
from conformance.spec import catalogue
from conformance.spec.grammar import (
    CLIENT_REQUIRED_HEADERS,
    HEART_BEAT,
    VERSIONS,
    negotiate,
    parse_accept_version,
)
from conformance.wire.target import Target
from conformance.wire.transport import parse_broker

FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def clean() -> Iterator[int]:
    with serving(Broker(BrokerConfig(port=0))._accept) as port:
        yield port


def oracle(port: int, deadline: float = 2.0) -> Oracle:
    target = Target(parse_broker(f"127.0.0.1:{port}"), load_profile("reference"), host="localhost")
    return Oracle(target, deadline=deadline, grace=min(deadline, 1.0))


def judge(port: int, fuzz: FuzzInput, deadline: float = 2.0) -> Judgement:
    return asyncio.run(oracle(port, deadline).run(fuzz))


# -- grammar strategies --------------------------------------------------------------------

@FEW
@given(frames())
def test_frames_are_read_back_by_the_strict_parser(written: Written) -> None:
    parser = Parser(version=written.version, strict=True)
    read = [e for e in parser.feed(written.wire) if isinstance(e, Frame)]
    assert parser.buffered == 0
    assert len(read) == 1
    (frame,) = read
    assert frame.command == written.frame.command and frame.body == written.frame.body
    sent = written.frame.headers
    assert frame.headers[:len(sent)] == sent or all(h in frame.headers for h in sent)
    for name, _ in CLIENT_REQUIRED_HEADERS[frame.command][written.version]:
        assert name in frame or (frame.command == "UNSUBSCRIBE" and "id" in frame)


@FEW
@given(valid_inputs())
def test_valid_inputs_break_no_rule(fuzz: FuzzInput) -> None:
    parser = Parser(version=fuzz.version, strict=True)
    read = [e for e in parser.feed(fuzz.data) if isinstance(e, Frame)]
    assert parser.buffered == 0 and read
    assert read[-1].get("receipt") == fuzz.receipt
    for frame in read:
        for name, _ in CLIENT_REQUIRED_HEADERS[frame.command][fuzz.version]:
            assert name in frame or (frame.command == "UNSUBSCRIBE" and "id" in frame)
    assert well_formed(fuzz)
    assert fuzz.statement in catalogue()


@FEW
@given(st.binary(min_size=2, max_size=200), st.data())
def test_segmentations_cut_without_losing_octets(data: bytes, draw: st.DataObject) -> None:
    chunks = draw.draw(segmentations(data, max_writes=5))
    assert b"".join(chunks) == data
    assert 1 <= len(chunks) <= 5 and all(chunks)


def _session_rule_broken(fuzz: FuzzInput) -> bool:
    """The session rules, checked here apart from rules.py."""
    name, headers = fuzz.mutation, dict(fuzz.connect_headers)
    if name == "bad-heart-beat":
        return HEART_BEAT.match(headers["heart-beat"]) is None
    if name == "no-common-version":
        return negotiate(parse_accept_version(headers["accept-version"])) is None
    read = frames_of(fuzz, strict=True)
    assert read is not None, "session mutations write well-formed frames"
    last = read[-1]
    if name == "frame-before-connect":
        return fuzz.connect is None and last.command not in ("CONNECT", "STOMP")
    if name == "ack-unknown-id":
        return last.command in ("ACK", "NACK") and not deliveries(read)
    if name == "missing-required-header":
        required = CLIENT_REQUIRED_HEADERS[last.command][fuzz.version]
        return any(n not in last and s == fuzz.statement for n, s in required)
    if name == "unknown-transaction":
        begun = {f.get("transaction") for f in read[:-1] if f.command == "BEGIN"}
        return last.command in ("COMMIT", "ABORT") and last.get("transaction") not in begun
    raise AssertionError(f"no check for {name}")


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_each_mutation_breaks_the_rule_it_names(name: str) -> None:
    mutation = MUTATIONS[name]
    known = catalogue()

    @settings(max_examples=30, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(mutated_inputs(names=[name]))
    def check(fuzz: FuzzInput) -> None:
        assert fuzz.mutation == name and fuzz.expect is not Expect.VALID
        assert fuzz.statement in known, f"{name} names no statement of the catalogue"
        if mutation.layer == "grammar":
            with pytest.raises(ProtocolViolation) as refused:
                Parser(version=fuzz.version, strict=True).feed(fuzz.data)
            assert refused.value.statement == fuzz.statement
        elif mutation.layer == "limit":
            with pytest.raises(LimitExceeded):
                Parser(version=fuzz.version, strict=False,
                       limits=BrokerConfig().limits).feed(fuzz.data)
        else:
            assert _session_rule_broken(fuzz)
        assert breaks_its_rule(fuzz)

    check()


def test_every_mutation_and_version_is_drawn_and_later_choices_vary() -> None:
    """Words of Hypothesis's choosing must be spread: wide integers drawn small made every
    choice after the first few the same."""
    seen: set[tuple[str, str]] = set()
    commands: collections.Counter[str] = collections.Counter()

    @settings(max_examples=600, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(mutated_inputs())
    def draw(fuzz: FuzzInput) -> None:
        seen.add((fuzz.mutation, fuzz.version))
        if fuzz.mutation == "missing-required-header":
            read = frames_of(fuzz, strict=True) or []
            commands[read[-1].command] += 1

    draw()
    expected = {(m.name, v) for m in MUTATIONS.values() for v in m.versions}
    assert len(seen) >= 0.9 * len(expected), sorted(expected - seen)
    assert len(commands) >= 4 and max(commands.values()) < 0.6 * sum(commands.values())


def test_seeded_inputs_are_the_same_for_the_same_seed() -> None:
    chosen = weighted(VERSIONS)
    first = [fuzz_input(Choices.seeded(random.Random(i)), VERSIONS, chosen) for i in range(50)]
    again = [fuzz_input(Choices.seeded(random.Random(i)), VERSIONS, chosen) for i in range(50)]
    assert first == again
    assert all(is_what_it_says(f) for f in first)


def test_unknown_mutation_names_the_choices() -> None:
    with pytest.raises(ValueError, match="choose from"):
        mutated_inputs(names=["no-such-thing"])


# -- the oracle against the reference broker -----------------------------------------------

@FEW
@given(fuzz_inputs())
def test_the_reference_broker_shows_no_anomaly(clean: int, fuzz: FuzzInput) -> None:
    verdict = judge(clean, fuzz)
    assert verdict.anomalies == [], (fuzz, verdict)


def _first(name: str, *, version: str = "1.2", seed: int = 0) -> FuzzInput:
    chosen = weighted((version,), [name])  # type: ignore[arg-type]
    rng = random.Random(seed)
    while True:
        fuzz = fuzz_input(Choices.seeded(rng), (version,), chosen)  # type: ignore[arg-type]
        if fuzz.mutation == name:
            return fuzz


def _valid(predicate: Callable[[FuzzInput], bool], *, version: str = "1.2") -> FuzzInput:
    rng = random.Random(1)
    while True:
        fuzz = valid_input(Choices.seeded(rng), (version,))  # type: ignore[arg-type]
        if predicate(fuzz):
            return fuzz


def _delivers_user_headers(fuzz: FuzzInput) -> bool:
    due = deliveries(frames_of(fuzz) or [])
    return bool(due) and any(d.headers for d in due) and not any(
        c.startswith(b"DISCONNECT") for c in fuzz.chunks)


@pytest.mark.parametrize(("fault", "make", "kind", "grade"), [
    ("accept-undefined-escape", lambda: _first("undefined-escape"), Kind.ACCEPTED,
     Outcome.FAILED),
    ("error-without-close", lambda: _first("unknown-command"), Kind.ERROR_WITHOUT_CLOSE,
     Outcome.FAILED),
    ("accept-frames-before-connect", lambda: _first("frame-before-connect"), Kind.ACCEPTED,
     Outcome.FAILED),
    ("limit-close-without-error", lambda: _first("too-many-headers"),
     Kind.CLOSED_WITHOUT_ERROR, Outcome.NON_STRICT),
    ("drop-receipts", lambda: _valid(lambda f: True), Kind.NO_RECEIPT, Outcome.FAILED),
    ("wrong-receipt-id", lambda: _valid(lambda f: True), Kind.WRONG_RECEIPT, Outcome.FAILED),
    ("drop-user-headers", lambda: _valid(_delivers_user_headers), Kind.CHANGED_MESSAGE,
     Outcome.FAILED),
])
def test_faults_show_as_graded_anomalies(fault: str, make: object, kind: Kind,
                                         grade: Outcome) -> None:
    assert callable(make)
    fuzz: FuzzInput = make()
    with serving(Broker(BrokerConfig(port=0, faults=frozenset({fault})))._accept) as port:
        verdict = judge(port, fuzz, deadline=1.0)
    with serving(Broker(BrokerConfig(port=0))._accept) as port:
        assert judge(port, fuzz, deadline=1.0).anomalies == []
    found = [a for a in verdict.anomalies if a.kind is kind]
    assert found, verdict
    finding = _finding(found[0], fuzz, verdict)
    assert finding.grade is grade


def _ends_in_disconnect(fuzz: FuzzInput) -> bool:
    found = frames_of(fuzz) or []
    return bool(found) and found[-1].command == "DISCONNECT"


def _delivers(fuzz: FuzzInput) -> bool:
    return bool(deliveries(frames_of(fuzz) or [])) and not _ends_in_disconnect(fuzz)


def _delivers_padded_header(fuzz: FuzzInput) -> bool:
    due = deliveries(frames_of(fuzz) or [])
    return _delivers(fuzz) and any(n != n.strip() or v != v.strip()
                                   for d in due for n, v in d.headers)


@pytest.mark.parametrize(("fault", "make", "bug"), [
    # the close is the DISCONNECT's, no part of what went wrong: the RECEIPT is missing, as
    # it is for any other frame, whatever the frames before it exercised
    ("drop-receipts", lambda: _valid(_ends_in_disconnect),
     ("no-receipt", "receipt-header.server-acknowledges", "")),
    ("drop-receipts", lambda: _valid(_delivers),
     ("no-receipt", "receipt-header.server-acknowledges", "")),
    # a MESSAGE without its subscription header is invalid, not lost as well
    ("no-subscription-header", lambda: _valid(_delivers),
     ("invalid-response", "message.id-and-subscription-required", "MESSAGE")),
    # a name or value trimmed: no-trim, not a header dropped or an escape undecoded
    ("trim-headers", lambda: _valid(_delivers_padded_header),
     ("changed-message", "value-encoding.no-trim", "")),
])
def test_a_fault_shows_as_its_own_statement_only(fault: str, make: object,
                                                 bug: tuple[str, ...]) -> None:
    assert callable(make)
    fuzz: FuzzInput = make()
    with serving(Broker(BrokerConfig(port=0, faults=frozenset({fault})))._accept) as port:
        verdict = judge(port, fuzz, deadline=1.0)
    assert {signature(a) for a in verdict.anomalies} == {bug}, verdict


def test_headers_trimmed_into_one_name_are_blamed_on_trimming() -> None:
    def blamed(sent: tuple[tuple[str, str], ...], got: list[tuple[str, str]]) -> set[str]:
        delivery = Delivery("s", "/topic/t", b"", sent)
        return {s for s, _ in compare(delivery, Frame("MESSAGE", [("subscription", "s"),
                                                                   *got]), "1.2")}

    trimmed = {"value-encoding.no-trim"}
    # 'x-a ' and 'x-a' both became 'x-a': the first value is the other header's, trimmed
    assert blamed((("x-a ", "v1 "), ("x-a", "v2")), [("x-a", "v1"), ("x-a", "v2")]) == trimmed
    # the name came back trimmed, with some other value
    assert blamed((("x-b\r", " \x00"),), [("x-b", "")]) == trimmed
    assert blamed((("x-c", "v"),), []) == {"send.user-headers-passed"}


def test_the_probe_sees_a_live_broker_and_a_dead_one(clean: int) -> None:
    assert asyncio.run(oracle(clean).alive()) is None
    with serving(_silent_after_accept) as port:
        why = asyncio.run(oracle(port, deadline=0.3).alive())
    assert why is not None and "CONNECTED" in why and "\n" not in why


# -- hostile peers -------------------------------------------------------------------------

async def _silent_after_accept(reader: asyncio.StreamReader,
                               writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):  # the fuzzer resets connections
        while await reader.read(65536):
            pass


async def _connected_then(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          then: bytes, repeat: int = 1) -> None:
    try:
        await reader.read(65536)
        writer.write(b"CONNECTED\nversion:1.2\n\n\x00")
        for _ in range(repeat):
            writer.write(then)
            await writer.drain()
        while await reader.read(65536):
            pass
    except (ConnectionError, OSError):
        pass


async def _hangs(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _connected_then(reader, writer, b"")


async def _garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _connected_then(reader, writer, b"\xff\xfeNOT STOMP\x00\r\r:\n\n\x00MESSAGE\n\n\x00")


async def _floods(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _connected_then(reader, writer, b"z" * 65536, repeat=2000)


@pytest.mark.parametrize(("peer", "kinds"), [
    (_hangs, {Kind.TIMEOUT}),
    (_garbage, {Kind.INVALID_RESPONSE, Kind.TIMEOUT}),
    (_floods, {Kind.OVERSIZED_RESPONSE}),
])
def test_hostile_peers_give_anomalies_not_errors(peer: object, kinds: set[Kind]) -> None:
    fuzz = _first("undefined-escape")
    with serving(peer) as port:  # type: ignore[arg-type]
        verdict = judge(port, fuzz, deadline=0.5)
    assert {a.kind for a in verdict.anomalies} & kinds, verdict
    assert len(verdict.response) <= MAX_RESPONSE


def test_a_peer_that_never_answers_the_handshake_is_unreachable() -> None:
    with serving(_silent_after_accept) as port, pytest.raises(Unreachable) as error:
        judge(port, _first("unknown-command"), deadline=0.3)
    assert "\n" not in str(error.value)


# -- minimising, reproducers, records ------------------------------------------------------

def test_minimising_against_a_faulty_broker_keeps_the_rule_broken() -> None:
    rng = random.Random(3)
    chosen = weighted(("1.2",), ["undefined-escape"])
    fuzz = next(f for f in (fuzz_input(Choices.seeded(rng), ("1.2",), chosen)
                            for _ in range(500))
                if f.mutation == "undefined-escape" and f.data.count(b"\x00") >= 3)
    with serving(Broker(BrokerConfig(port=0, faults=frozenset(
            {"accept-undefined-escape"})))._accept) as port:
        judge_ = oracle(port, deadline=1.0)

        async def reproduces(candidate: FuzzInput) -> bool:
            verdict = await judge_.run(candidate)
            return any(a.kind is Kind.ACCEPTED for a in verdict.anomalies)

        smallest = asyncio.run(minimise(fuzz, reproduces, budget=20, keep=is_what_it_says))
        assert asyncio.run(reproduces(smallest))
    assert len(smallest.data) < len(fuzz.data)
    assert breaks_its_rule(smallest)
    assert len(frames_of(smallest) or []) == 1  # the well-formed frames before it are gone


def _finding(anomaly: Anomaly, fuzz: FuzzInput, verdict: Judgement) -> Finding:
    return new_finding(anomaly, fuzz, generator="grammar", response=verdict.response,
                       ended=verdict.ended, broker=BrokerInfo("reference@embedded", "",
                                                              "reference"),
                       campaign="c0ffee", seed=1, index=7, found_at="2024-01-01T00:00:00.000Z",
                       elapsed=1.5, inputs=8, tool_version="0")


@pytest.mark.parametrize("fault", ["accept-undefined-escape", "drop-user-headers"])
def test_the_reproducer_case_passes_on_the_clean_broker_and_fails_on_the_faulty_one(
        tmp_path: Path, fault: str) -> None:
    fuzz = _first("undefined-escape") if fault == "accept-undefined-escape" else \
        _valid(_delivers_user_headers)
    with serving(Broker(BrokerConfig(port=0, faults=frozenset({fault})))._accept) as port:
        verdict = judge(port, fuzz, deadline=1.0)
    finding = _finding(verdict.anomalies[0], fuzz, verdict)
    text = case_yaml(finding, path="f.json")
    (tmp_path / "case.yaml").write_text(text)
    (case,) = load_file(tmp_path / "case.yaml")  # the schema and the statements hold
    assert case.versions == (fuzz.version,)
    with serving(Broker(BrokerConfig(port=0))._accept) as port:
        (passed,) = run_cases(tmp_path, port, text)
    with serving(Broker(BrokerConfig(port=0, faults=frozenset({fault})))._accept) as port:
        (failed,) = run_cases(tmp_path, port, text)
    assert passed.outcome is Outcome.PASSED, passed.message
    assert failed.outcome is Outcome.FAILED, failed.message


def test_every_kind_of_input_makes_a_loadable_case(tmp_path: Path, clean: int) -> None:
    rng = random.Random(5)
    chosen = weighted(VERSIONS)
    for n in range(60):
        fuzz = fuzz_input(Choices.seeded(rng), VERSIONS, chosen)
        anomaly = Anomaly(Kind.TIMEOUT, fuzz.statement, "made up for the test")
        finding = _finding(anomaly, fuzz, judge(clean, fuzz))
        path = tmp_path / f"c{n}.yaml"
        path.write_text(case_yaml(finding))
        assert load_file(path)


def test_finding_files_and_records_round_trip(tmp_path: Path) -> None:
    fuzz = _first("undefined-escape")
    verdict = Judgement(response=b"CONNECTED\npasscode:hunter2\n\n\x00\xff", ended="RECEIPT")
    finding = _finding(Anomaly(Kind.ACCEPTED, fuzz.statement, "accepted"), fuzz, verdict)
    again = Finding.from_json(json.loads(json.dumps(finding.to_json("x.json"))))
    assert again == finding
    # the signature is computed from the finding, so a file of an earlier form is the same bug
    older = dict(finding.to_json(), signature=["grammar", "accepted-silently", "x", "y"])
    assert Finding.from_json(older).signature == finding.signature == (
        "accepted-silently", "value-encoding.undefined-escape-fatal", "")
    record = finding_record(finding, path="x.json", server="broker/1")
    assert record.keys() == FINDING_FIELDS.keys()
    assert record["signature"] == "accepted-silently value-encoding.undefined-escape-fatal"
    for name, value in record.items():
        assert isinstance(value, FINDING_FIELDS[name]) or (
            value is None and name in FINDING_NULLABLE), name
    other = dict(record, campaign_id="other")
    write_finding_records(tmp_path, [other], "other")
    path = write_finding_records(tmp_path, [record], finding.campaign)
    write_finding_records(tmp_path, [record], finding.campaign)  # rewritten, not doubled
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(r["campaign_id"] for r in lines) == ["c0ffee", "other"]
    assert all(r["schema_version"] == 1 for r in lines)


def _graded(kind: Kind, mutation: str, version: str, statement: str) -> Outcome:
    """The grade of an anomaly of `kind` for an input of `mutation` breaking `statement`."""
    mutated = MUTATIONS[mutation]
    given = FuzzInput(version=version, chunks=(b"ACK\nreceipt:r\n\n\x00",),  # type: ignore[arg-type]
                      expect=Expect.LIMIT if mutated.layer == "limit" else Expect.ERROR,
                      statement=statement, mutation=mutation, receipt="r")
    return grade(Anomaly(kind, statement, "seen"), given)


def test_a_frame_without_its_required_header_taken_is_graded_per_version() -> None:
    """1.1 and 1.2 make refusing it the server's duty; 1.0 binds the client alone (its
    server "may send ERROR frames"), as the catalogue's 1.0 cases grade it."""
    taken = functools.partial(_graded, Kind.ACCEPTED, "missing-required-header")
    assert taken("1.2", "ack.id-required") is Outcome.FAILED
    assert taken("1.0", "ack.message-id-required-v10") is Outcome.INFORMATIONAL
    # a SUBSCRIBE without id can be served all the same, as the catalogue grades it
    assert taken("1.2", "subscribe-id.required") is Outcome.INFORMATIONAL


def test_a_close_without_error_is_graded_at_the_version_of_its_rule() -> None:
    """A silent close past a limit is non-strict where the version states its limits rule,
    informational in 1.0, which states none."""
    closed = functools.partial(_graded, Kind.CLOSED_WITHOUT_ERROR, "content-length-huge")
    assert closed("1.2", "size-limits.error-then-close") is Outcome.NON_STRICT
    assert closed("1.1", "size-limits.error-then-close-v11") is Outcome.NON_STRICT
    assert closed("1.0", "size-limits.error-then-close") is Outcome.INFORMATIONAL
