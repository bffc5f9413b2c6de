"""Fault logic kept out of protocol.py: the faults that bend a frame as the reference broker
receives it, before it is judged or handled (the frame as they bend it, a copy, or the ERROR
message with which a fault refuses it), and those that bend which delivered messages wait
for an ACK."""

from __future__ import annotations

from conformance.broker.faults import Faults
from conformance.codec import Frame


def bend_incoming(frame: Frame, faults: Faults, version: str) -> Frame | str:
    """`frame` as the faults on bend it, or why one of them refuses it (`version`: the
    session's)."""
    headers = frame.headers
    if faults.trim_headers:
        headers = tuple((k, v.strip()) for k, v in headers)
    if faults.trim_header_names:
        headers = tuple((k.strip(), v) for k, v in headers)
    if faults.last_header_wins or (faults.last_header_wins_beyond_send
                                   and frame.command != "SEND"):
        headers = headers[::-1]
    if faults.ack_needs_all_id_headers and frame.command in ("ACK", "NACK"):
        missing = [n for n in ("id", "message-id", "subscription") if n not in frame]
        if missing:
            return f"{frame.command} without {', '.join(map(repr, missing))}"
    if faults.refuse_body_v10 and version == "1.0" and frame.body and frame.command != "SEND":
        return f"a {frame.command} frame must not have a body"
    return frame if headers is frame.headers else frame.replace(headers=headers)


def kept_unacked(mode: str, faults: Faults, version: str) -> bool:
    """Whether a message delivered to a subscription of ack `mode` waits for its ACK (and
    goes back to its destination if its consumer goes first), as the faults bend it."""
    if mode == "auto":
        return faults.auto_ack_redelivered and version != "1.0"
    return not (faults.client_ack_v10_as_auto and version == "1.0")
