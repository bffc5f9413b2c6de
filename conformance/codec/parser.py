"""The incremental STOMP parser: bytes in, Frame and Heartbeat events out. Sans-IO.

Invariant: for any split of the same byte stream into `feed` calls, the parser yields the
same events (same frames, same offsets) and raises the same error at the same offset.

Memory is bounded by `Limits` whatever the peer sends: a header line, a header block and a
body are each checked while they arrive, and a declared content-length is checked before
a single body octet is buffered. The buffer never holds more than one frame plus one read.

Two modes. Strict: the first broken statement raises a ProtocolViolation naming it, as
soon as the octets received break it for good (a command line no command begins so, a
complete header line), not at the end of the line or header block. Observing
(strict=False): broken statements are recorded on the Frame's `violations` and parsing
goes on, because the suite must both reject bad frames and report all of them. Both judge
a head in the order it arrives (the command line octet by octet, then each header line:
UTF-8, grammar, escapes), so the first violation recorded is the error raised. Limits
raise in both modes: they protect this process, they are not the peer's grade.

Leniencies, each on purpose (the differential fuzzer, fuzz/differential.py, reports where a
stricter peer parser takes the letter of the spec instead):
- A CR LF between frames is an EOL in every version (see `_parse`).
- STOMP 1.0's grammar allows US-ASCII CHARs in commands and headers; they are read as UTF-8,
  as 1.1 and brokers in the field write them. Octets that are not UTF-8 either break the
  1.0 grammar (frames.header-grammar-v10, frames.command-grammar-v10).
- Commands are those of every version: NACK and STOMP, which 1.0 lacks, are left to the
  session, which knows what was negotiated.
- A STOMP 1.0 content-length padded with spaces (" 5", "5 ") is read as its digits, and
  the frame's `notes` say so: 1.0 does not forbid padding and peers of its time padded
  headers. 1.1 and 1.2 forbid it ("MUST never trim or pad").
"""

from __future__ import annotations

from conformance.codec.commandline import COMMAND_LINES
from conformance.codec.errors import (
    BodyNotAllowed,
    BodyTooLarge,
    ContentLengthError,
    FrameTooLarge,
    FramingError,
    HeaderCountExceeded,
    HeaderLineTooLong,
    StompError,
)
from conformance.codec.events import Event, Frame, Heartbeat, Violation
from conformance.codec.headblock import HeadJudge
from conformance.codec.limits import Limits
from conformance.spec import statement_id
from conformance.spec.grammar import (
    BODY_COMMANDS,
    COMMANDS,
    CRLF_EOL,
    ESCAPES,
    UNESCAPED_COMMANDS,
    VERSIONS,
    Version,
)

_DEFAULT_LIMITS = Limits()  # of a parser given none (frozen: one for all)


class _Head:
    """A frame whose command and headers are parsed and whose body is still arriving."""

    __slots__ = ("command", "headers", "violations", "notes", "start", "body_start", "length")

    def __init__(self, command: str, headers: list[tuple[str, str]], violations: list[Violation],
                 notes: tuple[str, ...], start: int, body_start: int,
                 length: int | None) -> None:
        self.command = command
        self.headers = headers
        self.violations = violations
        self.notes = notes
        self.start = start
        self.body_start = body_start
        self.length = length


def _owned(chunk: bytes | bytearray | memoryview) -> bytes:
    """`chunk` as bytes of its own: a bytearray or a memoryview's buffer may be reused by
    the caller."""
    return chunk if type(chunk) is bytes else bytes(chunk)


