"""One exception family for everything the codec cannot accept.

`ProtocolViolation` and its subclasses mean the peer broke a statement of the spec (the
statement id is on the error); `LimitExceeded` means the peer went past a limit this side
set to keep memory bounded; `LocalProtocolError` means our own caller asked the encoder to
write something the spec forbids. Nothing else escapes the codec: no IndexError,
ValueError or UnicodeDecodeError.
"""

from __future__ import annotations


class StompError(Exception):
    """Base of the codec's errors: what was wrong, the statement broken, the byte offset."""

    def __init__(self, message: str, *, statement: str | None = None, offset: int | None = None):
        self.message = message
        self.statement = statement
        self.offset = offset
        where = f" at byte {offset}" if offset is not None else ""
        rule = f" [{statement}]" if statement else ""
        super().__init__(f"{message}{where}{rule}")


class ProtocolViolation(StompError):
    """The peer sent bytes that break a rule of the spec."""


class FramingError(ProtocolViolation):
    """A frame's structure is broken: a header line with no colon, a bad EOL, a missing NUL."""


class EscapeError(ProtocolViolation):
    """A header holds an escape sequence the negotiated version does not define."""


class EncodingError(ProtocolViolation):
    """A command or header is not valid UTF-8."""


class ContentLengthError(ProtocolViolation):
    """content-length is not an octet count, or the octet after the body is not NUL."""


class BodyNotAllowed(ProtocolViolation):
    """A frame other than SEND, MESSAGE or ERROR carries a body."""


class LimitExceeded(StompError):
    """The peer went past a limit of this side (header count, line, body or frame size)."""


class HeaderCountExceeded(LimitExceeded):
    pass


class HeaderLineTooLong(LimitExceeded):
    pass


class BodyTooLarge(LimitExceeded):
    pass


class FrameTooLarge(LimitExceeded):
    pass


class LocalProtocolError(StompError):
    """Our own caller asked for something the spec forbids (use `encode_raw` for that)."""
