"""What one input's frames make a broker send back: the frames as the project's parser reads
them, and the MESSAGEs a well-formed session must get (a SEND to a destination the same
connection subscribes to, outside a transaction or in one that commits), found by driving
the session model (conformance/spec/session.py) with the frames, so the rule lives once.
The oracle compares each such MESSAGE with its SEND: the body octet for octet, and each
user header (`x-fz...`) with its first value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conformance.codec import Frame, Parser, StompError
from conformance.fuzz.inputs.fuzz_input import FuzzInput
from conformance.fuzz.inputs.wellformed import USER_PREFIX
from conformance.spec import statement_id
from conformance.spec.grammar import ESCAPES, Version
from conformance.spec.session import Model

#: The input's one connection, as the session model names it.
_SLOT = "input"


def frames_of(fuzz: FuzzInput, *, strict: bool = False) -> list[Frame] | None:
    """The frames of the input's bytes as the project's parser reads them in its version;
    None when the parser refuses them (strict) or they end in the middle of a frame."""
    parser = Parser(version=fuzz.version, strict=strict)
    try:
        frames = [e for e in parser.feed(fuzz.data) if isinstance(e, Frame)]
    except StompError:
        return None
    return frames if parser.buffered == 0 else None


@dataclass(frozen=True, slots=True)
class Delivery:
    """A MESSAGE the session must receive: on subscription `key` (its id, or in 1.0 its
    destination when it has no id), with `body` and the user headers of its SEND."""

    key: str
    destination: str
    body: bytes
    #: user headers, first value of each name, in order
    headers: tuple[tuple[str, str], ...]
    #: names given more than once, with every value (to blame the right statement)
    repeated: tuple[tuple[str, tuple[str, ...]], ...] = ()


def deliveries(frames: Sequence[Frame]) -> list[Delivery]:
    """The MESSAGEs a session of `frames` must receive, in the order they became due, as
    the session model (spec/session.py, with topics: the inputs' destinations are topics)
    says; none once it sends DISCONNECT (a RECEIPT for DISCONNECT says the frames arrived,
    not that deliveries left). ACK and NACK settle nothing a topic must deliver."""
    model = Model(topics=True)
    session = model.connect(_SLOT, "")
    numbers: dict[str, int] = {}  # destination -> the model's number for it
    sends: dict[str, Frame] = {}  # the model's name of each message -> its SEND
    out: list[Delivery] = []

    def number(destination: str | None) -> int:
        # a SEND with no destination reaches no subscription: a number none has
        return -1 if destination is None else numbers.setdefault(destination, len(numbers))

    for frame in frames:
        command, transaction = frame.command, frame.get("transaction")
        if command == "SUBSCRIBE":
            key = frame.get("id") or frame.get("destination") or ""
            model.subscribe(_SLOT, key, number(frame.get("destination") or ""),
                            frame.get("ack") or "auto")
        elif command == "UNSUBSCRIBE":
            gone = frame.get("id")
            if gone is None:  # 1.0: by destination
                named = frame.get("destination")
                gone = next((k for k, sub in session.subs.items()
                             if named is not None and sub.queue == numbers.get(named)), "")
            if gone in session.subs:
                model.unsubscribe(_SLOT, gone)
                model.unsubscribed(_SLOT, gone)  # frames are processed in order
        elif command == "BEGIN":
            model.begin(_SLOT, transaction or "")
        elif command in ("COMMIT", "ABORT") and (transaction or "") in session.txs:
            if command == "COMMIT":
                model.commit(_SLOT, transaction or "")
            else:
                model.abort(_SLOT, transaction or "")
        elif command == "SEND":
            name = f"m{len(sends)}"
            sends[name] = frame
            # a SEND in a transaction never begun is processed as if outside one
            held = transaction if transaction is not None and transaction in session.txs \
                else None
            model.send(_SLOT, name, number(frame.get("destination")), held)
        elif command == "DISCONNECT":
            return []
        for message, takers in model.due():  # on topics: one subscription each
            for slot, key in takers:
                model.delivered(slot, key, message.body, ack=None, message_id=None)
                out.append(_delivery(key, sends[message.body]))
    return out


def _delivery(key: str, send: Frame) -> Delivery:
    first: dict[str, str] = {}
    every: dict[str, list[str]] = {}
    for name, value in send.headers:
        if name.startswith(USER_PREFIX):
            first.setdefault(name, value)
            every.setdefault(name, []).append(value)
    repeated = tuple((n, tuple(v)) for n, v in every.items() if len(v) > 1)
    return Delivery(key, send.get("destination") or "", send.body, tuple(first.items()),
                    repeated)


def subscription_of(message: Frame, version: Version) -> str:
    """The key of the subscription a MESSAGE says it is for."""
    if version == "1.0":
        return message.get("subscription") or message.get("destination") or ""
    return message.get("subscription") or ""


def compare(expected: Delivery, message: Frame, version: Version) -> list[tuple[str, str]]:
    """How `message` departs from the delivery it is for: (statement, detail) pairs."""
    found: list[tuple[str, str]] = []
    if message.body != expected.body:
        rule = "content-length.read-octets" if b"\x00" in expected.body else "frames.frame-grammar"
        found.append((statement_id(rule, version),
                      f"MESSAGE body {_short(message.body)} is not the SEND's "
                      f"{_short(expected.body)}"))
    if version == "1.0":  # 1.0 states no rule on user headers
        return found
    got = message.header_map
    repeated = dict(expected.repeated)
    for name, value in expected.headers:
        seen = got.get(name)
        if seen == value:
            continue
        found.append((_blame(name, value, seen, repeated.get(name, ()), got, expected.headers,
                             version),
                      f"user header {name!r}: sent {value!r}, MESSAGE has "
                      f"{'none' if seen is None else repr(seen)}"))
    return found


def _trimmed(text: str) -> set[str]:
    """`text` with spaces (or any white space) taken off one end or both."""
    return {text.strip(" "), text.lstrip(" "), text.rstrip(" "), text.strip(), text.lstrip(),
            text.rstrip()} - {text}


def _blame(name: str, sent: str, seen: str | None, values: tuple[str, ...],
           got: dict[str, str], headers: tuple[tuple[str, str], ...], version: Version) -> str:
    """The statement a changed user header most likely breaks (`headers`: every user header
    sent, first value of each name)."""
    if seen is None:
        if any(other in got for other in _trimmed(name)):  # it came, its name trimmed
            return statement_id("value-encoding.no-trim", version)
        return statement_id("send.user-headers-passed", version)
    if values and seen in values[1:]:
        return statement_id("repeated-headers.first-wins", version)
    if seen in _trimmed(sent) or any(name in _trimmed(other) and seen in {value, *_trimmed(value)}
                                     for other, value in headers):
        # trimmed: the value, or the name of another header that then came first
        return statement_id("value-encoding.no-trim", version)
    special = (*(ESCAPES[version] or {}).values(), "\\")
    if any(ch in name + sent for ch in special):
        return statement_id("value-encoding.decode-escapes", version)
    return statement_id("send.user-headers-passed", version)


def _short(data: bytes) -> str:
    return repr(data[:40]) + ("..." if len(data) > 40 else "")
