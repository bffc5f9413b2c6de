"""Fuzz targets for the codec: each takes one input and raises if an invariant breaks (the
parser's, the busiest, is in readings.py).

The atheris harnesses in fuzz/ call these with coverage feedback; the tests and the
benchmark call them plainly. A target raises `InvariantBroken` for a broken invariant;
any other exception that is not a `StompError` escaped the codec, which is a bug of its
own ("Nothing else escapes the codec", conformance/codec/errors.py).

Inputs: the leading bytes are choices (see each target), the rest is the data.
"""

from __future__ import annotations

from collections.abc import Callable

from conformance.codec import (
    Frame,
    LocalProtocolError,
    Parser,
    StompError,
    Violation,
    encode,
    encoder,
    validate_server_frame,
)
from conformance.fuzz.parsing.draw import Draw
from conformance.fuzz.parsing.readings import InvariantBroken, check_statement, parse_target
from conformance.spec.grammar import (
    ACK_MODES,
    BODY_COMMANDS,
    COMMANDS,
    CRLF_EOL,
    ESCAPES,
    UNESCAPED_COMMANDS,
    VERSIONS,
    Version,
)

#: Test-only faults a target can plant in the code under test, to show that its checks
#: fire (a harness that cannot fail proves nothing). Name -> what it breaks.
PLANTS = {
    "lone-eol": "the parser drops a heart-beat EOL that arrives alone in its read",
    "unbounded": "the parser runs with limits far above those the target holds it to",
    "no-escape": "the encoder writes header names and values without escaping them",
    "base-ids": "the validator cites every rule by its STOMP 1.2 id, whatever the version",
}

_COMMANDS = sorted(COMMANDS)
_OFFERS: tuple[tuple[str, ...] | None, ...] = (
    None, ("1.0",), ("1.1",), ("1.2",), ("1.1", "1.2"), ("1.0", "1.1", "1.2"))
_ACK_MODES = sorted(ACK_MODES["1.2"])


# -- encode then parse ----------------------------------------------------------------------

def _unencodable(frame: Frame, version: Version, content_length: bool | None) -> str | None:
    """Why `encode` must refuse `frame` in `version`, or None if it must write it."""
    command, body = frame.command, frame.body
    if body and command not in BODY_COMMANDS and version != "1.0":
        return "a body on a frame that must not have one"
    escaped = ESCAPES[version] is not None and command not in UNESCAPED_COMMANDS
    for name, value in frame.headers:
        if not name:
            return "an empty header name"
        if not escaped and ("\n" in name + value or ":" in name
                            or (CRLF_EOL[version] and "\r" in name + value)):
            return f"header {name!r} needs escapes a STOMP {version} {command} frame lacks"
    if content_length is False and b"\x00" in body:
        return "a NUL in a body without content-length"
    return None


def _encode_unescaped(frame: Frame, *, version: Version, content_length: bool | None,
                      eol: bytes) -> bytes:
    """The `no-escape` plant: encode with the escaping of header text switched off."""
    namespace = vars(encoder)  # the name encode's helpers look `escape` up under
    original = namespace["escape"]
    namespace["escape"] = lambda text, version: text
    try:
        return encode(frame, version=version, content_length=content_length, eol=eol)
    finally:
        namespace["escape"] = original


def roundtrip_target(data: bytes, *, plant: str | None = None) -> None:
    """A frame built from the input, encoded then parsed, comes back the same; `encode`
    refuses exactly what the version cannot carry (LocalProtocolError).

    Input: [version] [command] [options] [header count] ([len] name [len] value)* body.
    Names and values are any text, so escaping is exercised in every version."""
    draw = Draw(data)
    version = draw.pick(VERSIONS)
    command = draw.pick(_COMMANDS)
    options = draw.byte()
    content_length = (None, True, False)[options % 3]
    eol = b"\r\n" if options // 3 % 2 and CRLF_EOL[version] else b"\n"
    headers = []
    for _ in range(draw.byte() % 8):
        name, value = draw.text(12), draw.text(24)
        if name != "content-length":  # a caller's own content-length is written as given
            headers.append((name, value))
    body = draw.rest() if command in BODY_COMMANDS or options // 6 % 2 else b""
    frame = Frame(command, headers, body)
    refusal = _unencodable(frame, version, content_length)
    write = _encode_unescaped if plant == "no-escape" else encode
    try:
        wire = write(frame, version=version, content_length=content_length, eol=eol)
    except LocalProtocolError as error:
        if refusal is None:
            raise InvariantBroken(f"encode refused {frame!r} in {version}: {error}") from error
        return
    if refusal is not None:
        raise InvariantBroken(f"encode wrote {frame!r} in {version} despite {refusal}")
    if content_length or (content_length is None and body):
        frame = frame.replace(headers=[*frame.headers, ("content-length", str(len(body)))])
    try:
        events = Parser(version=version).feed(wire)
    except StompError as error:
        raise InvariantBroken(f"encode wrote {wire!r} for {frame!r} in {version}; the "
                              f"parser refuses it: {error}") from error
    if not (len(events) == 1 and isinstance(events[0], Frame) and events[0] == frame
            and events[0].size == len(wire)):
        raise InvariantBroken(f"{frame!r} in {version} came back as {events!r} from {wire!r}")


# -- the validator ----------------------------------------------------------------------------

def _base_ids(found: list[Violation]) -> list[Violation]:
    """The `base-ids` plant: every statement by its 1.2 id, the version's own id lost."""
    return [Violation(v.statement.removesuffix("-v10").removesuffix("-v11"), v.message,
                      v.offset) for v in found]


def validator_target(data: bytes, *, plant: str | None = None) -> None:
    """validate_server_frame returns violations, never raises, and cites only statements
    of the catalogue that cover the version, on any frame an observing parser yields.

    Input: [version] [offered versions] [ack mode] stream."""
    draw = Draw(data)
    version = draw.pick(VERSIONS)
    offered = draw.pick(_OFFERS)
    mode = draw.pick((None, *_ACK_MODES))
    try:
        events = Parser(version=version, strict=False).feed(draw.rest())
    except StompError as error:
        events = getattr(error, "events", [])
    for event in events:
        if isinstance(event, Frame):
            ack_modes = {event.get("subscription") or "": mode} if mode else None
            found = validate_server_frame(event, version=version, ack_modes=ack_modes,
                                          offered=offered)
            if plant == "base-ids":
                found = _base_ids(found)
            for violation in found:
                if not isinstance(violation, Violation):
                    raise InvariantBroken(f"{violation!r} is not a Violation")
                check_statement(violation.statement, version, "the validator's", violation)


#: Target name -> function (each takes `plant=` too), for the harnesses, the tests and the
#: benchmark.
TARGETS: dict[str, Callable[..., None]] = {
    "parser": parse_target,
    "roundtrip": roundtrip_target,
    "validator": validator_target,
}
