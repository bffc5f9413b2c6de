"""Write the seed corpora of fuzz/corpus/<target>/ with our encoder: a valid frame of each
command in each version, escapes, content-length cases, heart-beats, CR LF, and the broken
frames the spec names (undefined escape, wrong content-length, missing NUL, ...).

    python fuzz/make_corpus.py

Each seed starts with the choices its target reads first (conformance.fuzz.parsing.readings,
.targets and .differential describe them). The output is deterministic; files are
written, never deleted, so regression inputs added by hand stay.
"""

from __future__ import annotations

import hashlib
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from conformance.codec import Frame, LocalProtocolError, encode, encode_raw  # noqa: E402
from conformance.spec.grammar import COMMANDS, UNESCAPED_COMMANDS, VERSIONS, Version  # noqa: E402

CORPUS = HERE / "corpus"

#: Typical headers of each command (the union over versions: extra headers are legal).
HEADERS: dict[str, list[tuple[str, str]]] = {
    "CONNECT": [("accept-version", "1.0,1.1,1.2"), ("host", "/"), ("login", "guest"),
                ("passcode", "pa:ss\\word"), ("heart-beat", "1000,0")],
    "STOMP": [("accept-version", "1.2"), ("host", "broker.test")],
    "CONNECTED": [("version", "1.2"), ("heart-beat", "0,1000"), ("server", "ref/1.0 x"),
                  ("session", "s-1")],
    "SEND": [("destination", "/queue/a"), ("content-type", "text/plain;charset=utf-8"),
             ("receipt", "r-1"), ("x-utf8", "caf\u00e9")],
    "SUBSCRIBE": [("id", "0"), ("destination", "/topic/b"), ("ack", "client-individual")],
    "UNSUBSCRIBE": [("id", "0")],
    "BEGIN": [("transaction", "tx1")],
    "COMMIT": [("transaction", "tx1")],
    "ABORT": [("transaction", "tx1")],
    "ACK": [("id", "m-1"), ("message-id", "m-1"), ("subscription", "0"), ("transaction", "tx1")],
    "NACK": [("id", "m-1"), ("message-id", "m-1"), ("subscription", "0")],
    "DISCONNECT": [("receipt", "bye")],
    "MESSAGE": [("destination", "/queue/a"), ("message-id", "m-1"), ("subscription", "0"),
                ("ack", "a-1"), ("content-type", "application/octet-stream")],
    "RECEIPT": [("receipt-id", "r-1")],
    "ERROR": [("message", "malformed frame"), ("receipt-id", "r-1"),
              ("content-type", "text/plain")],
}
BODIES = {"SEND": b"hello", "MESSAGE": b"bin\x00ary", "ERROR": b"details"}


def valid_streams(version: Version) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of frames the spec allows in `version`."""
    for command in sorted(COMMANDS):
        frame = Frame(command, HEADERS[command], BODIES.get(command, b""))
        yield command.lower(), encode(frame, version=version)
    escaped = Frame("SEND", [("destination", "/q"), ("a:b", "line\nbreak"), ("back", "sl\\sh"),
                             ("cr", "x\ry")], b"")
    for name, frame in (("escapes", escaped),
                        ("nul-in-body", Frame("SEND", [("destination", "/q")], b"a\x00b")),
                        ("length-zero", Frame("MESSAGE", HEADERS["MESSAGE"], b""))):
        try:
            yield name, encode(frame, version=version, content_length=True)
        except LocalProtocolError:
            continue  # 1.0 cannot carry these escapes
    plain = Frame("SEND", [("destination", "/q")], b"no length")
    yield "no-length", encode(plain, version=version, content_length=False)
    receipt = encode(Frame("RECEIPT", [("receipt-id", "1")]), version=version)
    yield "heart-beats", b"\n\n" + receipt + b"\n" + receipt + b"\n\n"
    yield "repeated", encode_raw("MESSAGE", [("destination", "/a"), ("destination", "/b"),
                                             ("content-length", "1"), ("content-length", "2")],
                                 b"xy")
    if version == "1.2":
        yield "crlf", b"\r\n" + encode(Frame("SEND", HEADERS["SEND"], b"hi"), version=version,
                                       eol=b"\r\n") + b"\r\n"
        yield "crlf-mixed", b"SEND\r\ndestination:/q\n\r\nbody\x00"


def broken_streams() -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of frames that break a rule the parser must catch."""
    yield "undefined-escape", encode_raw("SEND", [("destination", "/q"), ("x", "a\\tb")])
    yield "lone-backslash", encode_raw("SEND", [("x", "a\\")])
    yield "length-short", encode_raw("SEND", [("destination", "/q")], b"abcd", content_length=2)
    yield "length-negative", encode_raw("SEND", [], b"", content_length="-1")
    yield "length-padded", encode_raw("SEND", [], b"a", content_length=" 1")
    yield "length-huge", encode_raw("SEND", [], b"", content_length="9" * 30)
    yield "missing-nul", encode_raw("SEND", [("destination", "/q")], b"body", nul=b"")
    yield "unknown-command", encode_raw("FROB", [("a", "b")])
    yield "no-colon", encode_raw("SEND", [b"nocolon"])
    yield "empty-name", encode_raw("SEND", [("", "v")])
    yield "colon-in-value", encode_raw("SEND", [("k", "a:b")])
    yield "body-on-subscribe", encode_raw("SUBSCRIBE", [("id", "0")], b"body")
    yield "bad-utf8", encode_raw("SEND", [(b"k", b"\xff\xfe")])
    yield "no-blank-line", b"SEND\ndestination:/q\x00"
    yield "cr-in-command", b"SEND\r\n\r\n\x00"
    # Past the parser target's small limits (conformance.fuzz.parsing.readings.SMALL_LIMITS).
    yield "endless-body", b"SEND\ndestination:/q\n\n" + b"x" * 200
    yield "endless-headers", b"SEND\n" + b"k:v\n" * 60
    yield "endless-line", b"SEND\nk:" + b"v" * 200


