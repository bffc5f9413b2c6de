"""Three readings of one byte stream: our parser, stomp.py's and stompest's, each driven the
way its library drives it and reduced to the same shape for the differential comparison.

- stomp.py: its transport's frame splitting (`BaseTransport.__read`: to the first NUL,
  stretched to a content-length, EOLs skipped) fed by a stub `receive`, then
  `stomp.utils.parse_frame` on each frame, as `__read_frames` does. It has no version.
- stompest: `stompest.protocol.parser.StompParser(version).add(data)`, then `get()`.

Each library is imported on first use: both are optional (the `peers` extra).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance.codec import Frame, LimitExceeded, Parser, StompError
from conformance.spec.grammar import Version


@dataclass(frozen=True, slots=True)
class Seen:
    """A frame as one library's API presents it: headers are that library's mapping
    (repeated names resolved its own way), as sorted pairs so readings compare."""

    command: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    #: Ours only: every header entry in wire order, repeats included (not compared).
    entries: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        headers = ", ".join(f"{k!r}: {v!r}" for k, v in self.headers)
        body = self.body if len(self.body) <= 24 else self.body[:24] + b"..."
        return f"{self.command[:24]!r} {{{headers[:120]}}} {body!r}"


@dataclass(frozen=True, slots=True)
class Reading:
    """What one parser made of a stream: its frames, then why it stopped."""

    frames: tuple[Seen, ...]
    #: The exception that stopped it ("EscapeError: ..."), or None.
    error: str | None = None
    #: Bytes held for a frame that has not ended when the stream did.
    pending: bool = False
    # Ours only: the statement the error cites, whether it is a limit, and where each
    # frame lies in the stream and where the error is.
    statement: str | None = None
    limit: bool = False
    spans: tuple[tuple[int, int], ...] = field(default=())
    offset: int | None = None


def _seen(command: str, headers: dict[str, str], body: bytes) -> Seen:
    return Seen(command, tuple(sorted(headers.items())), body)


def _ours(frame: Frame) -> Seen:
    return Seen(frame.command, tuple(sorted(frame.header_map.items())), frame.body,
                tuple(frame.headers))


def read_ours(data: bytes, version: Version) -> Reading:
    """Our strict parser; headers first-wins (`Frame.header_map`)."""
    parser = Parser(version=version)
    try:
        events = parser.feed(data)
    except StompError as error:
        frames = [e for e in getattr(error, "events", []) if isinstance(e, Frame)]
        return Reading(tuple(_ours(f) for f in frames),
                       f"{type(error).__name__}: {error.message}", statement=error.statement,
                       limit=isinstance(error, LimitExceeded),
                       spans=tuple((f.offset, f.size) for f in frames), offset=error.offset)
    frames = [e for e in events if isinstance(e, Frame)]
    return Reading(tuple(_ours(f) for f in frames), pending=parser.buffered > 0,
                   spans=tuple((f.offset, f.size) for f in frames))


_stomppy: dict[str, Any] = {}


def read_stomppy(data: bytes) -> Reading:
    """stomp.py's transport splitting and `parse_frame`; headers first-wins (its dict)."""
    if not _stomppy:
        import stomp.transport
        import stomp.utils

        _stomppy.update(transport=stomp.transport.BaseTransport,
                        parse_frame=stomp.utils.parse_frame)
    transport = _stomppy["transport"]()
    transport.running = True
    transport.blocking = False  # an empty receive ends the read instead of raising
    chunks = [data]
    transport.receive = lambda: chunks.pop() if chunks else b""
    frames: list[Seen] = []
    try:
        for raw in transport._BaseTransport__read():
            if raw == b"\n":  # __read_frames takes a lone EOL for a heart-beat
                continue
            frame = _stomppy["parse_frame"](raw)
            if frame is not None:  # a frame of nothing but EOLs
                frames.append(_seen(frame.cmd, frame.headers, frame.body))
    except Exception as error:  # noqa: BLE001 - any exception is its answer
        return Reading(tuple(frames), f"{type(error).__name__}: {error}")
    return Reading(tuple(frames), pending=bool(transport._BaseTransport__recvbuf))


_stompest: dict[str, Any] = {}


def read_stompest(data: bytes, version: Version) -> Reading:
    """stompest's StompParser; headers first-wins (its `headers` property)."""
    if not _stompest:
        from stompest.protocol.frame import StompHeartBeat
        from stompest.protocol.parser import StompParser

        _stompest.update(parser=StompParser, heartbeat=StompHeartBeat)
    parser = _stompest["parser"](version)
    error: str | None = None
    try:
        parser.add(data)
    except Exception as problem:  # noqa: BLE001 - any exception is its answer
        error = f"{type(problem).__name__}: {problem}"
    frames = []
    while parser.canRead():
        frame = parser.get()
        if not isinstance(frame, _stompest["heartbeat"]):
            frames.append(_seen(frame.command, frame.headers, frame.body))
    pending = error is None and (bool(parser._data) or parser._frame is not None)
    return Reading(tuple(frames), error, pending=pending)
