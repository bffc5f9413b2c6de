"""Well-formed STOMP client input, built from the grammar data (conformance/spec/grammar.py)
off `Choices`. No Hypothesis here: strategies.py wraps these for tests, and a campaign
drives them from a seeded random source at a thousand inputs a second.

- `frame_of`: one frame of any client command of any version: the headers that version
  requires (CLIENT_REQUIRED_HEADERS) and some it allows, header text escaped per version
  (ESCAPES; never in CONNECT and STOMP), content-length present or not, a body only on
  SEND, LF or CR LF line ends where the version allows CR LF (CRLF_EOL), EOLs after NUL.
- `valid_input`: what the network fuzzer sends when the spec requires acceptance: a short
  session on one connection (SENDs, subscriptions, transactions, a message delivered to
  itself), the last frame asking a RECEIPT, the bytes cut into writes by `segment`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from conformance.codec import Frame, encode
from conformance.fuzz.inputs.choices import Choices
from conformance.fuzz.inputs.fuzz_input import Expect, FuzzInput
from conformance.spec import statement_id
from conformance.spec.grammar import (
    ACK_MODES,
    CLIENT_REQUIRED_HEADERS,
    CRLF_EOL,
    ESCAPES,
    VERSIONS,
    Version,
)

#: Pieces header text is made of: plain, spaces (which must never be trimmed), multi-byte
#: UTF-8, the octets escaping exists for (1.1 and 1.2), and NUL (the 1.2 ABNF allows any
#: octet but CR, LF and ':' in a header; 1.0 headers are taken literally, so no LF there).
_PIECES: dict[Version, tuple[str, ...]] = {
    "1.0": ("a", "fz", "7", " ", "é", "€", "日本", "\\", "-"),
    "1.1": ("a", "fz", "7", " ", "é", "€", "日本", "\\", ":", "\n", "\x00"),
    "1.2": ("a", "fz", "7", " ", "é", "€", "日本", "\\", ":", "\n", "\r", "\x00"),
}
_PLAIN = ("a", "fz", "7", "-", "é", "x" * 40)
_BODIES = (b"", b"hi", b"\x00", b"a\x00b", b"\n", b"\r\n", b"x" * 300, "é€".encode(),
           b"\xff\xfe", b"SEND\n\n\x00", b"\\n")
_MIME = ("text/plain", "text/plain;charset=utf-8", "application/octet-stream",
         "application/json", "text/xml; charset=utf-8")
HEART_BEATS = ("0,0", "0,1000", "5000,0", "60000,60000", "0,60000")
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
#: Places a parser finds hardest to have a read end at: after a backslash (inside an
#: escape), after a CR (before its LF), before and after a NUL, after a colon.
_HARD = re.compile(rb"[\\\r:]|\x00")
_MAX_HARD = 64
#: Headers of the application's own start with this: the oracle checks MESSAGE carries them.
USER_PREFIX = "x-fz"

COMMANDS_BY_VERSION: dict[Version, tuple[str, ...]] = {
    v: tuple(sorted(c for c, per in CLIENT_REQUIRED_HEADERS.items() if v in per))
    for v in VERSIONS
}


@dataclass(frozen=True, slots=True)
class Written:
    """A frame and the bytes that write it in `version`."""

    version: Version
    frame: Frame
    wire: bytes


def tag(c: Choices) -> str:
    """A short name that makes an input's destinations, ids and receipt its own."""
    number, out = c.below(36 ** 6), ""
    for _ in range(6):
        number, digit = divmod(number, 36)
        out += _BASE36[digit]
    return out


def topic(name: str) -> str:
    """Topics, not queues: a message with no subscriber is dropped, so a long campaign
    leaves nothing behind on the broker."""
    return f"/topic/fz-{name}"


def text(c: Choices, version: Version, *, plain: bool = False, most: int = 3) -> str:
    pieces = _PLAIN if plain else _PIECES[version]
    return "".join(c.pick(pieces) for _ in range(c.between(1, most)))


def user_headers(c: Choices, version: Version) -> list[tuple[str, str]]:
    """0-3 headers of the application's own (repeats allowed: the first wins)."""
    return [(USER_PREFIX + text(c, version, most=2), text(c, version))
            for _ in range(c.below(4))]


