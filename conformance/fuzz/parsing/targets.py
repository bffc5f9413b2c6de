"""Fuzz targets for the codec: each takes one input and raises if an invariant breaks.

The atheris harnesses in fuzz/ call these with coverage feedback; the tests and the
benchmark call them plainly. A target raises `InvariantBroken` for a broken invariant;
any other exception that is not a `StompError` escaped the codec, which is a bug of its
own ("Nothing else escapes the codec", conformance/codec/errors.py).

Inputs: the leading bytes are choices (see each target), the rest is the data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

from conformance.codec import (
    Event,
    Frame,
    Heartbeat,
    LimitExceeded,
    Limits,
    LocalProtocolError,
    Parser,
    ProtocolViolation,
    StompError,
    Violation,
    encode,
    encoder,
    validate_server_frame,
)
from conformance.fuzz.parsing.draw import Draw
from conformance.spec import catalogue
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


class InvariantBroken(Exception):
    """The codec broke one of its stated invariants on a fuzz input."""


#: Limits small enough that short inputs reach every one of them.
SMALL_LIMITS = Limits(max_headers=4, max_header_line=48, max_body=64, max_frame=160)

#: Test-only faults a target can plant in the code under test, to show that its checks
#: fire (a harness that cannot fail proves nothing). Name -> what it breaks.
PLANTS = {
    "lone-eol": "the parser drops a heart-beat EOL that arrives alone in its read",
    "unbounded": "the parser runs with limits far above those the target holds it to",
    "no-escape": "the encoder writes header names and values without escaping them",
    "base-ids": "the validator cites every rule by its STOMP 1.2 id, whatever the version",
}

#: The limits of a parse that does not choose the small ones (built once: Limits checks
#: its fields).
_LIMITS = Limits()

#: The limits an `unbounded` parser runs with.
_UNBOUNDED = Limits(max_headers=10**6, max_header_line=10**9, max_body=10**9, max_frame=10**9)

_COMMANDS = sorted(COMMANDS)
_OFFERS: tuple[tuple[str, ...] | None, ...] = (
    None, ("1.0",), ("1.1",), ("1.2",), ("1.1", "1.2"), ("1.0", "1.1", "1.2"))
_ACK_MODES = sorted(ACK_MODES["1.2"])


def check(condition: bool, message: str) -> None:
    if not condition:
        raise InvariantBroken(message)


# -- the parser -----------------------------------------------------------------------------
#
# These run for every input (tens of thousands a second under atheris): every check is a
# plain comparison, and a message is built only when a check fails.

def _same_event(a: Event, b: Event) -> bool:
    """Everything two events say is the same: offsets, contents, and the statement and
    offset of each violation (not its wording)."""
    if a.offset != b.offset:
        return False
    if isinstance(a, Heartbeat):
        return isinstance(b, Heartbeat) and a.eol == b.eol
    if not (isinstance(b, Frame) and a.size == b.size and a.command == b.command
            and a.headers == b.headers and a.body == b.body):
        return False
    found, other = a.violations, b.violations
    return len(found) == len(other) and all(v.statement == w.statement and v.offset == w.offset
                                            for v, w in zip(found, other, strict=True))


def _same_events(first: Sequence[Event], second: Sequence[Event]) -> bool:
    return len(first) == len(second) and all(map(_same_event, first, second))


def _error_key(error: StompError | None) -> tuple[object, ...] | None:
    if error is None:
        return None
    return (type(error).__name__, error.statement, error.offset)


class Reading:
    """One parse of a stream: its events and the error that ended it, if any."""

    __slots__ = ("events", "error")

    def __init__(self, events: list[Event], error: StompError | None) -> None:
        self.events = events
        self.error = error


def read(stream: bytes, sizes: Sequence[int], *, version: Version, strict: bool,
         limits: Limits, plant: str | None = None, parser: type[Parser] = Parser) -> Reading:
    """Feed `stream` to a `parser` in reads of `sizes`, each used once, then the rest in one
    read, then `eof`, checking after each read that memory stays bounded and the offsets
    account for every byte."""
    reader = parser(version=version, strict=strict,
                    limits=_UNBOUNDED if plant == "unbounded" else limits)
    lone_eol = plant == "lone-eol"  # the plant: a heart-beat EOL read on its own is lost
    events: list[Event] = []
    feed = reader.feed
    pos = count = 0
    total = len(stream)
    reads = len(sizes)
    most = limits.max_frame
    try:
        while pos < total:
            chunk = stream[pos:pos + sizes[count]] if count < reads else stream[pos:]
            count += 1
            size = len(chunk)
            pos += size
            found = feed(chunk)
            if found and not (lone_eol and chunk == b"\n"):
                events += found
            buffered = reader.buffered
            if buffered > most or reader.offset + buffered != pos:
                _check_read(reader, size, pos, most)
        reader.eof()
    except StompError as error:
        events += getattr(error, "events", ())
        return Reading(events, error)
    return Reading(events, None)


def _check_read(parser: Parser, size: int, fed: int, most: int) -> None:
    """Fail with what went wrong after a read: memory, or octets unaccounted for."""
    check(parser.buffered <= most,
          f"{parser.buffered} octets kept after a read of {size}, over max_frame {most}")
    check(parser.offset + parser.buffered == fed,
          f"offset {parser.offset} + buffered {parser.buffered} != {fed} octets fed")


@cache
def _covering(version: Version) -> frozenset[str]:
    """The statements of the catalogue that cover `version`."""
    return frozenset(s.id for s in catalogue() if version in s.versions)


def _check_statement(statement: str | None, version: Version, what: str,
                     citer: object) -> None:
    """A cited statement exists and binds the version it was cited for. `what` and
    `citer` say who cited it, formatted only if it does not."""
    if statement in _covering(version):
        return
    raise InvariantBroken(f"{what} {citer} cites {statement!r}, which "
                          + ("is not in statements.yaml" if statement not in catalogue() else
                             f"does not cover STOMP {version}"))


def _check_reading(stream: bytes, reading: Reading, version: Version, *,
                   events: bool = True) -> None:
    """Offsets rise, each event covers its own octets, every citation is real. With
    `events` false, only the error: the events are checked as equal to another reading's."""
    end = 0
    covering = _covering(version)
    for event in reading.events if events else reading.events[-1:]:  # the last: where it ends
        offset = event.offset
        if offset < end:
            raise InvariantBroken(f"event at {offset} overlaps the one ending at {end}")
        if isinstance(event, Heartbeat):
            end = offset + len(event.eol)
            if stream[offset:end] != event.eol:
                raise InvariantBroken(f"heart-beat at {offset} is not {event.eol!r} in the "
                                      "stream")
        else:
            end = offset + event.size
            if event.size <= 0 or end > len(stream) or stream[end - 1] != 0:
                raise InvariantBroken(f"frame at {offset} of size {event.size} does not end "
                                      "on a NUL")
            for violation in event.violations:
                if violation.statement not in covering:
                    _check_statement(violation.statement, version, "violation", violation)
    error = reading.error
    if isinstance(error, ProtocolViolation):
        _check_statement(error.statement, version, "error", error)
        if error.offset is None or not end <= error.offset <= len(stream):
            raise InvariantBroken(f"error offset {error.offset} outside the unread part "
                                  f"{end}..{len(stream)}")


