"""The parser: round trips, chunking invariance, malformed input, early failure, limits,
the spec's own example frames."""

from __future__ import annotations

import random
import re

import pytest
from helpers import bytewise, run, spec_text, split
from hypothesis import given
from hypothesis import strategies as st

from conformance.codec import (
    BodyNotAllowed,
    BodyTooLarge,
    ContentLengthError,
    EncodingError,
    EscapeError,
    Frame,
    FrameTooLarge,
    FramingError,
    HeaderCountExceeded,
    HeaderLineTooLong,
    Heartbeat,
    Limits,
    Parser,
    StompError,
    Violation,
    encode,
    encode_raw,
    events,
)
from conformance.spec.grammar import VERSIONS, Version

# -- strategies ---------------------------------------------------------------------------

#: What a header can carry per version: 1.2 and 1.1 escape ':', LF and '\' (1.2 also CR;
#: 1.1 carries CR as a plain octet); 1.0 escapes nothing, so no LF anywhere and no ':' in
#: a name.
def header_text(version: str, *, name: bool) -> st.SearchStrategy[str]:
    text = st.text(min_size=1 if name else 0, max_size=20)
    if version == "1.0":
        text = text.filter(lambda t: "\n" not in t and not (name and ":" in t))
    return text.filter(lambda t: not name or t != "content-length")


@st.composite
def frames(draw: st.DrawFn, version: str) -> Frame:
    command = draw(st.sampled_from(["SEND", "MESSAGE", "ERROR", "SUBSCRIBE", "ACK", "RECEIPT"]))
    headers = draw(st.lists(st.tuples(header_text(version, name=True),
                                       header_text(version, name=False)), max_size=6))
    body = draw(st.binary(max_size=300)) if command in ("SEND", "MESSAGE", "ERROR") else b""
    return Frame(command, headers, body)


@st.composite
def streams(draw: st.DrawFn, version: str) -> tuple[list[Frame], bytes]:
    """Encoded frames with heart-beat EOLs before and after them."""
    eol = st.sampled_from([b"\n", b"\r\n"] if version == "1.2" else [b"\n"])
    chosen = draw(st.lists(frames(version), min_size=1, max_size=5))
    data = b""
    for frame in chosen:
        data += b"".join(draw(st.lists(eol, max_size=3)))
        data += encode(frame, version=version, eol=draw(eol))  # type: ignore[arg-type]
    return chosen, data + b"".join(draw(st.lists(eol, max_size=3)))


def with_length(frame: Frame) -> Frame:
    """What the parser gives back: the encoder adds content-length to a non-empty body."""
    extra = [("content-length", str(len(frame.body)))] if frame.body else []
    return frame.replace(headers=[*frame.headers, *extra])


# -- round trips and chunking ---------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
@given(data=st.data())
def test_encode_then_parse_gives_the_frame_back(version: str, data: st.DataObject) -> None:
    frame = data.draw(frames(version))
    parsed = Parser(version=version).feed(encode(frame, version=version))  # type: ignore[arg-type]
    assert parsed == [with_length(frame)]
    assert parsed[0].violations == ()


@pytest.mark.parametrize("version", VERSIONS)
@given(data=st.data())
def test_every_split_gives_the_same_events(version: str, data: st.DataObject) -> None:
    sent, stream = data.draw(streams(version))
    whole = run([stream], version=version)  # type: ignore[arg-type]
    assert whole[1] is None
    assert [e[1] for e in whole[0] if e[0] == "frame"] == [f.command for f in sent]
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=10))
    assert run(split(stream, cuts), version=version) == whole  # type: ignore[arg-type]
    assert run(bytewise(stream), version=version) == whole  # type: ignore[arg-type]


@given(garbage=st.binary(max_size=400), cuts=st.lists(st.integers(0, 400), max_size=8),
       version=st.sampled_from(VERSIONS), strict=st.booleans())
def test_any_bytes_give_events_or_one_family_error_the_same_for_every_split(
        garbage: bytes, cuts: list[int], version: str, strict: bool) -> None:
    # run() lets only StompError through: anything else (IndexError, ValueError,
    # UnicodeDecodeError) fails the test.
    whole = run([garbage], version=version, strict=strict, eof=True)  # type: ignore[arg-type]
    assert run(split(garbage, cuts), version=version, strict=strict, eof=True) == whole  # type: ignore[arg-type]


