"""What the parser yields: frames and heart-beats, each with its place in the stream."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final


class Violation:
    """A broken statement recorded by an observing parser or by the validator.

    The message is formatted when it is read (`message`, `str`, `repr`): an observing
    parser records every violation of every frame, and most are only counted or graded by
    statement. `Violation(statement, template, offset, args)` keeps `template` and `args`
    for `template.format(*args)`; with no `args` the message is `template` as it is."""

    __slots__ = ("statement", "offset", "_text", "_args")

    def __init__(self, statement: str, message: str, offset: int | None = None,
                 args: tuple[object, ...] = ()) -> None:
        self.statement = statement
        self.offset = offset
        self._text = message
        self._args = args

    @property
    def message(self) -> str:
        if self._args:
            self._text, self._args = self._text.format(*self._args), ()
        return self._text

    def __str__(self) -> str:
        where = f" at byte {self.offset}" if self.offset is not None else ""
        return f"{self.message}{where} [{self.statement}]"

    def __repr__(self) -> str:
        return (f"Violation(statement={self.statement!r}, message={self.message!r}, "
                f"offset={self.offset!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Violation):
            return NotImplemented
        return ((self.statement, self.offset, self.message)
                == (other.statement, other.offset, other.message))

    def __hash__(self) -> int:
        return hash((self.statement, self.offset, self.message))


class Heartbeat:
    """An EOL between frames: a heart-beat, or the optional EOLs after a frame's NUL."""

    __slots__ = ("offset", "eol")

    def __init__(self, offset: int = -1, eol: bytes = b"\n") -> None:
        self.offset = offset
        self.eol = eol

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Heartbeat):
            return NotImplemented
        return (self.offset, self.eol) == (other.offset, other.eol)

    def __hash__(self) -> int:
        return hash((self.offset, self.eol))

    def __repr__(self) -> str:
        return f"Heartbeat(offset={self.offset!r}, eol={self.eol!r})"


class Frame:
    """A STOMP frame, immutable: `replace` makes a changed copy. `headers` keeps every entry
    in wire order, repeats included; `get` and `header_map` apply the first-wins rule of
    repeated headers."""

    __slots__ = ("command", "headers", "body", "violations", "notes", "offset", "size")

    def __init__(
        self,
        command: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        body: bytes = b"",
        *,
        violations: Iterable[Violation] = (),
        notes: tuple[str, ...] = (),
        offset: int = -1,
        size: int = -1,
    ) -> None:
        # Final: mypy refuses an assignment anywhere after this, and the compiled build
        # (mypyc) at run time as well.
        self.command: Final = command
        self.headers: Final[tuple[tuple[str, str], ...]] = (
            headers if type(headers) is tuple  # the parser's, without an ABC check
            else tuple(headers.items() if isinstance(headers, Mapping) else headers))
        self.body: Final = body
        #: Statements broken by this frame, as an observing parser read it.
        self.violations: Final[tuple[Violation, ...]] = tuple(violations)
        #: What the parser read leniently and says so, without grading it (a padded STOMP
        #: 1.0 content-length): observations, not violations.
        self.notes: Final = notes
        #: Byte offset of the frame's first octet in the stream, and its size on the wire.
        self.offset: Final = offset
        self.size: Final = size

    def replace(self, *, command: str | None = None,
                headers: Iterable[tuple[str, str]] | None = None,
                body: bytes | None = None) -> Frame:
        """A copy with another command, headers or body (violations, notes and place
        kept)."""
        return Frame(self.command if command is None else command,
                     self.headers if headers is None else headers,
                     self.body if body is None else body, violations=self.violations,
                     notes=self.notes, offset=self.offset, size=self.size)

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