def headers_for(c: Choices, command: str, version: Version, name: str, *,
                transaction: str | None = None) -> tuple[list[tuple[str, str]], bytes]:
    """The headers of a well-formed `command` frame (every required one, some optional
    ones) and its body; `name` makes its destination, id and transaction its own."""
    headers: list[tuple[str, str]] = []
    body = b""
    if command in ("CONNECT", "STOMP"):
        if version != "1.0":
            older = [v for v in VERSIONS if v < version][:c.below(3)]
            headers += [("accept-version", ",".join([*older, version])),
                        ("host", text(c, version, plain=True))]
        if c.flag():
            headers += [("login", text(c, version, plain=True)),
                        ("passcode", text(c, version, plain=True))]
        if version != "1.0" and c.flag():
            headers.append(("heart-beat", c.pick(HEART_BEATS)))
    elif command == "SEND":
        headers.append(("destination", topic(name)))
        if c.flag():
            headers.append(("content-type", c.pick(_MIME)))
        headers += user_headers(c, version)
        body = c.pick(_BODIES)
    elif command == "SUBSCRIBE":
        headers.append(("destination", topic(name)))
        if version != "1.0" or c.flag():  # 1.0: the id is optional
            headers.append(("id", f"fz-{name}"))
        if c.flag():
            headers.append(("ack", c.pick(sorted(ACK_MODES[version]))))
    elif command == "UNSUBSCRIBE":
        headers.append(("id", f"fz-{name}"))
    elif command in ("ACK", "NACK"):
        if version == "1.2":
            headers.append(("id", f"fz-{name}"))
        else:
            headers.append(("message-id", f"fz-{name}"))
            if version == "1.1":
                headers.append(("subscription", f"fz-{name}"))
    elif command in ("BEGIN", "COMMIT", "ABORT"):
        headers.append(("transaction", f"fz-tx-{name}"))
    if transaction is not None and command in ("SEND", "ACK", "NACK"):
        headers.append(("transaction", transaction))
    return headers, body


def write(c: Choices, frame: Frame, version: Version) -> bytes:
    """`frame` on the wire: content-length given or left out (where the body allows),
    each line ended by LF or CR LF (1.2), and EOLs after the NUL."""
    forced = b"\x00" in frame.body
    data = encode(frame, version=version,
                  content_length=True if forced else c.pick((None, True, False)))
    if CRLF_EOL[version] and c.flag():
        head = data.index(b"\n\n") + 2  # escaped headers hold no raw LF
        lines = data[:head].split(b"\n")
        crlf = c.below(1 << (len(lines) - 1))  # one bit per EOL
        data = b"".join(line + (b"\r\n" if crlf >> i & 1 else b"\n")
                        for i, line in enumerate(lines[:-1])) + data[head:]
    return data + c.pick((b"", b"", b"\n", b"\n\n", b"\r\n")[:5 if CRLF_EOL[version] else 4])


def frame_of(c: Choices, versions: Sequence[Version]) -> Written:
    """One well-formed frame of any client command of any of `versions`."""
    version = c.pick(versions)
    command = c.pick(COMMANDS_BY_VERSION[version])
    name = tag(c)
    headers, body = headers_for(c, command, version, name)
    if c.flag():
        headers.append(("receipt", f"fz-{name}"))
    frame = Frame(command, headers, body)
    return Written(version, frame, write(c, frame, version))


def segment(c: Choices, data: bytes, *, max_writes: int = 6) -> tuple[bytes, ...]:
    """`data` in one write half the time (a write is a system call on each side: the
    fuzzer's rate), else cut into at most `max_writes` writes, the cuts often at the hard
    places: an escape or a CR LF split across two writes, a NUL alone."""
    cuts = c.below(max_writes) if len(data) > 1 and c.flag() else 0
    if not cuts:
        return (data,)
    hard = [m.start() + (m.group() != b"\x00") for m in _HARD.finditer(data, 0, len(data) - 1)]
    hard = [h for h in hard[:_MAX_HARD] if h > 0]
    points = {c.pick(hard) if hard and c.flag() else c.between(1, len(data) - 1)
              for _ in range(cuts)}
    edges = [0, *sorted(points), len(data)]
    return tuple(data[a:b] for a, b in zip(edges, edges[1:], strict=False))


#: The steps a valid session is made of (repeats weight them).
_STEPS = ("send", "send", "subscribe", "transaction", "delivery")