@given(size=st.integers(30_000, 70_000), terminator=st.sampled_from([b"\x00", b"X\x00"]),
       strict=st.booleans(), cuts=st.lists(st.integers(0, 80_000), max_size=12))
def test_long_bodies_give_the_same_events_for_every_split(size: int, terminator: bytes,
                                                           strict: bool, cuts: list[int]) -> None:
    data = (b"\n" + encode_raw("SEND", [("destination", "/q")], bytes(range(256)) * (size // 256),
                              content_length=size // 256 * 256, nul=terminator)
            + encode(Frame("RECEIPT", {"receipt-id": "1"})))
    whole = run([data], strict=strict)
    assert whole[1] is None if terminator == b"\x00" or not strict else whole[1] is not None
    assert run(split(data, cuts), strict=strict) == whole
    assert run(split(data, range(0, len(data), 4096)), strict=strict) == whole


@pytest.mark.parametrize("content_length", [True, False])
def test_a_body_read_from_a_reused_buffer_is_what_was_sent(content_length: bool) -> None:
    # A body's reads are kept until its end: a caller's buffer, reused, must not change it.
    body = bytes(range(1, 256)) * 40
    data = encode_raw("SEND", [("destination", "/q")], body,
                      content_length=len(body) if content_length else None)
    parser, events, reused = Parser(), [], bytearray(1000)
    for at in range(0, len(data), 1000):
        piece = data[at:at + 1000]
        reused[:len(piece)] = piece
        events += parser.feed(memoryview(reused)[:len(piece)] if at % 2000 else reused[:len(piece)])
        reused[:] = bytes(len(reused))
    assert [(e.body, e.size) for e in events] == [(body, len(data))] and parser.buffered == 0


def test_heartbeats_between_frames_are_events_with_offsets() -> None:
    events = Parser().feed(b"\n\r\nRECEIPT\nreceipt-id:1\n\n\x00\n")
    assert events[0] == Heartbeat(0, b"\n") and events[1] == Heartbeat(1, b"\r\n")
    assert isinstance(events[2], Frame) and events[2].offset == 3
    assert events[3] == Heartbeat(3 + events[2].size, b"\n")


def test_a_frame_is_a_value_and_replace_makes_a_changed_copy() -> None:
    frame = Frame("SEND", [("a", "1")], b"x", offset=7)
    other = frame.replace(headers=[*frame.headers, ("b", "2")])
    assert (frame.headers, frame.get("b")) == ((("a", "1"),), None)
    assert (other.get("b"), other.body, other.offset) == ("2", b"x", 7)
    assert isinstance(frame.violations, tuple)
    if events.__file__.endswith(".so"):  # the compiled build holds it at run time too
        with pytest.raises(AttributeError):
            frame.body = b"y"  # type: ignore[misc]


# -- the rules of each version --------------------------------------------------------------

def test_repeated_headers_first_wins_and_every_entry_kept() -> None:
    (frame,) = Parser().feed(b"MESSAGE\nfoo:World\nfoo:Hello\n\n\x00")
    assert frame.get("foo") == "World" and frame.header_map == {"foo": "World"}
    assert frame.headers == (("foo", "World"), ("foo", "Hello"))


@pytest.mark.parametrize(("version", "raw", "value"), [
    ("1.2", rb"a\r\n\c\\b", "a\r\n:\\b"),
    ("1.1", rb"a\n\c\\b", "a\n:\\b"),
    ("1.0", rb"a\n\c\\b", r"a\n\c\\b"),   # 1.0 takes headers literally
])
def test_escapes_decoded_per_version(version: str, raw: bytes, value: str) -> None:
    (frame,) = Parser(version=version).feed(b"MESSAGE\nk:" + raw + b"\n\n\x00")  # type: ignore[arg-type]
    assert frame.get("k") == value


@pytest.mark.parametrize(("version", "escape", "statement"), [
    ("1.2", rb"\t", "value-encoding.undefined-escape-fatal"),
    ("1.2", b"\\", "value-encoding.undefined-escape-fatal"),          # lone backslash
    ("1.1", rb"\r", "value-encoding.undefined-escape-fatal-v11"),     # \r is 1.2 only
])
def test_undefined_escape_is_fatal(version: str, escape: bytes, statement: str) -> None:
    data = b"SEND\ndestination:/q/" + escape + b"\n\n\x00"
    with pytest.raises(EscapeError) as caught:
        Parser(version=version).feed(data)  # type: ignore[arg-type]
    assert caught.value.statement == statement
    assert caught.value.offset == data.index(b"\\")


@pytest.mark.parametrize("command", [b"CONNECT", b"CONNECTED", b"STOMP"])
def test_connect_and_connected_are_never_unescaped(command: bytes) -> None:
    (frame,) = Parser().feed(command + b"\npasscode:a:b\\c\\t\n\n\x00")
    assert frame.get("passcode") == "a:b\\c\\t" and frame.violations == ()


def test_crlf_ends_lines_in_1_2_only() -> None:
    data = b"MESSAGE\r\nk:v\r\n\r\n\x00"
    assert Parser(version="1.2").feed(data)[0].get("k") == "v"
    # In 1.1 a CR is an octet of the line: the command is not MESSAGE any more.
    with pytest.raises(FramingError) as caught:
        Parser(version="1.1").feed(b"MESSAGE\r\n\n\x00")
    assert caught.value.statement == "frames.command-grammar"
    assert Parser(version="1.1").feed(b"MESSAGE\nk:v\r\n\n\x00")[0].get("k") == "v\r"


def test_content_length_reads_exactly_n_octets_nul_included() -> None:
    (frame,) = Parser().feed(b"MESSAGE\ncontent-length:5\n\na\x00b\x00c\x00")
    assert frame.body == b"a\x00b\x00c"


def test_body_rule_does_not_apply_to_1_0() -> None:
    assert Parser(version="1.0").feed(b"SUBSCRIBE\n\nbody\x00")[0].body == b"body"


# -- malformed input: one error class per kind, naming the statement and the offset ---------

MALFORMED = [
    # (name, bytes, error, statement, offset of the fault)
    ("header without colon", b"SEND\nnocolon\n\n\x00", FramingError, "frames.header-grammar", 5),
    ("empty header name", b"SEND\n:v\n\n\x00", FramingError, "frames.header-grammar", 5),
    ("raw colon in value", b"SEND\nk:a:b\n\n\x00", FramingError, "frames.header-grammar", 5),
    ("CR inside a 1.2 line", b"SEND\nk:a\rb\n\n\x00", FramingError, "frames.header-grammar", 5),
    ("unknown command", b"FOO\n\n\x00", FramingError, "frames.command-grammar", 0),
    ("lower-case command", b"send\n\n\x00", FramingError, "frames.command-grammar", 0),
    ("invalid UTF-8", b"SEND\nk:\xff\n\n\x00", EncodingError, "value-encoding.utf8", 7),
    ("undefined escape", b"SEND\nk:\\t\n\n\x00", EscapeError,
     "value-encoding.undefined-escape-fatal", 7),
    ("non-NUL after content-length", b"SEND\ncontent-length:1\n\nabX\x00", ContentLengthError,
     "content-length.nul-terminated", 24),
    ("negative content-length", b"SEND\ncontent-length:-1\n\n\x00", ContentLengthError,
     "content-length.read-octets", 24),
    ("padded content-length", b"SEND\ncontent-length: 1\n\na\x00", ContentLengthError,
     "content-length.read-octets", 24),
    ("non-numeric content-length", b"SEND\ncontent-length:abc\n\n\x00", ContentLengthError,
     "content-length.read-octets", 25),
    ("body on SUBSCRIBE", b"SUBSCRIBE\nid:0\n\nhello\x00", BodyNotAllowed,
     "body.forbidden-frames", 16),
]


@pytest.mark.parametrize(("data", "error", "statement", "offset"),
                         [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_input_raises_its_error(data: bytes, error: type[StompError], statement: str,
                                          offset: int) -> None:
    for chunks in ([data], bytewise(data)):
        with pytest.raises(error) as caught:
            parser = Parser()
            for chunk in chunks:
                parser.feed(chunk)
        assert (caught.value.statement, caught.value.offset) == (statement, offset)
        assert f"at byte {offset}" in str(caught.value)


@pytest.mark.parametrize(("data", "statement"), [(m[1], m[3]) for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_observing_mode_records_the_violation_and_goes_on(data: bytes, statement: str) -> None:
    follow = b"RECEIPT\nreceipt-id:7\n\n\x00"
    events = Parser(strict=False).feed(data + follow)
    frames = [e for e in events if isinstance(e, Frame)]
    assert statement in [v.statement for v in frames[0].violations]
    assert frames[-1].command == "RECEIPT" and frames[-1].violations == ()


@pytest.mark.parametrize(("data", "statement"), [(m[1], m[3]) for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_an_observed_violation_reads_as_the_strict_error(data: bytes, statement: str) -> None:
    # Observing, the message is formatted only when read: it must read as strict's error.
    with pytest.raises(StompError) as caught:
        Parser().feed(data)
    (frame, *_) = Parser(strict=False).feed(data)
    assert isinstance(frame, Frame)
    first = frame.violations[0]
    assert (first.statement, first.offset) == (statement, caught.value.offset)
    assert (first.message, str(first)) == (caught.value.message, str(caught.value))
    assert first == Violation(first.statement, caught.value.message, first.offset)


def test_a_violation_formats_its_message_when_read() -> None:
    lazy = Violation("frames.command-grammar", "unknown command {!r}", 3, ("FOO",))
    eager = Violation("frames.command-grammar", "unknown command 'FOO'", 3)
    assert lazy.message == "unknown command 'FOO'" and lazy == eager
    assert hash(lazy) == hash(eager) and len({lazy, eager}) == 1
    assert str(lazy) == "unknown command 'FOO' at byte 3 [frames.command-grammar]"
    assert repr(lazy) == ("Violation(statement='frames.command-grammar', "
                          "message=\"unknown command 'FOO'\", offset=3)")
    assert str(Violation("s", "m")) == "m [s]"  # no offset
    assert lazy != Violation("frames.command-grammar", "unknown command 'FOO'", 4)


def test_each_malformed_header_line_is_cited_at_its_own_offset() -> None:
    # the same bad line twice, and many of them (each found without rereading the block)
    frame = Parser(strict=False).feed(b"SEND\nbad\nk:1\nbad\n\n\x00")[0]
    assert isinstance(frame, Frame)
    assert [v.offset for v in frame.violations] == [5, 13]
    assert frame.headers == (("bad", ""), ("k", "1"), ("bad", ""))
    many = b"SEND\n" + b"x\n" * 900 + b"\n\x00"
    frame = Parser(strict=False).feed(many)[0]
    assert isinstance(frame, Frame)
    assert [v.offset for v in frame.violations] == [5 + 2 * i for i in range(900)]


def test_truncated_frame_at_close_is_an_error() -> None:
    parser = Parser()
    parser.feed(b"MESSAGE\ndestination:/q\n\nhalf a bo")
    with pytest.raises(FramingError) as caught:
        parser.eof()
    assert caught.value.statement == "frames.nul-terminated"


def test_events_before_an_error_are_kept_on_it() -> None:
    with pytest.raises(StompError) as caught:
        Parser().feed(b"RECEIPT\nreceipt-id:1\n\n\x00SEND\nk:\\t\n\n\x00")
    assert [e.command for e in caught.value.events] == ["RECEIPT"]  # type: ignore[attr-defined]


def test_a_failed_parser_stays_failed() -> None:
    parser = Parser()
    with pytest.raises(FramingError):
        parser.feed(b"FOO\n\n\x00")
    with pytest.raises(FramingError):
        parser.feed(b"RECEIPT\nreceipt-id:1\n\n\x00")


# -- early failure: a stream broken for good fails at once ------------------------------------

def chunkings(data: bytes) -> list[list[bytes]]:
    """Every chunking the helpers offer: whole, byte by byte, and a few fixed random splits."""
    rng = random.Random(data)
    return [[data], bytewise(data)] + [split(data, [rng.randint(0, len(data)) for _ in "abc"])
                                       for _ in range(3)]


# (version, the start of a frame, error, statement, offset of the first bad octet)
BAD_COMMAND_LINES: list[tuple[Version, bytes, str, str, int]] = [
    ("1.2", b"FO", "FramingError", "frames.command-grammar", 0),
    ("1.2", b"sen", "FramingError", "frames.command-grammar", 0),      # case-sensitive
    ("1.2", b"\x00", "FramingError", "frames.command-grammar", 0),
    ("1.2", b"SEND\x00", "FramingError", "frames.command-grammar", 4),
    ("1.2", b"SENDX", "FramingError", "frames.command-grammar", 4),
    ("1.2", b"SEND\r\r", "FramingError", "frames.command-grammar", 5),
    ("1.1", b"MESSAGE\r", "FramingError", "frames.command-grammar", 7),  # CR: an octet
    ("1.2", b"\n\r\nACK\x00", "FramingError", "frames.command-grammar", 6),  # after beats
    ("1.2", b"S\xc3\xa9", "FramingError", "frames.command-grammar", 1),  # UTF-8, no command
    ("1.2", b"SE\xff", "EncodingError", "value-encoding.utf8", 2),
    ("1.0", b"SE\xff", "EncodingError", "frames.command-grammar-v10", 2),
]


@pytest.mark.parametrize(("version", "start", "error", "statement", "offset"),
                         BAD_COMMAND_LINES, ids=[repr(c[1]) + c[0] for c in BAD_COMMAND_LINES])
def test_a_command_line_no_command_begins_fails_before_its_eol(
        version: Version, start: bytes, error: str, statement: str, offset: int) -> None:
    beats = [("heartbeat", 0, b"\n"), ("heartbeat", 1, b"\r\n")] if start[0] == 10 else []
    for chunks in chunkings(start):
        assert run(chunks, version=version) == (beats, (error, statement, offset))
    # The line and the frame once complete: the same verdict, as the whole frame has.
    assert run([start + b"\n\n\x00"], version=version) == (beats, (error, statement, offset))


def test_a_command_line_fails_at_the_octet_that_decides_and_not_before() -> None:
    # Prefixes of commands, a CR that may be the start of a 1.2 CR LF or of a CR LF heart-
    # beat, a character cut in two: none is broken yet.
    waiting: list[tuple[Version, bytes]] = [("1.2", b"UNSUBSCRIB"), ("1.2", b"MESSAGE\r"),
                                            ("1.0", b"\r"), ("1.2", b"\r\nS"), ("1.2", b"S\xc3")]
    for version, start in waiting:
        for chunks in chunkings(start):
            assert run(chunks, version=version)[1] is None
    parser = Parser()
    assert parser.feed(b"\n\r\nSEN") == [Heartbeat(0, b"\n"), Heartbeat(1, b"\r\n")]
    with pytest.raises(FramingError) as caught:
        parser.feed(b"T")
    assert (caught.value.statement, caught.value.offset) == ("frames.command-grammar", 6)


def test_observing_mode_reads_a_bad_command_line_whole_and_cites_its_first_bad_octet() -> None:
    # Observing, nothing fails early: the frame is read with its command as sent (the
    # reference broker names it in its ERROR). Its first violation is the strict parser's
    # error: at the first bad octet, where it was at the frame's first octet before.
    for version, start, _, statement, offset in BAD_COMMAND_LINES:
        data = start + b"\nk:v\n\nx\x00RECEIPT\nreceipt-id:1\n\n\x00"
        command = start.lstrip(b"\r\n").decode("utf-8", "replace")
        if version == "1.2":  # a CR before the LF is the EOL's
            command = command.removesuffix("\r")
        for chunks in chunkings(data):
            parser = Parser(version=version, strict=False)
            frames = [e for chunk in chunks for e in parser.feed(chunk) if isinstance(e, Frame)]
            first = frames[0]
            assert (first.command, first.headers, first.body) == (command, (("k", "v"),), b"x")
            assert (first.violations[0].statement, first.violations[0].offset) == (statement,
                                                                                 offset)
            assert frames[1].command == "RECEIPT" and frames[1].violations == ()


# (version, a head without its blank line, error, statement, offset)
BAD_HEADER_LINES: list[tuple[Version, bytes, str, str, int]] = [
    ("1.2", b"SEND\nk:\\t\n", "EscapeError", "value-encoding.undefined-escape-fatal", 7),
    ("1.2", b"SEND\r\nk:a\\\r\n", "EscapeError", "value-encoding.undefined-escape-fatal", 9),
    ("1.2", b"SEND\nk\\t:v\n", "EscapeError", "value-encoding.undefined-escape-fatal", 6),
    ("1.2", b"SEND\nk:v\nk:\\\n", "EscapeError", "value-encoding.undefined-escape-fatal", 11),
    ("1.1", b"SEND\nk:\\r\n", "EscapeError", "value-encoding.undefined-escape-fatal-v11", 7),
    # A value's offset counts the name as sent, escapes and all.
    ("1.2", b"SEND\na\\cb:\\t\n", "EscapeError", "value-encoding.undefined-escape-fatal", 10),
    # The first broken line decides, whatever rule it breaks.
    ("1.2", b"SEND\nnocolon\nk:\\t\n", "FramingError", "frames.header-grammar", 5),
    ("1.2", b"SEND\nk:\\t\nk:\xff\n", "EscapeError", "value-encoding.undefined-escape-fatal",
     7),
    ("1.2", b"SEND\nk:\xff\nk:\\t\n", "EncodingError", "value-encoding.utf8", 7),
]


@pytest.mark.parametrize(("version", "head", "error", "statement", "offset"),
                         BAD_HEADER_LINES, ids=[repr(c[1]) + c[0] for c in BAD_HEADER_LINES])
def test_a_complete_header_line_that_breaks_a_rule_fails_before_the_blank_line(
        version: Version, head: bytes, error: str, statement: str, offset: int) -> None:
    for chunks in chunkings(head):
        assert run(chunks, version=version) == ([], (error, statement, offset))
    assert run([head + b"\n\x00"], version=version) == ([], (error, statement, offset))
    # Observing: the same first violation, once the frame is there.
    (frame,) = Parser(version=version, strict=False).feed(head + b"\n\x00")
    assert isinstance(frame, Frame)
    assert (frame.violations[0].statement, frame.violations[0].offset) == (statement, offset)


def test_escapes_fail_early_only_where_headers_are_escaped() -> None:
    cases: list[tuple[Version, bytes, bool]] = [
        ("1.2", b"SEND", True), ("1.1", b"MESSAGE", True), ("1.0", b"SEND", False),
        ("1.2", b"CONNECT", False), ("1.2", b"CONNECTED", False), ("1.2", b"STOMP", False),
        ("1.1", b"CONNECT", False)]
    for version, command, fails in cases:
        head = command + b"\npasscode:a\\tb\n"
        for chunks in chunkings(head):
            assert (run(chunks, version=version)[1] is not None) == fails, (version, command)
        if not fails:
            (frame,) = Parser(version=version).feed(head + b"\n\x00")
            assert isinstance(frame, Frame) and frame.get("passcode") == "a\\tb"


def test_an_unknown_command_fails_before_a_later_invalid_octet() -> None:
    # The head is judged in the order it arrives: a whole frame fails where one read in
    # pieces must (it cannot wait for octets that may never come), and observing records
    # the violations in that order.
    data = b"FOO\nk:\xff\n\n\x00"
    for chunks in chunkings(data):
        assert run(chunks) == ([], ("FramingError", "frames.command-grammar", 0))
    (frame,) = Parser(strict=False).feed(data)
    assert isinstance(frame, Frame)
    assert [(v.statement, v.offset) for v in frame.violations] == [
        ("frames.command-grammar", 0), ("value-encoding.utf8", 6)]


# -- STOMP 1.0's padded headers --------------------------------------------------------------

def test_a_padded_content_length_is_read_in_1_0_with_a_note_and_refused_after() -> None:
    for padded in (b" 5", b"5 ", b"  5  "):
        data = b"SEND\ncontent-length:" + padded + b"\n\na\x00bcd\x00"
        for strict in (True, False):
            for chunks in chunkings(data):
                parser = Parser(version="1.0", strict=strict)
                (frame,) = [e for chunk in chunks for e in parser.feed(chunk)]
                assert isinstance(frame, Frame)
                assert frame.body == b"a\x00bcd" and frame.violations == ()
                assert frame.get("content-length") == padded.decode()  # kept as sent
                assert len(frame.notes) == 1 and "padded" in frame.notes[0]
        strict_versions: list[tuple[Version, str]] = [("1.1", "content-length.read-octets-v11"),
                                                      ("1.2", "content-length.read-octets")]
        for version, statement in strict_versions:
            with pytest.raises(ContentLengthError) as caught:
                Parser(version=version).feed(data)
            assert caught.value.statement == statement
            frame = Parser(version=version, strict=False).feed(data)[0]
            assert isinstance(frame, Frame) and frame.notes == ()
            assert [v.statement for v in frame.violations] == [statement]
    # Only spaces pad: a tab, a sign or spaces alone are no count in 1.0 either.
    for value in (b"\t5", b"+5", b" ", b"5 5"):
        with pytest.raises(ContentLengthError) as caught:
            Parser(version="1.0").feed(b"SEND\ncontent-length:" + value + b"\n\n\x00")
        assert caught.value.statement == "content-length.read-octets-v10"
    (plain,) = Parser().feed(b"SEND\n\n\x00")
    assert isinstance(plain, Frame) and plain.notes == () and Frame("SEND").notes == ()


# -- limits: memory stays bounded whatever the peer sends ------------------------------------

SMALL = Limits(max_headers=10, max_header_line=100, max_body=1000, max_frame=2000)


def test_huge_content_length_is_refused_before_any_body_is_buffered() -> None:
    parser = Parser(limits=SMALL)
    with pytest.raises(BodyTooLarge):
        parser.feed(b"SEND\ncontent-length:10000000000\n\n")
    with pytest.raises(BodyTooLarge):
        Parser().feed(b"SEND\ncontent-length:10000000000\n\n")  # default limits too


@pytest.mark.parametrize(("endless", "error"), [
    (b"SEND\nk:" + b"v" * 50, HeaderLineTooLong),        # a header line that never ends
    (b"SEND\n" + b"k:v\n" * 10, HeaderCountExceeded),    # headers that never end
    (b"SEND\n\n" + b"x" * 50, BodyTooLarge),             # a body with no NUL
])
def test_endless_input_is_cut_at_the_limit(endless: bytes, error: type[StompError]) -> None:
    parser = Parser(limits=SMALL)
    with pytest.raises(error):
        for _ in range(100):
            parser.feed(endless if parser.buffered == 0 else endless[5:])
            assert parser.buffered <= 2 * SMALL.max_body


def test_frame_limit_counts_headers_and_body() -> None:
    limits = Limits(max_headers=10, max_header_line=1000, max_body=1000, max_frame=1000)
    data = encode(Frame("SEND", [("k", "v" * 900)], b"b" * 900))
    with pytest.raises(FrameTooLarge):
        Parser(limits=limits).feed(data)


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="max_body"):
        Limits(max_body=0)


# -- regressions the atheris harnesses of fuzz/ found ------------------------------------------

TINY = Limits(max_headers=2, max_header_line=40, max_body=10, max_frame=120)


def outcome(data: bytes, chunks: list[bytes], *, limits: Limits = TINY,
            version: str = "1.2") -> tuple[list[str], str | None]:
    """Commands of the frames read, and the error class that stopped the parser."""
    parser = Parser(limits=limits, version=version)  # type: ignore[arg-type]
    commands: list[str] = []
    try:
        for chunk in chunks:
            commands += [e.command for e in parser.feed(chunk) if isinstance(e, Frame)]
    except StompError as error:
        return commands, type(error).__name__
    return commands, None


def test_a_body_over_the_limit_is_refused_however_it_arrives() -> None:
    # Without content-length, a body and its NUL in one read used to pass the body limit
    # that the same bytes read one at a time hit.
    data = b"SEND\n\n" + b"x" * 11 + b"\x00"
    assert outcome(data, [data]) == outcome(data, bytewise(data)) == ([], "BodyTooLarge")
    fits = b"SEND\n\n" + b"x" * 10 + b"\x00"
    assert outcome(fits, [fits]) == outcome(fits, bytewise(fits)) == (["SEND"], None)


@pytest.mark.parametrize("digits", ["9" * 5_000, "1" + "0" * 30])
def test_a_content_length_of_thousands_of_digits_is_a_limit_not_a_crash(digits: str) -> None:
    # int() raised ValueError past 4,300 digits: an error outside the codec's family.
    data = f"SEND\ncontent-length:{digits}\n\n".encode()
    for limits in (Limits(max_header_line=10_000, max_body=10), Limits()):
        with pytest.raises(BodyTooLarge):
            Parser(limits=limits).feed(data)


def test_leading_zeros_of_a_content_length_count_for_nothing() -> None:
    data = b"SEND\ncontent-length:" + b"0" * 5_000 + b"3\n\nabc\x00"
    (frame,) = Parser(limits=Limits(max_header_line=10_000, max_body=10)).feed(data)
    assert frame.body == b"abc"


def test_the_header_limit_counts_headers_not_the_command_line() -> None:
    # An unfinished header block counted the command's LF as a header: a frame with exactly
    # max_headers headers failed when read in pieces and passed when read whole.
    data = b"SEND\na:1\nb:2\n\n\x00"
    assert outcome(data, [data]) == outcome(data, bytewise(data)) == (["SEND"], None)
    over = b"SEND\na:1\nb:2\nc:3\n\n\x00"
    assert outcome(over, [over]) == ([], "HeaderCountExceeded")
    assert outcome(over, bytewise(over)) == ([], "HeaderCountExceeded")


def test_an_unfinished_header_block_is_bounded_by_the_frame_limit() -> None:
    # Each line within max_header_line and their count within max_headers, the block still
    # grew to max_headers * max_header_line octets, past max_frame.
    limits = Limits(max_headers=1_000, max_header_line=40, max_body=10, max_frame=120)
    parser = Parser(limits=limits)
    parser.feed(b"SEND\n")  # a command line no command begins with would fail first
    with pytest.raises(FrameTooLarge):
        for _ in range(100):
            parser.feed(b"k:" + b"v" * 30 + b"\n")
            assert parser.buffered <= limits.max_frame + 33


@pytest.mark.parametrize(("data", "statement"), [
    (b"SEND\nk:\xff\n\n\x00", "frames.header-grammar-v10"),
    (b"SE\xffND\n\n\x00", "frames.command-grammar-v10"),
])
def test_octets_that_are_not_utf8_break_the_1_0_grammar(data: bytes, statement: str) -> None:
    # STOMP 1.0 names no encoding (value-encoding.utf8 is a 1.1 statement): its grammar
    # allows US-ASCII CHARs only. Read as UTF-8 (a leniency), invalid octets break it.
    with pytest.raises(EncodingError) as caught:
        Parser(version="1.0").feed(data)
    assert caught.value.statement == statement
    assert Parser(version="1.0").feed(b"SEND\nk:caf\xc3\xa9\n\n\x00")[0].get("k") == "caf\u00e9"


# -- the spec's own example frames ------------------------------------------------------------

def spec_examples(version: str) -> list[bytes]:
    """Indented example frames of the spec text that end in ^@ (the NUL)."""
    text = spec_text(version)
    blocks = re.findall(r"(?:^ {4}\S.*\n(?:^ {4}.*\n|^\s*\n)*)", text, re.M)
    found = []
    for block in blocks:
        body = "\n".join(line[4:] for line in block.rstrip().split("\n"))
        if "^@" in body and re.match(r"[A-Z]+\n", body):
            found.append(body.replace("^@", "\x00").encode())
    return found


def test_spec_example_frames_parse_as_the_spec_says() -> None:
    examples = spec_examples("1.2")
    assert len(examples) >= 15
    for data in examples:
        (frame,) = [e for e in Parser(strict=False).feed(data) if isinstance(e, Frame)]
        statements = [v.statement for v in frame.violations]
        # The overview's placeholder 'COMMAND' (with a body) is the only example outside
        # the grammar.
        assert statements == (["frames.command-grammar", "body.forbidden-frames"]
                              if frame.command == "COMMAND" else [])
        if not statements:
            assert encode(frame, content_length=False) == data
    error = next(d for d in examples if b"content-length:170" in d)
    (frame,) = Parser().feed(error)
    assert len(frame.body) == 170 and frame.body.endswith(b"propagation.\n")
    message = next(d for d in examples if b"foo:World" in d)
    assert Parser().feed(message)[0].get("foo") == "World"


# -- the encoder -----------------------------------------------------------------------------

def test_encoder_refuses_what_the_version_cannot_carry() -> None:
    from conformance.codec import LocalProtocolError
    with pytest.raises(LocalProtocolError):
        encode(Frame("SUBSCRIBE", {"id": "0"}, b"body"))
    with pytest.raises(LocalProtocolError):
        encode(Frame("SEND", {"k": "v"}), version="1.1", eol=b"\r\n")
    with pytest.raises(LocalProtocolError):
        encode(Frame("CONNECT", {"passcode": "a\nb"}))
    with pytest.raises(LocalProtocolError):
        encode(Frame("SEND", {"k": "v"}, b"a\x00b"), content_length=False)
    with pytest.raises(LocalProtocolError):
        encode(Frame("SEND", {"k": "a\nb"}), version="1.0")


def test_encoder_escapes_per_version_and_adds_content_length() -> None:
    frame = Frame("SEND", {"a:b": "c\\d\r\n"}, b"x")
    assert encode(frame) == b"SEND\na\\cb:c\\\\d\\r\\n\ncontent-length:1\n\nx\x00"
    assert encode(frame, version="1.1") == b"SEND\na\\cb:c\\\\d\r\\n\ncontent-length:1\n\nx\x00"
    assert encode(Frame("DISCONNECT"), eol=b"\r\n") == b"DISCONNECT\r\n\r\n\x00"
    assert encode(Frame("SEND", {"content-length": "1"}, b"x")).count(b"content-length") == 1


def test_encode_raw_writes_the_bytes_it_is_given() -> None:
    raw = encode_raw("SEND", [("destination", "/q"), b"bad line", ("k", "\\t")], b"body",
                     content_length=-1, nul=b"")
    assert raw == b"SEND\ncontent-length:-1\ndestination:/q\nbad line\nk:\\t\n\nbody"
