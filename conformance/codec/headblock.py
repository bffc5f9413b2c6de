"""Judging a STOMP header block: what the parser (parser.py) records or raises about a
command line and header lines (UTF-8, grammar, escapes), whole or, strict, as they arrive.

`HeadJudge` holds the parser's state these judgements read; `Parser` subclasses it and is
the only one that sets it."""

from __future__ import annotations

from itertools import accumulate, count
from operator import add

from conformance.codec.commandline import command_fault
from conformance.codec.errors import (
    EncodingError,
    EscapeError,
    FrameTooLarge,
    FramingError,
    HeaderCountExceeded,
    HeaderLineTooLong,
    ProtocolViolation,
)
from conformance.codec.escaping import UNDEFINED_ESCAPE, try_unescape
from conformance.codec.events import Violation
from conformance.spec import statement_id
from conformance.spec.grammar import UNESCAPED_COMMANDS, Version


class HeadJudge:
    """The judgements of a header block, and the parser state they read (set by Parser)."""

    strict: bool
    content_length: bool
    _version: Version
    _crlf: bool
    _escaping: bool
    _command_lines: frozenset[bytes]
    _buf: bytearray
    _base: int
    _counted: int
    _lines: int
    _line_start: int
    _max_frame: int
    _max_line: int
    _max_headers: int

    def _violate(self, found: list[Violation], kind: type[ProtocolViolation], rule: str,
                 message: str, at: int, args: tuple[object, ...] = ()) -> None:
        """Strict: raise `kind`. Observing: record it, formatting `message` with `args` later."""
        statement = statement_id(rule, self._version)
        if self.strict:
            raise kind(message.format(*args) if args else message, statement=statement,
                       offset=self._base + at)
        found.append(Violation(statement, message, self._base + at, args))

    def _slow_headers(self, lines: list[str], block: bytearray, pos: int, escaping: bool,
                      violations: list[Violation], utf8_line: int, bad_utf8: int
                      ) -> tuple[list[tuple[str, str]], str | None]:
        """Header lines holding a backslash, a CR, invalid UTF-8 or a malformed line (lines[1:],
        the CR of a CR LF removed; block = buf[pos:...]): check them and decode their escapes.
        The first invalid UTF-8, at `bad_utf8` in line `utf8_line`, comes before that line's
        other violations."""
        starts = _line_starts(block, pos)
        headers = []
        length = None
        if utf8_line == 0:  # in the command line, after what the command's judge recorded
            self._bad_utf8(violations, bad_utf8, False)
        for index in range(1, len(lines)):
            if index == utf8_line:
                self._bad_utf8(violations, bad_utf8, True)
            line = lines[index]
            name, colon, value = line.partition(":")
            if self._crlf and "\r" in line:
                self._violate(violations, FramingError, "frames.header-grammar",
                              "CR inside a header line", starts[index])
            if not colon or not name or (escaping and ":" in value):
                self._violate(violations, FramingError, "frames.header-grammar",
                              "unescaped ':' in the value of header {!r}" if colon and name
                              else "header line {!r} is not name:value", starts[index],
                              (name,) if colon and name else (line[:40],))
            if escaping and "\\" in line:
                # An undefined escape leaves its text as sent (and the value, after a name).
                at = starts[index]
                value_at = at + len(name.encode()) + 1  # after the name as sent, and ':'
                name, undefined = try_unescape(name, self._version)
                if undefined is None:
                    at = value_at
                    value, undefined = try_unescape(value, self._version)
                if undefined is not None:
                    self._violate(violations, EscapeError,
                                  "value-encoding.undefined-escape-fatal", UNDEFINED_ESCAPE,
                                  at + undefined[0], (undefined[1], self._version))
            if name == "content-length" and length is None and self.content_length:
                length = value
            headers.append((name, value))
        return headers, length

    def _judge_command(self, violations: list[Violation], pos: int, stop: int, complete: bool,
                       shown: str | None = None) -> int:
        """Record (strict: raise) where the command line buf[pos:stop] breaks, if it does (see
        commandline.command_fault): invalid UTF-8 there first, then the unknown command."""
        at, invalid = command_fault(self._buf, pos, stop, self._crlf, complete)
        if at >= 0:
            if invalid:
                self._bad_utf8(violations, at, False)
            if shown is None:
                shown = self._buf[pos:at + 1].decode("utf-8", "replace")
            self._violate(violations, FramingError, "frames.command-grammar",
                          "unknown command {!r}", at, (shown[:40],))
        return at

    def _bad_utf8(self, violations: list[Violation], at: int, header: bool) -> None:
        # 1.0 names no encoding; its grammar allows US-ASCII CHARs, which these are not.
        rule = ("value-encoding.utf8" if self._version != "1.0" else
                "frames.header-grammar" if header else "frames.command-grammar")
        self._violate(violations, EncodingError, rule, "command or header is not valid UTF-8",
                      at)

    def _check_partial_head(self, pos: int, n: int) -> None:
        """Bound an unfinished header block: its open line and its count of lines; strict,
        judge what arrived of it."""
        buf = self._buf
        counted = max(self._counted, pos)
        if counted == pos:
            self._lines, self._line_start = 0, pos
        opened = self._line_start  # the first line that was not complete
        last = buf.rfind(b"\n", counted, n)
        if last >= 0:
            self._lines += buf.count(b"\n", counted, n)
            self._line_start = last + 1
        self._counted = n
        if n - self._line_start > self._max_line:
            raise HeaderLineTooLong(f"header line longer than the limit of "
                                    f"{self._max_line} octets and not ended",
                                    offset=self._base + self._line_start)
        if self._lines - 1 > self._max_headers:  # the command line's LF is no header
            raise HeaderCountExceeded(f"more than {self._max_headers} headers",
                                      offset=self._base + pos)
        if n - pos > self._max_frame:  # many lines, each within its limit
            raise FrameTooLarge(f"header block longer than the frame limit of "
                                f"{self._max_frame} octets and not ended",
                                offset=self._base + pos)
        if self.strict:
            self._fail_early(pos, opened, n)

    def _fail_early(self, pos: int, opened: int, n: int) -> None:
        """Raise now for what no more input can mend: a command line no command begins as
        it does, a complete header line that breaks a rule. Lines before `opened` passed at
        an earlier read; a whole block gets the same checks, in the same order."""
        buf = self._buf
        ignored: list[Violation] = []  # strict: the first violation raises
        if opened == pos:  # the command line was open
            lf = buf.find(b"\n", pos, n)
            if lf < 0 or bytes(buf[pos:lf]) not in self._command_lines:
                self._judge_command(ignored, pos, n if lf < 0 else lf, lf >= 0)
                if lf < 0:
                    return
            opened = lf + 1
        done = self._line_start
        if opened >= done:
            return
        command = buf[pos:buf.find(b"\n", pos)].decode()  # a command line: ASCII
        escaping = (self._escaping
                    and command.removesuffix("\r") not in UNESCAPED_COMMANDS)
        # From the LF before them: line 0 is empty, where a block's command line is skipped.
        block = buf[opened - 1:done - 1]
        utf8_line = bad_utf8 = -1
        try:
            text = block.decode("utf-8")
        except UnicodeDecodeError as error:
            utf8_line, bad_utf8 = block.count(b"\n", 0, error.start), opened - 1 + error.start
            text = block.decode("utf-8", "replace")
        lines = text.split("\n")
        if utf8_line < 0 and not (escaping and "\\" in text) and "\r" not in text:
            for line in lines[1:]:  # the fast path of _read_head
                name, colon, value = line.partition(":")
                if not colon or not name or (escaping and ":" in value):
                    break
            else:
                return
        if self._crlf and "\r" in text:
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        self._slow_headers(lines, block, opened - 1, escaping, ignored, utf8_line, bad_utf8)


def _line_starts(block: bytearray, at: int) -> list[int]:
    """Buffer indexes of the lines of a header block that starts at index `at` (and one past
    its end): `at`, plus the lengths of the lines before and the LF after each."""
    return list(map(add, accumulate(map(len, block.split(b"\n")), initial=at), count()))
