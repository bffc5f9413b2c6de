"""A frame's command line as its octets arrive: where it stops being any command line of the
grammar, so that a strict parser can fail there without waiting for the line's EOL."""

from __future__ import annotations

import codecs
from typing import Final

from conformance.spec.grammar import COMMANDS


def _command_lines(crlf: bool) -> tuple[frozenset[bytes], frozenset[bytes]]:
    """The grammar's command lines (a command, and where a CR ends a line also a command
    then the CR of its CR LF), and every non-empty prefix of one."""
    lines = {command.encode() + cr for command in COMMANDS
             for cr in ((b"", b"\r") if crlf else (b"",))}
    return frozenset(lines), frozenset(line[:k] for line in lines for k in range(1, len(line) + 1))


#: By whether a CR ends a line (grammar.CRLF_EOL): the command lines, and their prefixes.
_LINES_AND_PREFIXES: Final = {crlf: _command_lines(crlf) for crlf in (False, True)}
#: By whether a CR ends a line: the command lines.
COMMAND_LINES: Final = {crlf: lines for crlf, (lines, _) in _LINES_AND_PREFIXES.items()}

#: Longer than any command line: the octets of a line past this many are never judged.
_LONGEST: Final = max(len(command) for command in COMMANDS) + 2


def command_fault(buf: bytes | bytearray, pos: int, stop: int, crlf: bool,
                  complete: bool) -> tuple[int, bool]:
    """Where the command line buf[pos:stop] breaks (`complete`: buf[stop] is its LF): the
    index of the first octet no command line has there (its LF if it ends too soon), and
    whether an invalid UTF-8 sequence starts at that octet (decoding finds it first). -1
    while the line can still be a command, or is one, or a character is cut by the end
    of `buf`."""
    whole, prefixes = _LINES_AND_PREFIXES[crlf]
    line = bytes(buf[pos:min(stop, pos + _LONGEST)])
    k = len(line) if line in prefixes else 0  # the common case: all of it is a prefix
    while k < len(line) and line[:k + 1] in prefixes:  # at most _LONGEST steps
        k += 1
    if k == len(line) and not (complete and line not in whole):
        return -1, False
    at = pos + k
    if buf[at] < 0x80:
        return at, False
    try:  # the next four octets, or fewer and the line's LF, decide a character
        return (at if codecs.utf_8_decode(bytes(buf[at:at + 4]), "strict", False)[1]
                else -1), False
    except UnicodeDecodeError as error:
        return at, error.start == 0