def seeds() -> Iterator[tuple[Version, str, bytes]]:
    for version in VERSIONS:
        for name, data in valid_streams(version):
            yield version, name, data
        for name, data in broken_streams():
            yield version, name, data


#: The parser target's first reads, chosen in turn: octet by octet, odd sizes, one of 64.
READS: tuple[list[int], ...] = ([1] * 7, [7], [1, 2, 3], [64])


def parser_seed(name: str, version: Version, data: bytes) -> bytes:
    """config (version, strict or observing, small or default limits) and read sizes
    chosen by the seed's name, so adding a seed changes no other."""
    index = zlib.crc32(name.encode())
    config = VERSIONS.index(version) + 3 * (index % 2) + 6 * (index // 2 % 2)
    sizes = READS[index // 4 % len(READS)]
    return bytes([config, len(sizes), *(size - 1 for size in sizes)]) + data


def validator_seeds() -> Iterator[tuple[str, bytes]]:
    """[version] [offered] [ack mode] stream, of server frames good and bad."""
    frames = {
        "connected": encode(Frame("CONNECTED", HEADERS["CONNECTED"])),
        "connected-10": encode(Frame("CONNECTED", [("session", "1")]), version="1.0"),
        "connected-bad": b"CONNECTED\nversion:9.9\nheart-beat:x\nserver:/bad\n\nbody\x00",
        "message": encode(Frame("MESSAGE", HEADERS["MESSAGE"], b"m")),
        "message-bare": encode_raw("MESSAGE", [("destination", "/q")], b"m"),
        "receipt": encode(Frame("RECEIPT", HEADERS["RECEIPT"])),
        "error": encode(Frame("ERROR", HEADERS["ERROR"], b"e")),
        "error-bare": encode_raw("ERROR", [], b"no message header"),
        "content-type-bad": encode_raw("MESSAGE", [("content-type", "not a type")], b"x"),
    }
    for index, (name, data) in enumerate(frames.items()):
        for version in VERSIONS:
            yield f"{name}-{version}", bytes([VERSIONS.index(version), index, index]) + data


def roundtrip_seeds() -> Iterator[tuple[str, bytes]]:
    """[version] [command] [options] [count] ([len] name [len] value)* body."""
    commands = sorted(COMMANDS)
    for version in VERSIONS:
        for index, command in enumerate(commands):
            headers = HEADERS[command][:3]
            if version != "1.0" and command not in UNESCAPED_COMMANDS:
                headers = [*headers, ("esc", "a:b\\c\nd")]
            fields = b"".join(_text(text, limit) for name, value in headers
                              for text, limit in ((name, 12), (value, 24)))
            options = index % 6  # content-length default/always/never, LF or CR LF
            yield f"{command.lower()}-{version}", bytes(
                [VERSIONS.index(version), index, options, len(headers)]
            ) + fields + BODIES.get(command, b"")


def _text(text: str, limit: int) -> bytes:
    data = text.encode()[:limit]
    return bytes([len(data)]) + data


def write(target: str, name: str, data: bytes) -> None:
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(data).hexdigest()[:8]  # a stable name, not a secret
    (folder / f"{name}-{digest}").write_bytes(data)


def main() -> None:
    for version, name, data in seeds():
        write("parser", f"{name}-{version}", parser_seed(name, version, data))
        write("differential", f"{name}-{version}", bytes([VERSIONS.index(version)]) + data)
    for name, data in validator_seeds():
        write("validator", name, data)
    for name, data in roundtrip_seeds():
        write("roundtrip", name, data)
    for target in sorted(path.name for path in CORPUS.iterdir()):
        print(f"{target}: {len(list((CORPUS / target).iterdir()))} seeds")


if __name__ == "__main__":
    main()
