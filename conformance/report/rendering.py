"""Transcripts as text a person can read: one entry per Record, every octet visible.

A NUL shows as `^@`, LF as `\\n` followed by a real line break, CR as `\\r`, a backslash as
`\\\\`, and any other control character, invisible format character or octet that is not
UTF-8 as `\\xHH` (one per octet). The result holds no character XML or a terminal would
swallow, so every report can embed it as is.

`pieces` gives the same octets to a page as runs of text and marks (see GLYPHS)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from conformance.wire.transcript import Record

#: Unicode categories shown as octets: controls, format (zero-width, bidi overrides),
#: surrogates, private use, unassigned (XML's non-characters among them), line separators.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_NAMED = {"\x00": "^@", "\r": "\\r", "\\": "\\\\"}


def _octets(ch: str) -> str | None:
    """`\\xHH` per octet for a character a reader would not see, None for any other."""
    if "\udc80" <= ch <= "\udcff":  # an octet that was not UTF-8 (surrogateescape)
        return f"\\x{ord(ch) - 0xDC00:02x}"
    if unicodedata.category(ch) in _HIDDEN:
        return "".join(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
    return None


def _escape(text: str, *, newline: str) -> str:
    out: list[str] = []
    for ch in text:
        if ch == "\n":
            out.append(newline)
        elif ch in _NAMED:
            out.append(_NAMED[ch])
        else:
            out.append(_octets(ch) or ch)
    return "".join(out)


#: A page's marks for NUL, CR and LF. A page styles marks apart from text, so a backslash
#: stays itself there and an escape the broker sent (`\\n` in a header) reads as sent.
#: Caret notation rather than the Control Pictures (U+2400...), which few fonts have.
GLYPHS = {"\x00": "^@", "\r": "^M", "\n": "\u21b5"}


def pieces(data: bytes) -> list[tuple[str, bool]]:
    """Octets as (text, is_mark) runs: text as it is, a mark for NUL (`^@`), CR (`^M`), LF
    (`\u21b5`, then a line break unless it ends the data) and each hidden octet (`\\xHH`)."""
    out: list[tuple[str, bool]] = []
    run: list[str] = []
    text = data.decode("utf-8", "surrogateescape")
    for i, ch in enumerate(text):
        mark = GLYPHS.get(ch) or _octets(ch)
        if mark is None:
            run.append(ch)
            continue
        if run:
            out.append(("".join(run), False))
        out.append((mark, True))
        run = ["\n"] if ch == "\n" and i < len(text) - 1 else []
    if run:
        out.append(("".join(run), False))
    return out


def render_bytes(data: bytes, *, indent: str = "") -> str:
    """Octets as text; each LF is `\\n`, then a line break and `indent` unless it ends the
    data (a trailing break would read as an empty line that was never sent)."""
    text = _escape(data.decode("utf-8", "surrogateescape"), newline="\\n\n" + indent)
    return text.removesuffix("\n" + indent) if data.endswith(b"\n") else text


def escape_text(text: str) -> str:
    """A message or note with hidden characters made visible; line breaks are kept."""
    return _escape(text, newline="\n")


def show_hidden(text: str) -> str:
    """A message for a page: hidden characters as `\\xHH`, line breaks and backslashes as
    they are (a page has no escapes of its own to tell apart)."""
    return "".join(ch if ch == "\n" else _octets(ch) or ch for ch in text)


def render_record(record: Record) -> str:
    """`+0.001234 out main  SEND\\n` and so on; lines after the first are indented to the
    payload so that each record stays one block."""
    prefix = f"+{record.t:.6f} {record.direction} {record.conn}  "
    indent = " " * len(prefix)
    if record.data:
        body = render_bytes(record.data, indent=indent)
        if record.note:
            body += f"  ({escape_text(record.note)})"
    else:
        body = escape_text(record.note).replace("\n", "\n" + indent)
    return prefix + body


def render_transcript(records: Iterable[Record]) -> str:
    return "\n".join(render_record(r) for r in records)
