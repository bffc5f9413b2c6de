"""Header escaping per version ("Value Encoding" in STOMP 1.1 and 1.2; none in 1.0)."""

from __future__ import annotations

import re

from conformance.codec.errors import EscapeError
from conformance.spec import statement_id
from conformance.spec.grammar import ESCAPES, Version

_ESCAPE_SEQUENCE = re.compile(r"\\(.?)", re.DOTALL)

#: Encoding tables: the reverse of ESCAPES ("when encoding frame headers, the reverse
#: transformation MUST be applied").
_ENCODE: dict[Version, dict[int, str]] = {
    version: {ord(plain): "\\" + code for code, plain in table.items()}
    for version, table in ESCAPES.items()
    if table is not None
}
_NEEDS_ESCAPE: dict[Version, re.Pattern[str]] = {
    version: re.compile("[" + re.escape("".join(chr(c) for c in table)) + "]")
    for version, table in _ENCODE.items()
}

#: By version: a match that ends on the first escape sequence the version does not define,
#: its group 1 the character after the backslash (empty for a lone one at the end).
_UNDEFINED: dict[Version, re.Pattern[str]] = {
    version: re.compile(r"(?:[^\\]|\\[" + re.escape("".join(table)) + r"])*+\\(.?)",
                        re.DOTALL)
    for version, table in ESCAPES.items()
    if table is not None
}

#: The message of an undefined escape: how `try_unescape` shows it, then the version.
UNDEFINED_ESCAPE = "undefined escape sequence {} in a STOMP {} header"


def try_unescape(text: str, version: Version) -> tuple[str, tuple[int, str] | None]:
    """`text` with the escapes of `version` decoded, and None; or, if it holds an escape
    sequence the version does not define (a lone trailing backslash included), `text` as
    it is and that sequence: its octet offset in `text`, and how a message shows it."""
    table = ESCAPES[version]
    if table is None or "\\" not in text:
        return text, None
    undefined = _UNDEFINED[version].match(text)
    if undefined is None:
        return _ESCAPE_SEQUENCE.sub(lambda match: table[match.group(1)], text), None
    at, code = undefined.start(1) - 1, undefined.group(1)
    return text, (len(text[:at].encode()), f"'\\{code}'" if code else "a lone '\\' at the end")


def unescape(text: str, version: Version, *, offset: int | None = None) -> str:
    """Decode the escapes of `version` in `text`. An undefined escape (or a lone trailing
    backslash) raises EscapeError; `offset` is the byte offset of `text` in the stream."""
    decoded, undefined = try_unescape(text, version)
    if undefined is not None:
        at, shown = undefined
        raise EscapeError(
            UNDEFINED_ESCAPE.format(shown, version),
            statement=statement_id("value-encoding.undefined-escape-fatal", version),
            offset=None if offset is None else offset + at,
        )
    return decoded


def escape(text: str, version: Version) -> str:
    """Encode `text` for a header of `version` (unchanged in 1.0)."""
    table = _ENCODE.get(version)
    if table is None or _NEEDS_ESCAPE[version].search(text) is None:
        return text
    return text.translate(table)

