"""The judge of what a peer sends: a server frame (what a broker sends) or a client frame
(what a client library sends) checked against the statements of the negotiated version;
every violation returned names its statement."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from conformance.codec.events import Frame, Violation
from conformance.spec import statement_id
from conformance.spec.grammar import (
    ACK_MODES,
    BODY_COMMANDS,
    CLIENT_COMMANDS,
    CLIENT_REQUIRED_HEADERS,
    HEART_BEAT,
    MIME_TYPE,
    SERVER_COMMANDS,
    SERVER_HEADER,
    SERVER_REQUIRED_HEADERS,
    Version,
)

#: One version of accept-version: major.minor.
ACCEPT_VERSION_ITEM = re.compile(r"\A[0-9]{1,4}\.[0-9]{1,4}\Z")


def validate_server_frame(frame: Frame, *, version: Version,
                          ack_modes: Mapping[str, str] | None = None,
                          offered: Sequence[str] | None = None) -> list[Violation]:
    """Violations of `frame`, received from a server in a session of `version`.

    `ack_modes` maps the client's subscription ids to their ack modes (for MESSAGE's
    `ack` header in 1.2); `offered` is the CONNECT's accept-version list (for the version
    a CONNECTED chose). Violations the parser recorded on the frame are not repeated."""
    found: list[Violation] = []

    def violate(rule: str, message: str) -> None:
        found.append(Violation(statement_id(rule, version), message,
                               frame.offset if frame.offset >= 0 else None))

    command = frame.command
    if command not in SERVER_COMMANDS:
        violate("frames.command-grammar", f"a server sent {command[:40]!r}, which is not a "
                "server command")
        return found
    if command != "CONNECTED":  # CONNECTED's own version header is judged below
        for name, statement in SERVER_REQUIRED_HEADERS[command][version]:
            if name not in frame:
                violate(statement, f"{command} without the required {name!r} header")
    # STOMP 1.0 has no body rule, and no negotiation: its CONNECTED carries no version,
    # heart-beat or server header to judge.
    if frame.body and command not in BODY_COMMANDS and version != "1.0":
        violate("body.forbidden-frames", f"a {command} frame must not have a body")
    if command == "CONNECTED":
        if version != "1.0":
            _check_connected(frame, offered, violate)
    elif command == "MESSAGE" and version == "1.2" and ack_modes:
        mode = ack_modes.get(frame.get("subscription") or "")
        if mode in ("client", "client-individual") and "ack" not in frame:
            violate("message.ack-required", f"MESSAGE for a {mode} subscription without "
                    "an 'ack' header")
    elif command == "ERROR" and "message" not in frame:
        violate("error.message-header", "ERROR without a 'message' header")
    _check_content(frame, version, violate)
    return found


def validate_client_frame(frame: Frame, *, version: Version) -> list[Violation]:
    """Violations of `frame`, received from a client in a session of `version` (for
    CONNECT and STOMP: the version the client was asked to offer). Violations the parser
    recorded on the frame are not repeated."""
    found: list[Violation] = []

    def violate(rule: str, message: str) -> None:
        found.append(Violation(statement_id(rule, version), message,
                               frame.offset if frame.offset >= 0 else None))

    command = frame.command
    if command not in CLIENT_COMMANDS or version not in CLIENT_REQUIRED_HEADERS[command]:
        violate("frames.command-grammar", f"a client sent {command[:40]!r}, which is not a "
                f"STOMP {version} client command")
        return found
    for name, statement in CLIENT_REQUIRED_HEADERS[command][version]:
        # a 1.0 UNSUBSCRIBE "requires either a destination header or an id header"
        if name not in frame and not (command == "UNSUBSCRIBE" and "id" in frame):
            violate(statement, f"{command} without the required {name!r} header")
    if frame.body and command not in BODY_COMMANDS and version != "1.0":
        violate("body.forbidden-frames", f"a {command} frame must not have a body")
    if command in ("CONNECT", "STOMP") and version != "1.0":
        heart_beat = frame.get("heart-beat")
        if heart_beat is not None and not HEART_BEAT.match(heart_beat):
            violate("heart-beating.header-format", f"heart-beat {heart_beat[:40]!r} is not "
                    "two integers separated by a comma")
        accept = frame.get("accept-version")
        if accept is not None and not _incrementing(accept):
            violate("negotiation.accept-version-format", f"accept-version {accept[:40]!r} is "
                    "not a comma separated list of incrementing versions")
    elif command == "SUBSCRIBE":
        mode = frame.get("ack")
        if mode is not None and mode not in ACK_MODES[version]:
            violate("subscribe-ack.valid-values", f"SUBSCRIBE with ack mode {mode[:40]!r}")
    _check_content(frame, version, violate)
    return found


def _incrementing(versions: str) -> bool:
    """Whether `versions` is "a comma separated list of incrementing STOMP protocol
    versions": each major.minor, each higher than the one before."""
    items = versions.split(",")
    if not all(ACCEPT_VERSION_ITEM.match(item) for item in items):
        return False
    keys = [tuple(map(int, item.split("."))) for item in items]
    return all(a < b for a, b in zip(keys, keys[1:], strict=False))


def _check_content(frame: Frame, version: Version, violate: Callable[[str, str], None]) -> None:
    """content-length and content-type of a frame with a body (1.1 and 1.2)."""
    command = frame.command
    if command in BODY_COMMANDS and frame.body and version != "1.0":
        if "content-length" not in frame:
            violate("content-length.should-include", f"{command} with a body but no "
                    "content-length header")
        content_type = frame.get("content-type")
        if content_type is not None and not MIME_TYPE.match(content_type):
            violate("content-type.mime-type", f"content-type {content_type[:60]!r} is not a "
                    "MIME type")


def _check_connected(frame: Frame, offered: Sequence[str] | None,
                     violate: Callable[[str, str], None]) -> None:
    """The version chosen, the heart-beat and server headers (STOMP 1.1 and 1.2)."""
    chosen = frame.get("version")
    if chosen is None:
        # No version header means the server chose 1.0, which only a 1.0 offer allows.
        if offered is not None and "1.0" not in offered:
            violate("connected.version-required", "CONNECTED without a 'version' header to "
                    f"a client offering {','.join(offered)}")
    elif offered is not None and chosen not in offered:
        violate("negotiation.highest-common", f"CONNECTED chose version {chosen!r}, which "
                f"the client did not offer ({','.join(offered)})")
    heart_beat = frame.get("heart-beat")
    if heart_beat is not None and not HEART_BEAT.match(heart_beat):
        violate("heart-beating.header-format", f"heart-beat {heart_beat[:40]!r} is not two "
                "integers separated by a comma")
    server = frame.get("server")
    if server is not None and not SERVER_HEADER.match(server):
        violate("connected.server-name", f"server {server[:60]!r} does not start with a "
                "server-name")