def session(c: Choices, version: Version, name: str, *, steps: int,
            deliveries: bool = True) -> list[Frame]:
    """Well-formed frames that answer nothing but MESSAGE (a delivery to a subscription
    of the same input; none unless `deliveries`): no receipt, no DISCONNECT."""
    out: list[Frame] = []
    kinds = _STEPS if deliveries else _STEPS[:-1]
    for k in range(steps):
        step, own = c.pick(kinds), f"{name}-{k}"
        if step == "send":
            out.append(Frame("SEND", *headers_for(c, "SEND", version, own)))
        elif step == "subscribe":
            subscribe = Frame("SUBSCRIBE", *headers_for(c, "SUBSCRIBE", version, own))
            out.append(subscribe)
            if c.flag():  # 1.0: by id when the SUBSCRIBE gave one, else by destination
                key = ("id", subscribe.get("id")) if "id" in subscribe else \
                    ("destination", subscribe.get("destination"))
                out.append(Frame("UNSUBSCRIBE", [(key[0], key[1] or "")]))
        elif step == "transaction":
            begin = Frame("BEGIN", *headers_for(c, "BEGIN", version, own))
            out.append(begin)
            for j in range(c.below(3)):
                out.append(Frame("SEND", *headers_for(c, "SEND", version, f"{own}-{j}",
                                                      transaction=begin.headers[0][1])))
            end = c.pick(("COMMIT", "ABORT"))
            out.append(Frame(end, *headers_for(c, end, version, own)))
        else:  # a delivery: a MESSAGE for the oracle to compare with its SEND
            out.append(Frame("SUBSCRIBE", *headers_for(c, "SUBSCRIBE", version, own)))
            out.append(Frame("SEND", *headers_for(c, "SEND", version, own)))
    return out


def feature(frames_: Sequence[Frame], wire: bytes, connect: str | None,
            connect_headers: Sequence[tuple[str, str]], version: Version) -> tuple[str, str]:
    """The rarest thing a valid input exercises, and the statement that makes it valid:
    what a broker that refuses the input most likely got wrong."""
    text_ = [k + v for f in frames_ for k, v in f.headers]
    escaped = (*(ESCAPES[version] or {}).values(), "\\") if ESCAPES[version] else ()
    if any(b"\x00" in f.body for f in frames_):
        found = ("nul-in-body", "content-length.read-octets")
    elif any("\x00" in t for t in text_):
        found = ("nul-in-header", "frames.header-grammar")
    elif any(ch in t for t in text_ for ch in escaped):
        found = ("escapes", "value-encoding.decode-escapes")
    elif CRLF_EOL[version] and b"\r\n" in wire:
        found = ("crlf", "frames.eol-cr-optional")
    elif connect == "STOMP":
        found = ("stomp-frame", "connect.stomp-frame")
    elif connect_headers:
        found = ("connect-headers", "heart-beating.header-format")
    else:
        found = ("plain", "frames.frame-grammar")
    return f"valid:{found[0]}", statement_id(found[1], version)


def valid_input(c: Choices, versions: Sequence[Version]) -> FuzzInput:
    """A short well-formed session after the handshake; its last frame asks a RECEIPT."""
    version = c.pick(versions)
    name = tag(c)
    frames_ = session(c, version, name, steps=c.between(1, 3))
    if c.below(8) == 0:
        frames_.append(Frame("DISCONNECT"))
    receipt = f"fz-{name}"
    frames_[-1] = frames_[-1].replace(headers=[*frames_[-1].headers, ("receipt", receipt)])
    wire = b"".join([write(c, f, version) for f in frames_])
    connect = "STOMP" if version != "1.0" and c.below(6) == 0 else "CONNECT"
    connect_headers: tuple[tuple[str, str], ...] = ()
    if version != "1.0" and c.below(6) == 0:
        older = "".join(f"{v}," for v in VERSIONS if v < version)
        connect_headers = (("heart-beat", c.pick(HEART_BEATS)),
                           ("accept-version", older + version))
    mutation, statement = feature(frames_, wire, connect, connect_headers, version)
    return FuzzInput(version=version, chunks=segment(c, wire), expect=Expect.VALID,
                     statement=statement, mutation=mutation, receipt=receipt,
                     connect=connect, connect_headers=connect_headers)
