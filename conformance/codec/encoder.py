"""Writing frames: `encode` writes only what the spec allows for a version; `encode_raw`
writes exactly the bytes it is given, so negative cases can break any rule on purpose."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from conformance.codec.errors import LocalProtocolError
from conformance.codec.escaping import escape
from conformance.codec.events import Frame
from conformance.spec.grammar import BODY_COMMANDS, CRLF_EOL, ESCAPES, UNESCAPED_COMMANDS, Version


def encode(frame: Frame, *, version: Version = "1.2", content_length: bool | None = None,
           eol: bytes = b"\n") -> bytes:
    """The wire bytes of `frame` in `version`.

    Headers are escaped per version (never in CONNECT, CONNECTED and STOMP). A
    content-length header is added when the body is not empty (content_length=None), always
    (True) or never (False), unless the frame already carries one. Raises
    LocalProtocolError for what the version cannot carry: a body on a frame that must not
    have one, a NUL in a body without content-length, an unescapable LF, a CR LF EOL
    before 1.2."""
    command = frame.command
    headers = frame.headers
    body = frame.body
    if eol != b"\n" and not (eol == b"\r\n" and CRLF_EOL[version]):
        raise LocalProtocolError(f"EOL {eol!r} is not allowed in STOMP {version}")
    if not command or "\n" in command or "\r" in command:
        raise LocalProtocolError(f"command {command!r} cannot be written")
    if body and command not in BODY_COMMANDS and version != "1.0":
        raise LocalProtocolError(f"a {command} frame must not have a body "
                                 "[body.forbidden-frames]")
    text = encode_headers(headers, version=version, command=command)
    has_length = text.startswith("content-length:") or "\ncontent-length:" in text
    if (content_length or (content_length is None and body)) and not has_length:
        text += f"content-length:{len(body)}\n"
    elif not has_length and b"\x00" in body:
        raise LocalProtocolError("a body holding NUL needs content-length "
                                 "[content-length.required-with-nul]")
    head = f"{command}\n{text}\n"
    if eol != b"\n":
        head = head.replace("\n", "\r\n")
    return b"".join((head.encode(), body, b"\x00"))


def encode_headers(headers: Sequence[tuple[str, str]], *, version: Version = "1.2",
                   command: str = "MESSAGE") -> str:
    """The header lines of a `command` frame, each ending in LF, escaped per version;
    LocalProtocolError for a header the version cannot carry."""
    if not headers:
        return ""
    text = "\n".join(map(":".join, headers))
    count = len(headers)
    # Most frames need no escaping: one colon and no LF per line, no backslash, no CR.
    if (text.count(":") != count or text.count("\n") != count - 1 or "\\" in text
            or "\r" in text or text[0] == ":" or "\n:" in text):
        text = _header_text(command, headers, version)
    return text + "\n"


def _header_text(command: str, headers: Sequence[tuple[str, str]], version: Version) -> str:
    """Header lines that need escaping, or that cannot be written unescaped."""
    escaped = ESCAPES[version] is not None and command not in UNESCAPED_COMMANDS
    lines = []
    for name, value in headers:
        if escaped:
            name, value = escape(name, version), escape(value, version)
        elif "\n" in name + value or ":" in name or (CRLF_EOL[version] and "\r" in name + value):
            raise LocalProtocolError(
                f"header {name!r} cannot be written unescaped in a STOMP {version} "
                f"{command} frame [value-encoding.connect-not-escaped]")
        if not name:
            raise LocalProtocolError("a header name cannot be empty [frames.header-grammar]")
        lines.append(f"{name}:{value}")
    return "\n".join(lines)


def encode_raw(command: str | bytes,
               headers: Iterable[tuple[str | bytes, str | bytes] | bytes] = (),
               body: bytes = b"", *, content_length: int | str | None = None,
               nul: bytes = b"\x00", eol: bytes = b"\n") -> bytes:
    """Bytes written as given, for negative cases: a header is a (name, value) pair joined
    by ':' or a raw line of bytes; nothing is escaped or checked. `content_length` is
    written verbatim as the first header (a wrong number, '-1', ' 5', 'abc'); `nul` ends
    the frame (b'' for a missing NUL, b'X' for a wrong terminator)."""

    def raw(part: str | bytes) -> bytes:
        return part.encode() if isinstance(part, str) else part

    lines = [raw(command)]
    if content_length is not None:
        lines.append(b"content-length:" + raw(str(content_length)))
    for header in headers:
        if not isinstance(header, bytes):
            header = raw(header[0]) + b":" + raw(header[1])
        lines.append(header)
    return eol.join(lines) + eol + eol + body + nul
