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

def unescape(text: str, version: Version, *, offset: int | None = None) -> str:
    """Decode the escapes of `version` in `text`. An undefined escape (or a lone trailing
    backslash) raises EscapeError; `offset` is the byte offset of `text` in the stream."""
    table = ESCAPES[version]
    if table is None or "\\" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        decoded = table.get(match.group(1))
        if decoded is None:
            at = None if offset is None else offset + len(text[: match.start()].encode())
            shown = f"'\\{match.group(1)}'" if match.group(1) else "a lone '\\' at the end"
            raise EscapeError(
                f"undefined escape sequence {shown} in a STOMP {version} header",
                statement=statement_id("value-encoding.undefined-escape-fatal", version),
                offset=at,
            )
        return decoded

    return _ESCAPE_SEQUENCE.sub(replace, text)


def escape(text: str, version: Version) -> str:
    """Encode `text` for a header of `version` (unchanged in 1.0)."""
    table = _ENCODE.get(version)
    if table is None or _NEEDS_ESCAPE[version].search(text) is None:
        return text
    return text.translate(table)

