"""What the parser yields: frames and heart-beats, each with its place in the stream."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Violation:
    """A broken statement recorded by an observing parser or by the validator."""

    statement: str
    message: str
    offset: int | None = None

    def __str__(self) -> str:
        where = f" at byte {self.offset}" if self.offset is not None else ""
        return f"{self.message}{where} [{self.statement}]"


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """An EOL between frames: a heart-beat, or the optional EOLs after a frame's NUL."""

    offset: int = -1
    eol: bytes = b"\n"


class Frame:
    """A STOMP frame. `headers` keeps every entry in wire order, repeats included;
    `get` and `header_map` apply the first-wins rule of repeated headers."""

    __slots__ = ("command", "headers", "body", "violations", "notes", "offset", "size")

    def __init__(
        self,
        command: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        body: bytes = b"",
        *,
        violations: list[Violation] | None = None,
        notes: tuple[str, ...] = (),
        offset: int = -1,
        size: int = -1,
    ) -> None:
        self.command = command
        self.headers: list[tuple[str, str]] = list(
            headers if type(headers) is list  # the common case, without an ABC check
            else headers.items() if isinstance(headers, Mapping) else headers
        )
        self.body = body
        #: Statements broken by this frame (an observing parser and the validator add here).
        self.violations: list[Violation] = violations if violations is not None else []
        #: What the parser read leniently and says so, without grading it (a padded STOMP
        #: 1.0 content-length): observations, not violations.
        self.notes = notes
        #: Byte offset of the frame's first octet in the stream, and its size on the wire.
        self.offset = offset
        self.size = size

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value of the first entry named `name` ("only the first header entry SHOULD
        be used as the value")."""
        for key, value in self.headers:
            if key == name:
                return value
        return default

    def __contains__(self, name: object) -> bool:
        for key, _ in self.headers:
            if key == name:
                return True
        return False

    @property
    def header_map(self) -> dict[str, str]:
        """Header name -> value, first entry wins."""
        out: dict[str, str] = {}
        for key, value in self.headers:
            out.setdefault(key, value)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Frame):
            return NotImplemented
        return (self.command, self.headers, self.body) == (other.command, other.headers, other.body)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        body = self.body if len(self.body) <= 40 else self.body[:40] + b"..."
        return f"Frame({self.command!r}, {self.headers!r}, {body!r})"


Event = Frame | Heartbeat
