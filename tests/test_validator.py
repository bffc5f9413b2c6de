"""The server-frame validator: every violation names the statement of its version."""

from __future__ import annotations

import pytest

from conformance.codec import Frame, Parser, validate_server_frame


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