class Parser(HeadJudge):
    """Feed bytes in any chunking with `feed`; call `eof` when the peer closes."""

    def __init__(self, *, version: Version = "1.2", strict: bool = True,
                 limits: Limits | None = None, content_length: bool = True) -> None:
        self.strict = strict
        #: False reads every body up to its first NUL, as a peer that ignores content-length
        #: would: the reference broker's `ignore-content-length` fault.
        self.content_length = content_length
        self.limits = limits or _DEFAULT_LIMITS
        limits = self.limits  # read on every frame: kept as plain ints
        self._max_frame, self._max_body = limits.max_frame, limits.max_body
        self._max_line, self._max_headers = limits.max_header_line, limits.max_headers
        self.version = version
        self._buf = bytearray()
        self._pos = 0          # start of the unparsed part of _buf
        self._base = 0         # stream offset of _buf[0]
        self._scan = 0         # where the next search for a terminator resumes
        self._counted = 0      # partial header block: bytes already counted for limits
        self._lines = 0        # partial header block: LFs seen so far
        self._line_start = 0   # partial header block: start of its unfinished line
        self._head: _Head | None = None
        self._need = 0         # buffer length below which nothing new can complete
        # The reads of a body that is still arriving, kept as they came after _buf: a body
        # is joined once, when its end is here, not copied into _buf at each read. Of a
        # body of known length they are counted by `_short`, the octets it still lacks
        # (with _need: see _held); of one up to a NUL, by `_parked`.
        self._parts: list[bytes] = []
        self._parked = 0
        self._short = 0
        # While a header block or a body of unknown length is unfinished, nothing completes
        # without the octet `_wait` (the LF of an EOL, the NUL), and no limit is reached
        # while the buffer is at most `_room` long: a read that brings neither is only kept.
        self._wait = b""
        self._room = -1
        self._error: StompError | None = None

    @property
    def version(self) -> Version:
        """The negotiated version: it decides escaping, EOLs and the body rule. A client
        sets it once CONNECTED arrives; CONNECT and CONNECTED are never escaped anyway."""
        return self._version

    @version.setter
    def version(self, version: Version) -> None:
        if version not in VERSIONS:
            raise ValueError(f"version must be one of {', '.join(VERSIONS)}, not {version!r}")
        self._version = version
        self._crlf = CRLF_EOL[version]
        self._escaping = ESCAPES[version] is not None
        self._command_lines = COMMAND_LINES[self._crlf]

    @property
    def offset(self) -> int:
        """Stream offset of the first byte not yet consumed into an event."""
        return self._base + self._pos

    @property
    def buffered(self) -> int:
        """Bytes held for an unfinished frame."""
        return self._held() - self._pos

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[Event]:
        """Add bytes from the peer; return the events they complete. On a broken rule
        (strict) or a limit, raise; the error's `events` holds what came before it, and
        the parser stays failed."""
        short = self._short - len(chunk)
        if short > 0:  # a body of known length, short of its end: the read is kept aside
            self._short = short
            # a caller may reuse a bytearray's or a memoryview's buffer (_owned, inline: the
            # one line run for each read of a big body)
            self._parts.append(chunk if type(chunk) is bytes else bytes(chunk))
            return []
        if self._error is not None:
            raise self._error
        data = _owned(chunk)  # searched below (`in` a memoryview compares ints)
        head = self._head
        if head is None:
            self._buf += data
            if len(self._buf) <= self._room and self._wait not in data:
                return []  # no octet awaited
        elif not self._need and (len(self._buf) + self._parked + len(data) <= self._room
                                 and b"\x00" not in data):
            self._parked += len(data)  # a body up to its NUL, no limit reached: kept aside
            self._parts.append(data)
            return []
        out: list[Event] = []
        try:
            if head is not None:
                self._end_body(head, data, out)
            self._parse(out)
        except StompError as error:
            error.events = out  # type: ignore[attr-defined]
            self._error = error
            self._parked = self._held() - len(self._buf)
            self._short = self._need = 0  # feed raises from now on
            raise
        pos = self._pos
        if pos:
            del self._buf[:pos]
            self._base += pos
            self._pos = 0
            self._scan = max(self._scan - pos, 0)
            self._counted = max(self._counted - pos, 0)
            self._line_start = max(self._line_start - pos, 0)
            self._need = max(self._need - pos, 0)
            self._room -= pos
            if self._head is not None:
                self._head.start -= pos
                self._head.body_start -= pos
        self._short = self._need - len(self._buf)
        return out

    def eof(self) -> None:
        """The peer closed. Raise FramingError if it closed in the middle of a frame."""
        if self._error is None and (self._head is not None or self._pos < len(self._buf)):
            self._error = FramingError(
                "connection closed in the middle of a frame",
                statement=statement_id("frames.nul-terminated", self._version),
                offset=self._base + self._held(),
            )
            self._error.events = []  # type: ignore[attr-defined]
            raise self._error

    # -- internals ------------------------------------------------------------------------

    def _held(self) -> int:
        """Octets held: _buf and the reads parked after it."""
        return self._need - self._short if self._need else len(self._buf) + self._parked

    def _end_body(self, head: _Head, data: bytes, out: list[Event]) -> None:
        """The read `data` may end `head`'s body, whose earlier reads are parked: if it ends
        it cleanly, emit the frame, its body joined in one copy, and keep only what follows
        it in _buf. Anything else (an octet where content-length puts the NUL, a limit) is
        left to _parse, the parked reads put back in _buf first."""
        buf = self._buf
        if head.length is not None:  # its NUL is due at _need - 1: data[_short - 1]
            at = self._short - 1
            stop = self._need - 1
            clean = data[at] == 0
        else:
            at = data.find(b"\x00")
            stop = len(buf) + self._parked + at
            clean = at >= 0 and stop - at + len(data) <= self._room
        if not clean:
            for part in self._parts:
                buf += part
            buf += data
            self._parts, self._parked = [], 0
            return
        # The view pins this _buf's size: it is replaced below, never resized.
        body = b"".join([memoryview(buf)[head.body_start:], *self._parts,
                         memoryview(data)[:at]])
        out.append(self._frame(head.command, head.headers, head.violations, head.notes,
                               head.start, head.body_start, stop, body))
        self._base += stop + 1
        self._buf = bytearray(memoryview(data)[at + 1:])
        self._pos = self._scan = self._counted = self._line_start = self._need = 0
        self._head = None
        self._parts, self._parked = [], 0

    def _parse(self, out: list[Event]) -> None:
        buf = self._buf
        n = len(buf)
        pos = self._pos
        self._room = -1
        while True:
            head = self._head
            if head is None:
                # Between frames every EOL is a heart-beat ("*( EOL )" after the NUL too).
                while pos < n:
                    octet = buf[pos]
                    if octet == 10:
                        out.append(Heartbeat(self._base + pos, b"\n"))
                        pos += 1
                    elif octet == 13 and pos + 1 < n and buf[pos + 1] == 10:
                        # Leniency: CR LF between frames is taken as an EOL in every
                        # version; it holds no frame content to misread.
                        out.append(Heartbeat(self._base + pos, b"\r\n"))
                        pos += 2
                    else:
                        break
                self._pos = pos
                if pos >= n - 1 and (pos >= n or buf[pos] == 13):  # nothing, or a CR alone
                    self._scan = pos
                    return
                parsed = self._read_head(pos, n)
                if parsed is None:  # the limits _check_partial_head applies, until an LF
                    self._wait = b"\n"
                    # Strict, an open command line is judged at every octet (_fail_early).
                    self._room = -1 if self.strict and self._line_start == pos else min(
                        self._line_start + self._max_line, pos + self._max_frame)
                    return
                if isinstance(parsed, Frame):  # the whole frame was there: the fast path
                    out.append(parsed)
                    pos = self._pos = self._scan = pos + parsed.size
                    continue
                head = self._head = parsed
            stop = self._read_body(head, n)
            if stop < 0:
                if head.length is None:  # the limits _read_body applies, until a NUL
                    self._wait = b"\x00"
                    self._room = min(head.body_start + self._max_body,
                                     head.start + self._max_frame)
                return
            out.append(self._frame(head.command, head.headers, head.violations, head.notes,
                                   head.start, head.body_start, stop))
            pos = self._pos = self._scan = stop + 1
            self._head = None

    def _frame(self, command: str, headers: list[tuple[str, str]], violations: list[Violation],
               notes: tuple[str, ...], start: int, body_start: int, stop: int,
               body: bytes | None = None) -> Frame:
        """The Frame whose octets are buf[start:stop + 1], its NUL at `stop`; its body
        `body` when given (joined from parked reads)."""
        if stop - body_start > self._max_body:  # read up to its NUL, all in one go
            raise BodyTooLarge(f"body of {stop - body_start} octets exceeds the limit of "
                               f"{self._max_body}", offset=self._base + body_start)
        if stop + 1 - start > self._max_frame:
            raise FrameTooLarge(f"frame of {stop + 1 - start} octets exceeds the limit of "
                                f"{self._max_frame}", offset=self._base + start)
        if body is None:  # a slice of a big body through a memoryview saves one copy of it
            body = bytes(self._buf[body_start:stop] if stop - body_start < 4096
                         else memoryview(self._buf)[body_start:stop])
        if body and command not in BODY_COMMANDS and self._version != "1.0":
            self._violate(violations, BodyNotAllowed, "body.forbidden-frames",
                          "a {} frame must not have a body ({} octets)", body_start,
                          (command, len(body)))
        return Frame(command, tuple(headers), body, violations=violations, notes=notes,
                     offset=self._base + start, size=stop + 1 - start)

    def _read_head(self, pos: int, n: int) -> Frame | _Head | None:
        """Parse the frame starting at `pos`: the Frame if it is all there, else the parsed
        head awaiting its body, or None while the head itself is incomplete."""
        buf = self._buf
        scan = self._scan if self._scan > pos else pos
        end = buf.find(b"\n\n", scan)
        skip = 2
        if self._crlf:
            crlf_end = buf.find(b"\n\r\n", scan, end + 1 if end >= 0 else n)
            if crlf_end >= 0:
                end, skip = crlf_end, 3
        if end < 0:
            self._check_partial_head(pos, n)
            self._scan = max(pos, n - 2)
            return None
        self._counted = self._lines = 0
        block = buf[pos:end]
        if end - pos > self._max_line:
            for raw in block.split(b"\n"):
                if len(raw) > self._max_line:
                    raise HeaderLineTooLong(
                        f"header line of {len(raw)} octets exceeds the limit of "
                        f"{self._max_line}", offset=self._base + pos)
        violations: list[Violation] = []
        bad_utf8 = utf8_line = -1
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError as error:
            # Recorded with the line that holds it, below: in the order of _fail_early.
            bad_utf8 = pos + error.start
            utf8_line = block.count(b"\n", 0, error.start)
            text = block.decode("utf-8", "replace")
        lines = text.split("\n")
        if len(lines) - 1 > self._max_headers:
            raise HeaderCountExceeded(f"{len(lines) - 1} headers exceed the limit of "
                                      f"{self._max_headers}", offset=self._base + pos)
        cr = self._crlf and "\r" in text
        if cr:
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        command = lines[0]
        if command not in COMMANDS and self._judge_command(
                violations, pos, buf.find(b"\n", pos, end + 1), True, command) == bad_utf8:
            utf8_line = -1  # recorded there, as the octet that broke the command line
        escaping = self._escaping and command not in UNESCAPED_COMMANDS
        if (escaping and "\\" in text) or cr or utf8_line >= 0:
            headers, length = self._slow_headers(lines, block, pos, escaping, violations,
                                                 utf8_line, bad_utf8)
        else:
            headers = []
            length = None
            for line in lines[1:]:
                name, colon, value = line.partition(":")
                if not colon or not name or (escaping and ":" in value):
                    # a malformed line: read the block again where each line's offset is known
                    headers, length = self._slow_headers(lines, block, pos, escaping,
                                                         violations, utf8_line, bad_utf8)
                    break
                if name == "content-length" and length is None and self.content_length:
                    length = value
                headers.append((name, value))
        body_start = end + skip
        size: int | None = None
        notes: tuple[str, ...] = ()
        if length is not None and not (length.isdigit() and length.isascii()):
            # grammar.CONTENT_LENGTH; STOMP 1.0 headers were often padded (see the top)
            digits = length.strip(" ") if self._version == "1.0" else ""
            if digits.isdigit() and digits.isascii():
                notes = (f"STOMP 1.0 content-length {length[:40]!r} padded with spaces: "
                         f"read as {digits[:40]}",)
                length = digits
            else:
                self._violate(violations, ContentLengthError, "content-length.read-octets",
                              "content-length {!r} is not an octet count", body_start,
                              (length[:40],))
                length = None
        if length is not None:
            if len(length) > 18:  # int() raises ValueError past 4,300 digits
                length = length.lstrip("0") or "0"
                if len(length) > len(str(self._max_body)):
                    raise BodyTooLarge(f"content-length of {len(length)} digits exceeds "
                                       f"the body limit of {self._max_body}",
                                       offset=self._base + pos)
            size = int(length)
            if size > self._max_body:
                raise BodyTooLarge(f"content-length {size} exceeds the body limit of "
                                   f"{self._max_body}", offset=self._base + pos)
            stop = body_start + size
            if stop < n and buf[stop] == 0:
                return self._frame(command, headers, violations, notes, pos, body_start, stop)
        return _Head(command, headers, violations, notes, pos, body_start, size)

    def _read_body(self, head: _Head, n: int) -> int:
        """The index of the NUL that ends `head`'s body, or -1 while it is incomplete."""
        buf = self._buf
        if head.length is not None:
            stop = head.body_start + head.length
            if stop >= n:
                if stop + 1 - head.start > self._max_frame:
                    self._check_frame(head, stop + 1)
                self._need = stop + 1
                return -1
            self._need = 0
            if buf[stop] == 0:
                return stop
            self._violate(head.violations, ContentLengthError, "content-length.nul-terminated",
                          "octet 0x{:02x} where the NUL must follow the {} octets of "
                          "content-length", stop, (buf[stop], head.length))
            # Observing: take the body up to the next NUL, as without content-length.
            head.length = None
            self._scan = stop
        nul = buf.find(b"\x00", max(self._scan, head.body_start))
        if nul < 0:
            self._scan = n
            if n - head.body_start > self._max_body:
                raise BodyTooLarge(f"body longer than the limit of {self._max_body} "
                                   "octets and no NUL", offset=self._base + head.body_start)
            self._check_frame(head, n)
        return nul

    def _check_frame(self, head: _Head, end: int) -> None:
        if end - head.start > self._max_frame:
            raise FrameTooLarge(f"frame larger than the limit of {self._max_frame} octets",
                                offset=self._base + head.start)
