"""Inputs that each break exactly one rule, and name it.

A mutation is a named way to break one rule of the grammar or one statement of the spec:
its `rule` is the statement id in 1.2 terms (`statement_id` gives each version's wording).
Three layers say who can tell the rule is broken:
- grammar: our strict parser refuses the bytes, naming that very statement;
- limit: the bytes go beyond the reference broker's limits (size-limits.*); a broker MAY
  have no such limit, so accepting them is no fault, but a silent close is;
- session: the frames are well-formed and the session breaks the rule (a frame before
  CONNECT, an ACK of an id never given, a missing required header, a bad heart-beat).

Each broken frame is preceded by a few well-formed frames (that answer nothing), asks a
RECEIPT where it can (so that a broker accepting it says so at once) and is cut into writes
like any other input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from conformance.codec import Frame, encode, encode_raw
from conformance.fuzz.inputs.choices import Choices
from conformance.fuzz.inputs.fuzz_input import Expect, FuzzInput
from conformance.fuzz.inputs.wellformed import (
    COMMANDS_BY_VERSION,
    headers_for,
    segment,
    session,
    tag,
    topic,
    valid_input,
    write,
)
from conformance.runner.results import Outcome
from conformance.spec import statement_id
from conformance.spec.grammar import CLIENT_REQUIRED_HEADERS, VERSIONS, Version

Layer = Literal["grammar", "limit", "session"]
Header = tuple[str | bytes, str | bytes] | bytes


@dataclass(frozen=True, slots=True)
class Broken:
    """What a mutation wrote: the bytes after the handshake, the handshake's own headers,
    and the statement when it depends on what was drawn (else the mutation's rule)."""

    data: bytes
    connect: str | None = "CONNECT"
    connect_headers: tuple[tuple[str, str], ...] = ()
    rule: str | None = None


Build = Callable[[Choices, Version, str], Broken]


@dataclass(frozen=True, slots=True)
class Mutation:
    name: str
    rule: str
    layer: Layer
    versions: tuple[Version, ...]
    build: Build
    #: the grade of a broker that accepts the input (RECEIPT, no ERROR): failed where the
    #: spec makes refusing it the server's duty, informational where the rule binds the
    #: client alone (the catalogue's cases grade the same inputs the same way)
    accepted: Outcome = Outcome.INFORMATIONAL
    #: rules (1.2 ids) whose broken input a broker may take all the same: informational
    taken_open: frozenset[str] = frozenset()
    #: how often it is drawn, relative to the others
    weight: int = 2


def _carrier(c: Choices, version: Version, name: str, *,
             commands: Sequence[str] = ("SEND", "SUBSCRIBE", "BEGIN")
             ) -> tuple[str, list[Header], bytes]:
    """A well-formed frame to break: command, headers (written as given) and body; it
    asks the receipt fz-NAME."""
    command = c.pick(commands)
    headers, body = headers_for(c, command, version, name)
    # Written as given: the application's headers (which may need escaping) stay out.
    plain: list[Header] = [(k, v) for k, v in headers if not k.startswith("x-fz")]
    plain.append(("receipt", f"fz-{name}"))
    return command, plain, body.replace(b"\x00", b"")


def _insert(c: Choices, headers: list[Header], line: Header) -> list[Header]:
    at = c.below(len(headers) + 1)
    return [*headers[:at], line, *headers[at:]]


def undefined_escape(c: Choices, version: Version, name: str) -> Broken:
    command, headers, body = _carrier(c, version, name)
    codes = ("t", "x", "0", " ", "a", "\\\\q") + (("r",) if version == "1.1" else ())
    bad = "\\" + c.pick((*codes, ""))  # "": a lone backslash ending the text
    line = ("x-fz" + bad, "v") if c.flag() else ("x-fz", "a" + bad)
    return Broken(encode_raw(command, _insert(c, headers, line), body))


def header_without_colon(c: Choices, version: Version, name: str) -> Broken:
    command, headers, body = _carrier(c, version, name)
    line = c.pick((b"x-fz", b"destination", b":fz", b"x fz", b"\xc3\xa9"))
    return Broken(encode_raw(command, _insert(c, headers, line), body))


def unescaped_colon(c: Choices, version: Version, name: str) -> Broken:
    command, headers, body = _carrier(c, version, name)
    line = ("x-fz", c.pick(("a:b", ":", "http://x")))
    return Broken(encode_raw(command, _insert(c, headers, line), body))


def cr_in_header(c: Choices, version: Version, name: str) -> Broken:
    command, headers, body = _carrier(c, version, name)
    line = ("x-fz", c.pick(("a\rb", "\ra", "a\r\rb")))
    return Broken(encode_raw(command, _insert(c, headers, line), body))


def invalid_utf8(c: Choices, version: Version, name: str) -> Broken:
    command, headers, body = _carrier(c, version, name)
    bad = c.pick((b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82"))
    line = b"x-fz:a" + bad if c.flag() else b"x-fz" + bad + b":a"
    return Broken(encode_raw(command, _insert(c, headers, line), body))


def _body(c: Choices) -> bytes:
    """A body without NUL, at least one octet."""
    return c.pick((b"x", b"hello", b"\n", b"\xff" * 3, b"y" * 200))


# A NUL ends each of the three below after the octet that breaks the rule: a broker that
# reads on to the next NUL when content-length is wrong then has a whole frame to refuse.

def content_length_larger(c: Choices, version: Version, name: str) -> Broken:
    # The octet content-length points at is past the body's NUL: one of the X's after it.
    _, headers, _ = _carrier(c, version, name, commands=("SEND",))
    body, more = _body(c), c.between(1, 8)
    return Broken(encode_raw("SEND", headers, body, content_length=len(body) + more,
                             nul=b"\x00" + b"X" * more + b"\x00"))


def content_length_smaller(c: Choices, version: Version, name: str) -> Broken:
    _, headers, _ = _carrier(c, version, name, commands=("SEND",))
    body = _body(c)
    return Broken(encode_raw("SEND", headers, body,
                             content_length=len(body) - c.between(1, len(body))))


def content_length_not_a_number(c: Choices, version: Version, name: str) -> Broken:
    _, headers, _ = _carrier(c, version, name, commands=("SEND",))
    padded = ("5 ", " 5") if version != "1.0" else ()  # 1.0 reads a padded length
    value = c.pick(("-1", "abc", *padded, "+5", "0x10", "", "1e3", "٣", "5,0"))
    return Broken(encode_raw("SEND", headers, _body(c), content_length=value))


def missing_nul(c: Choices, version: Version, name: str) -> Broken:
    _, headers, _ = _carrier(c, version, name, commands=("SEND",))
    body = _body(c)
    return Broken(encode_raw("SEND", headers, body, content_length=len(body),
                             nul=c.pick((b"X", b"\n", b"\xff", b"SEND\n")) + b"\x00"))


def body_on_bodyless_frame(c: Choices, version: Version, name: str) -> Broken:
    command = c.pick(("SUBSCRIBE", "BEGIN", "DISCONNECT", "UNSUBSCRIBE", "COMMIT",
                           "ABORT"))
    prefix = b""
    if command in ("UNSUBSCRIBE", "COMMIT", "ABORT"):  # what it ends must exist
        opener = "SUBSCRIBE" if command == "UNSUBSCRIBE" else "BEGIN"
        prefix = encode(Frame(opener, headers_for(c, opener, version, name)[0]),
                        version=version)
    headers, _ = headers_for(c, command, version, name)
    headers.append(("receipt", f"fz-{name}"))
    body = _body(c)
    length = len(body) if c.flag() else None
    return Broken(prefix + encode_raw(command, headers, body, content_length=length))


def unknown_command(c: Choices, version: Version, name: str) -> Broken:
    _, headers, body = _carrier(c, version, name)
    word = c.pick(("SENDX", "send", "PUBLISH", "HELLO", "SEND ", " SEND", "ACKNOWLEDGE",
                        "S", "CONNECT\x00"))
    return Broken(encode_raw(word, headers, body))


def crlf_before_1_2(c: Choices, version: Version, name: str) -> Broken:
    # Before 1.2 a CR is an octet of its line: the command reads "SEND\r". The blank line
    # is a bare LF, so that the frame ends for a 1.0 or 1.1 parser too.
    command, headers, body = _carrier(c, version, name)
    data = encode_raw(command, headers, body, eol=b"\r\n")
    head = data.index(b"\r\n\r\n")
    return Broken(data[:head] + b"\r\n\n" + data[head + 4:])


def too_many_headers(c: Choices, version: Version, name: str) -> Broken:
    command, headers, body = _carrier(c, version, name)
    extra = [f"x-fz-{i}:v".encode() for i in range(c.between(1001, 1100))]
    return Broken(encode_raw(command, [*headers, *extra], body))


def header_line_too_long(c: Choices, version: Version, name: str) -> Broken:
    command, headers, body = _carrier(c, version, name)
    line = ("x-fz", "v" * (64 * 1024 + c.between(1, 64)))
    return Broken(encode_raw(command, _insert(c, headers, line), body))


def content_length_huge(c: Choices, version: Version, name: str) -> Broken:
    _, headers, _ = _carrier(c, version, name, commands=("SEND",))
    value = c.pick(("2147483648", "4294967296", "9999999999", "18446744073709551616",
                         "99999999999999999999999"))
    return Broken(encode_raw("SEND", headers, _body(c), content_length=value))


def frame_before_connect(c: Choices, version: Version, name: str) -> Broken:
    command, headers, body = _carrier(c, version, name)
    return Broken(encode_raw(command, headers, body), connect=None)


def bad_heart_beat(c: Choices, version: Version, name: str) -> Broken:
    command, headers, body = _carrier(c, version, name)
    value = c.pick(("a,b", "-1,0", "1", "1,2,3", " 1,1", "1,1 ", ",", "1.5,2",
                         "0x1,0", "1;1"))
    return Broken(encode_raw(command, headers, body), connect_headers=(("heart-beat", value),))


def no_common_version(c: Choices, version: Version, name: str) -> Broken:
    command, headers, body = _carrier(c, version, name)
    value = c.pick(("2.0", "9.9", "1.3", "0.9", "1.2.1", "v1.2", "1,2"))
    return Broken(encode_raw(command, headers, body),
                  connect_headers=(("accept-version", value),))


def ack_unknown_id(c: Choices, version: Version, name: str) -> Broken:
    """An id the broker never gave: on no subscription, or on one of this connection
    that has had no message (a foreign id)."""
    command = "ACK" if version == "1.0" else c.pick(("ACK", "NACK"))
    prefix = b""
    if c.flag():
        prefix = encode(Frame("SUBSCRIBE", [("destination", topic(name)), ("id", f"fz-{name}"),
                                            ("ack", "client")]), version=version)
    unknown = c.pick((f"fz-{name}", "1", "0", "s1-1", "ID:fz-1:1:1:1", "-1"))
    headers, _ = headers_for(c, command, version, name)
    headers = [(k, unknown if k != "subscription" else v) for k, v in headers]
    headers.append(("receipt", f"fz-{name}"))
    rule = CLIENT_REQUIRED_HEADERS[command][version][0][1]
    return Broken(prefix + encode(Frame(command, headers), version=version), rule=rule)


def missing_required_header(c: Choices, version: Version, name: str) -> Broken:
    commands = [c for c in COMMANDS_BY_VERSION[version]
                if CLIENT_REQUIRED_HEADERS[c][version] and c not in ("CONNECT", "STOMP")]
    command = c.pick(commands)
    required = CLIENT_REQUIRED_HEADERS[command][version]
    dropped, rule = c.pick(required)
    headers, body = headers_for(c, command, version, name)
    # 1.0's UNSUBSCRIBE takes id or destination: both go.
    gone = {dropped, "id"} if command == "UNSUBSCRIBE" and version == "1.0" else {dropped}
    headers = [(k, v) for k, v in headers if k not in gone]
    headers.append(("receipt", f"fz-{name}"))
    return Broken(encode(Frame(command, headers, body.replace(b"\x00", b"")), version=version),
                  rule=rule)


def unknown_transaction(c: Choices, version: Version, name: str) -> Broken:
    command = c.pick(("COMMIT", "ABORT"))
    headers = [("transaction", f"fz-never-{name}"), ("receipt", f"fz-{name}")]
    return Broken(encode(Frame(command, headers), version=version),
                  rule=CLIENT_REQUIRED_HEADERS[command][version][0][1])


_ESCAPING: tuple[Version, ...] = ("1.1", "1.2")
_FAILED = Outcome.FAILED

MUTATIONS: dict[str, Mutation] = {m.name: m for m in (
    Mutation("undefined-escape", "value-encoding.undefined-escape-fatal", "grammar",
             _ESCAPING, undefined_escape, accepted=_FAILED, weight=4),
    Mutation("header-without-colon", "frames.header-grammar", "grammar", VERSIONS,
             header_without_colon),
    Mutation("unescaped-colon", "frames.header-grammar", "grammar", _ESCAPING,
             unescaped_colon),
    Mutation("cr-in-header", "frames.header-grammar", "grammar", ("1.2",), cr_in_header),
    Mutation("invalid-utf8", "value-encoding.utf8", "grammar", _ESCAPING, invalid_utf8),
    Mutation("content-length-larger", "content-length.nul-terminated", "grammar", VERSIONS,
             content_length_larger, accepted=_FAILED, weight=3),
    Mutation("content-length-smaller", "content-length.nul-terminated", "grammar", VERSIONS,
             content_length_smaller, accepted=_FAILED, weight=3),
    Mutation("content-length-not-a-number", "content-length.read-octets", "grammar", VERSIONS,
             content_length_not_a_number),
    Mutation("missing-nul", "content-length.nul-terminated", "grammar", VERSIONS, missing_nul,
             accepted=_FAILED),
    Mutation("body-on-bodyless-frame", "body.forbidden-frames", "grammar", _ESCAPING,
             body_on_bodyless_frame, weight=3),
    Mutation("unknown-command", "frames.command-grammar", "grammar", VERSIONS, unknown_command),
    Mutation("crlf-before-1.2", "frames.command-grammar", "grammar", ("1.0", "1.1"),
             crlf_before_1_2),
    Mutation("too-many-headers", "size-limits.error-then-close", "limit", VERSIONS,
             too_many_headers, weight=1),
    Mutation("header-line-too-long", "size-limits.error-then-close", "limit", VERSIONS,
             header_line_too_long, weight=1),
    Mutation("content-length-huge", "size-limits.error-then-close", "limit", VERSIONS,
             content_length_huge, weight=1),
    Mutation("frame-before-connect", "connecting.connected-response", "session", VERSIONS,
             frame_before_connect, accepted=_FAILED),
    Mutation("bad-heart-beat", "heart-beating.header-format", "session", _ESCAPING,
             bad_heart_beat),
    Mutation("no-common-version", "negotiation.no-common-version-error", "session",
             _ESCAPING, no_common_version, accepted=_FAILED),
    Mutation("ack-unknown-id", "ack.id-required", "session", VERSIONS, ack_unknown_id),
    # a SUBSCRIBE without id can still be served (the broker names the subscription), as
    # errors-and-lifecycle.subscribe-without-id grades it; one without destination cannot
    Mutation("missing-required-header", "send.destination-required", "session", VERSIONS,
             missing_required_header, accepted=_FAILED, weight=3,
             taken_open=frozenset({"subscribe-id.required"})),
    Mutation("unknown-transaction", "commit.transaction-required", "session", VERSIONS,
             unknown_transaction, accepted=_FAILED),
)}


def _prefix(c: Choices, version: Version, name: str) -> bytes:
    """0-2 well-formed frames before the broken one; none of them answers anything."""
    frames = session(c, version, f"{name}-p", steps=c.below(3), deliveries=False)
    return b"".join([write(c, f, version) for f in frames])


def mutated_input(c: Choices, versions: Sequence[Version],
                  weighted: Sequence[Mutation]) -> FuzzInput:
    """An input that breaks one rule (one of `weighted`, each applying to one of
    `versions`), and what the spec requires then: ERROR then close (beyond a limit, a
    RECEIPT will do too)."""
    mutation = c.pick(weighted)
    version = c.pick([v for v in mutation.versions if v in versions])
    name = tag(c)
    broken = mutation.build(c, version, name)
    prefix = _prefix(c, version, name) if broken.connect is not None else b""
    return FuzzInput(
        version=version, chunks=segment(c, prefix + broken.data),
        expect=Expect.LIMIT if mutation.layer == "limit" else Expect.ERROR,
        statement=statement_id(broken.rule or mutation.rule, version),
        mutation=mutation.name, receipt=f"fz-{name}", connect=broken.connect,
        connect_headers=broken.connect_headers)


def weighted(versions: Sequence[Version], names: Sequence[str] | None = None
             ) -> list[Mutation]:
    """The mutations `names` (default all) that apply to one of `versions`, each as many
    times as its weight. ValueError naming the choices for an unknown name."""
    unknown = sorted(set(names or ()) - MUTATIONS.keys())
    if unknown:
        raise ValueError(f"unknown mutation {', '.join(unknown)}: choose from "
                         f"{', '.join(MUTATIONS)}")
    chosen = [m for m in MUTATIONS.values()
              if (names is None or m.name in names) and set(m.versions) & set(versions)]
    if not chosen:
        raise ValueError(f"no mutation applies to STOMP {', '.join(versions)}")
    return [m for m in chosen for _ in range(m.weight)]


def fuzz_input(c: Choices, versions: Sequence[Version], chosen: Sequence[Mutation]) -> FuzzInput:
    """What a campaign sends: a valid session one time in three, else a mutation."""
    return valid_input(c, versions) if c.below(3) == 0 else mutated_input(c, versions, chosen)
