"""The reference broker's fault switches that bend the frames it receives, before it judges
them: each returns the frames a broker with that defect would have read in place of the
one received (a copy: the received frame is left as it came), or why it refuses it."""

from __future__ import annotations

from conformance.broker.faults import Faults
from conformance.codec import Frame, Heartbeat, Parser
from conformance.spec.grammar import CLIENT_COMMANDS


def bend(faults: Faults, frame: Frame, version: str, parser_version: str) -> list[Frame] | str:
    """The frames the faults make of `frame` (in a `version` session, read by the
    `parser_version` grammar), or the message of the ERROR one of them answers it with."""
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
    command, body, violations = frame.command, frame.body, frame.violations
    if faults.commands_case_insensitive and command.upper() in CLIENT_COMMANDS:
        command = command.upper()
        violations = tuple(v for v in violations
                           if not v.statement.startswith("frames.command"))
    if command == "SEND" and faults.body_as_text:
        body = body.decode("utf-8", "replace").encode()
    if command == "SEND" and faults.body_eols_trimmed:
        body = body.replace(b"\r\n", b"\n").rstrip(b"\n")
    after: list[Frame] = []
    if (faults.content_length_send_only and command != "SEND" and b"\0" in body
            and frame.get("content-length") is not None):
        # read up to the first NUL: the body's rest is read as the frames that follow
        body, rest = body.split(b"\0", 1)
        events = Parser(version=parser_version, strict=False).feed(rest + b"\0")  # type: ignore[arg-type]
        after = [e for e in events if not isinstance(e, Heartbeat)]
        if not body:
            violations = tuple(v for v in violations if not v.statement.startswith("body."))
    if (command, headers, body, violations) == (frame.command, frame.headers, frame.body,
                                                 frame.violations):
        return [frame, *after]
    return [Frame(command, headers, body, violations=violations, notes=frame.notes,
                  offset=frame.offset, size=frame.size), *after]


def excused(faults: Faults, statement: str) -> bool:
    """A violation a fault tells the broker to let pass."""
    return (faults.accept_undefined_escape
            and statement.startswith("value-encoding.undefined-escape")) or \
        (faults.accept_body_on_subscribe and statement == "body.forbidden-frames") or \
        (faults.content_length_nul_unchecked
         and statement.startswith("content-length.nul-terminated")) or \
        (faults.content_length_unreadable_ignored
         and statement.startswith("content-length.read-octets")) or \
        (faults.invalid_utf8_accepted and statement == "value-encoding.utf8")