def _same(first: Reading, second: Reading, what: Callable[[], str]) -> None:
    """Two readings give the same events and the same error; `what` names them."""
    if not _same_events(first.events, second.events):
        raise InvariantBroken(f"{what()}: different events")
    a, b = first.error, second.error
    if isinstance(a, LimitExceeded) or isinstance(b, LimitExceeded):
        # A limit may be hit while a frame is still arriving, before the rule the whole
        # frame would break is seen: which error comes first may differ, not that one does.
        if (a is None) != (b is None):
            raise InvariantBroken(f"{what()}: {a!r} against {b!r}")
    elif _error_key(a) != _error_key(b):
        raise InvariantBroken(f"{what()}: {a!r} against {b!r}")


def parse_input(data: bytes) -> tuple[Version, bool, Limits, list[int], bytes]:
    """The parser target's input: [config] [n] [n read sizes] stream. config picks the
    version (mod 3), the mode of the chunked reading (strict or not) and small or default
    limits; up to 7 read sizes of 1..256 octets split the stream's start, the rest is one
    read (none: one read)."""
    draw = Draw(data)
    config = draw.byte()
    version = VERSIONS[config % 3]
    strict = config // 3 % 2 == 0
    limits = SMALL_LIMITS if config // 6 % 2 == 0 else _LIMITS
    sizes = [draw.byte() + 1 for _ in range(draw.byte() % 8)]
    return version, strict, limits, sizes, draw.rest()


def parse_target(data: bytes, *, plant: str | None = None,
                 traced: type[Parser] = Parser) -> None:
    """Parse one stream whole in observing mode and in reads chosen by the input in the
    mode it chooses: an observing chunked reading must give the same events and error, a
    strict one must stop at the first violation the observing reading records. A whole
    strict reading is one of the choices (no read sizes), so two parses per input check
    what three would.

    The chunked reading runs `traced`, the parser under coverage (fuzz/parser.py passes an
    instrumented copy): every path of the whole reading is one of its choices too (observing,
    no read sizes), so the whole one runs the parser as installed, pure or compiled.

    Input: see `parse_input`."""
    version, strict, limits, sizes, stream = parse_input(data)
    whole = read(stream, (), version=version, strict=False, limits=limits, plant=plant)
    chunked = read(stream, sizes, version=version, strict=strict, limits=limits, plant=plant,
                   parser=traced)
    _check_reading(stream, whole, version)
    _check_reading(stream, chunked, version, events=False)  # its events are compared below
    if strict:
        _check_strict_stops_first(chunked, whole, lambda: f"strict reads of {sizes}")
    else:
        _same(whole, chunked, lambda: f"reads of {sizes} against one read")


def _check_strict_stops_first(strict: Reading, observing: Reading,
                              what: Callable[[], str]) -> None:
    """The observing parser records what the strict one raises, and nothing before it."""
    error = strict.error
    if not isinstance(error, ProtocolViolation):  # no frame broke a rule: a plain reading
        _same(observing, strict, what)
        return
    count = len(strict.events)
    if not _same_events(observing.events[:count], strict.events):
        raise InvariantBroken(f"{what()}: different events before its error")
    if len(observing.events) > count:
        frame = observing.events[count]
        first = frame.violations[0] if isinstance(frame, Frame) and frame.violations else None
        if first is None or (first.statement, first.offset) != (error.statement, error.offset):
            raise InvariantBroken(f"{what()}: strict raised {error!r}; observing recorded "
                                  f"{first!r} first")
    elif observing.error is None:
        raise InvariantBroken(f"{what()}: strict raised {error!r}; observing ended cleanly "
                              "without that frame")


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
        frame.headers.append(("content-length", str(len(body))))
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
                _check_statement(violation.statement, version, "the validator's", violation)


#: Target name -> function (each takes `plant=` too), for the harnesses, the tests and the
#: benchmark.
TARGETS: dict[str, Callable[..., None]] = {
    "parser": parse_target,
    "roundtrip": roundtrip_target,
    "validator": validator_target,
}
