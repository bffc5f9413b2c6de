"""The parser's fuzz target: one stream read whole and in reads the input chooses, each
reading checked against the stream and the two against each other.

fuzz/parser.py runs `parse_target` for every input, thousands of times a second: every
check is a plain comparison and builds its message only when it fails, and the mypyc build
compiles this module (setup.py), so that the target's own work costs little beside the
traced parser's. A broken invariant raises `InvariantBroken`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from functools import cache
from typing import Protocol

from conformance.codec import (
    Event,
    Frame,
    Heartbeat,
    LimitExceeded,
    Limits,
    ProtocolViolation,
    StompError,
)
from conformance.fuzz.parsing.draw import Draw
from conformance.spec import catalogue
from conformance.spec.grammar import VERSIONS, Version


class InvariantBroken(Exception):
    """The codec broke one of its stated invariants on a fuzz input."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise InvariantBroken(message)


#: Limits small enough that short inputs reach every one of them.
SMALL_LIMITS = Limits(max_headers=4, max_header_line=48, max_body=64, max_frame=160)

#: The limits of a parse that does not choose the small ones (built once: Limits checks
#: its fields).
_LIMITS = Limits()

#: The limits of the `unbounded` plant's parser (see targets.PLANTS).
_UNBOUNDED = Limits(max_headers=10**6, max_header_line=10**9, max_body=10**9, max_frame=10**9)


class Reader(Protocol):
    """What a reading needs of a parser: the installed Parser's, or a traced copy's."""

    @property
    def buffered(self) -> int: ...

    @property
    def offset(self) -> int: ...

    def feed(self, data: bytes) -> list[Event]: ...

    def eof(self) -> None: ...


def installed_parser() -> Callable[..., Reader]:
    """The Parser as installed, looked up when a reading runs. A harness that traces the
    parser in place replaces its module before this one is imported, and the mypyc build of
    this module must not name the compiled class then (it would never have been set up)."""
    parser: Callable[..., Reader] = sys.modules["conformance.codec"].Parser
    return parser


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
         limits: Limits, plant: str | None = None,
         parser: Callable[..., Reader] | None = None) -> Reading:
    """Feed `stream` to a `parser` (the installed one if none) in reads of `sizes`, each
    used once, then the rest in one read, then `eof`, checking after each read that memory
    stays bounded and the offsets account for every byte."""
    reader = (parser or installed_parser())(
        version=version, strict=strict, limits=_UNBOUNDED if plant == "unbounded" else limits)
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


def _check_read(parser: Reader, size: int, fed: int, most: int) -> None:
    """Fail with what went wrong after a read: memory, or octets unaccounted for."""
    check(parser.buffered <= most,
          f"{parser.buffered} octets kept after a read of {size}, over max_frame {most}")
    check(parser.offset + parser.buffered == fed,
          f"offset {parser.offset} + buffered {parser.buffered} != {fed} octets fed")


@cache
def _covering(version: Version) -> frozenset[str]:
    """The statements of the catalogue that cover `version`."""
    return frozenset(s.id for s in catalogue() if version in s.versions)


def check_statement(statement: str | None, version: Version, what: str,
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
                    check_statement(violation.statement, version, "violation", violation)
    error = reading.error
    if isinstance(error, ProtocolViolation):
        check_statement(error.statement, version, "error", error)
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
                 traced: Callable[..., Reader] | None = None) -> None:
    """Parse one stream whole in observing mode and in reads chosen by the input in the
    mode it chooses: an observing chunked reading must give the same events and error, a
    strict one must stop at the first violation the observing reading records. A whole
    strict reading is one of the choices (no read sizes), so two parses per input check
    what three would.

    The chunked reading runs `traced`, the parser under coverage (fuzz/parser.py passes an
    instrumented copy; the installed one if none): every path of the whole reading is one of
    its choices too (observing, no read sizes), so the whole one runs the parser as
    installed, pure or compiled.

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
