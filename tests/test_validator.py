"""The server-frame validator: every violation names the statement of its version."""

from __future__ import annotations

import pytest

from conformance.codec import Frame, Parser, validate_server_frame
from conformance.spec import catalogue


def statements(frame: Frame, **context: object) -> list[str]:
    return [v.statement for v in validate_server_frame(frame, **context)]  # type: ignore[arg-type]


GOOD_MESSAGE = [("destination", "/queue/a"), ("message-id", "1"), ("subscription", "0")]


def test_a_conformant_message_has_no_violation() -> None:
    frame = Frame("MESSAGE", GOOD_MESSAGE + [("ack", "a1"), ("content-length", "2"),
                                             ("content-type", "text/plain")], b"hi")
    assert statements(frame, version="1.2", ack_modes={"0": "client"}) == []


@pytest.mark.parametrize(("version", "missing", "statement"), [
    ("1.2", "destination", "message.destination-required"),
    ("1.2", "message-id", "message.id-and-subscription-required"),
    ("1.2", "subscription", "message.id-and-subscription-required"),
    ("1.1", "subscription", "message.id-and-subscription-required-v11"),
    ("1.0", "message-id", "message.message-id-required-v10"),
])
def test_message_required_headers(version: str, missing: str, statement: str) -> None:
    frame = Frame("MESSAGE", [h for h in GOOD_MESSAGE if h[0] != missing])
    assert statements(frame, version=version) == [statement]


def test_subscription_is_not_required_in_1_0() -> None:
    assert statements(Frame("MESSAGE", GOOD_MESSAGE[:2]), version="1.0") == []


@pytest.mark.parametrize(("mode", "expected"), [
    ("client", ["message.ack-required"]), ("client-individual", ["message.ack-required"]),
    ("auto", []),
])
def test_ack_header_required_on_explicit_ack_subscriptions_in_1_2(mode: str,
                                                                   expected: list[str]) -> None:
    frame = Frame("MESSAGE", GOOD_MESSAGE)
    assert statements(frame, version="1.2", ack_modes={"0": mode}) == expected
    assert statements(frame, version="1.1", ack_modes={"0": mode}) == []


def test_receipt_error_and_bodies() -> None:
    assert statements(Frame("RECEIPT"), version="1.2") == ["receipt.receipt-id-required"]
    assert statements(Frame("RECEIPT", {"receipt-id": "1"}, b"x"), version="1.2") == \
        ["body.forbidden-frames"]
    assert statements(Frame("ERROR"), version="1.2") == ["error.message-header"]
    assert statements(Frame("ERROR", {"message": "m"}, b"body"), version="1.2") == \
        ["content-length.should-include"]
    assert statements(Frame("ERROR", {"message": "m", "content-length": "1",
                                      "content-type": "plain"}, b"x"), version="1.2") == \
        ["content-type.mime-type"]
    assert statements(Frame("SEND", {"destination": "/q"}), version="1.2") == \
        ["frames.command-grammar"]


@pytest.mark.parametrize(("headers", "offered", "expected"), [
    ({"version": "1.2"}, ["1.1", "1.2"], []),
    ({}, ["1.1", "1.2"], ["connected.version-required"]),
    ({}, ["1.0", "1.1"], []),                           # the server chose 1.0
    ({"version": "1.2"}, ["1.0", "1.1"], ["negotiation.highest-common"]),
    ({"version": "1.2", "heart-beat": "10,x"}, ["1.2"], ["heart-beating.header-format"]),
    ({"version": "1.2", "heart-beat": "0,5000"}, ["1.2"], []),
    ({"version": "1.2", "server": "/1.0"}, ["1.2"], ["connected.server-name"]),
    ({"version": "1.2", "server": "Apache/1.3.9 (Debian) x"}, ["1.2"], []),
])
def test_connected(headers: dict[str, str], offered: list[str], expected: list[str]) -> None:
    assert statements(Frame("CONNECTED", headers), version="1.2", offered=offered) == expected


def test_parsed_frames_keep_their_offset_on_violations() -> None:
    (_, frame) = Parser().feed(b"\nRECEIPT\n\n\x00")
    (violation,) = validate_server_frame(frame, version="1.2")  # type: ignore[arg-type]
    assert violation.offset == 1 and "receipt-id" in str(violation)


# -- regressions the atheris harness fuzz/validator.py found ------------------------------------

@pytest.mark.parametrize("offered", [None, ["1.0"], ["1.1"], ["1.1", "1.2"]])
def test_a_1_0_connected_is_not_judged_by_the_negotiation_of_1_1(
        offered: list[str] | None) -> None:
    # negotiation.highest-common, connected.version-required and the heart-beat and server
    # rules are 1.1 and 1.2 statements: citing them for a 1.0 session named a rule that
    # does not exist in that version.
    frame = Frame("CONNECTED", {"version": "9.9", "heart-beat": "x", "server": "/bad"})
    assert statements(frame, version="1.0", offered=offered) == []
    assert statements(Frame("CONNECTED"), version="1.0", offered=offered) == []


def test_1_0_has_no_body_rule_for_the_validator_either() -> None:
    frame = Frame("RECEIPT", {"receipt-id": "1"}, b"body")
    assert statements(frame, version="1.0") == []
    assert statements(frame, version="1.1") == ["body.forbidden-frames"]


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_every_cited_statement_exists_in_the_version_judged(version: str) -> None:
    bad = [Frame("CONNECTED", {"version": "9.9", "heart-beat": "x", "server": "/"}, b"b"),
           Frame("CONNECTED"), Frame("MESSAGE", {"content-type": "x"}, b"m"),
           Frame("RECEIPT", {}, b"b"), Frame("ERROR", {}, b"e"), Frame("SEND")]
    known = catalogue()
    for frame in bad:
        for cited in statements(frame, version=version, offered=["1.1"],
                                ack_modes={"": "client"}):
            assert cited in known and version in known[cited].versions, (frame, cited)
