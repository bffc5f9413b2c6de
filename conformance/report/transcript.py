"""Transcripts as text a person can read: one entry per Record, every octet visible.

A NUL shows as `^@`, LF as `\\n` followed by a real line break, CR as `\\r`, a backslash as
`\\\\`, and any other control character, invisible format character or octet that is not
UTF-8 as `\\xHH` (one per octet). The result holds no character XML or a terminal would
swallow, so every report can embed it as is."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from conformance.results import Record

#: Unicode categories shown as octets: controls, format (zero-width, bidi overrides),
#: surrogates, private use, unassigned (XML's non-characters among them), line separators.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_NAMED = {"\x00": "^@", "\r": "\\r", "\\": "\\\\"}


def _escape(text: str, *, newline: str) -> str:
    out: list[str] = []
    for ch in text:
        if ch == "\n":
            out.append(newline)
        elif ch in _NAMED:
            out.append(_NAMED[ch])
        elif "\udc80" <= ch <= "\udcff":  # an octet that was not UTF-8 (surrogateescape)
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif unicodedata.category(ch) in _HIDDEN:
            out.append("".join(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    return "".join(out)


def render_bytes(data: bytes, *, indent: str = "") -> str:
    """Octets as text; each LF is `\\n`, then a line break and `indent` unless it ends the
    data (a trailing break would read as an empty line that was never sent)."""
    text = _escape(data.decode("utf-8", "surrogateescape"), newline="\\n\n" + indent)
    return text.removesuffix("\n" + indent) if data.endswith(b"\n") else text


def escape_text(text: str) -> str:
    """A message or note with hidden characters made visible; line breaks are kept."""
    return _escape(text, newline="\n")


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
