"""What one input's frames make a broker send back, by a small model of one session: the
frames as the project's parser reads them, and the MESSAGEs a well-formed session must get
(a SEND to a destination the same connection subscribes to, outside a transaction or in
one that commits). The oracle compares each such MESSAGE with its SEND: the body octet for
octet, and each user header (`x-fz...`) with its first value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conformance.codec import Frame, Parser, StompError
from conformance.fuzz.inputs.model import FuzzInput
from conformance.fuzz.inputs.wellformed import USER_PREFIX
from conformance.spec import statement_id
from conformance.spec.grammar import ESCAPES, Version


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
    """The MESSAGEs a session of `frames` must receive; none once it sends DISCONNECT
    (a RECEIPT for DISCONNECT says the frames arrived, not that deliveries left)."""
    subscriptions: dict[str, str] = {}  # key -> destination
    transactions: dict[str, list[Frame]] = {}
    out: list[Delivery] = []

    def deliver(send: Frame) -> None:
        destination = send.get("destination")
        for key, subscribed in subscriptions.items():
            if subscribed == destination:
                out.append(_delivery(key, send))

    for frame in frames:
        command = frame.command
        if command == "SUBSCRIBE":
            key = frame.get("id") or frame.get("destination") or ""
            subscriptions[key] = frame.get("destination") or ""
        elif command == "UNSUBSCRIBE":
            gone = frame.get("id")
            if gone is None:  # 1.0: by destination
                gone = next((k for k, d in subscriptions.items()
                             if d == frame.get("destination")), "")
            subscriptions.pop(gone, None)
        elif command == "BEGIN":
            transactions[frame.get("transaction") or ""] = []
        elif command in ("COMMIT", "ABORT"):
            held = transactions.pop(frame.get("transaction") or "", [])
            if command == "COMMIT":
                for send in held:
                    deliver(send)
        elif command == "SEND":
            transaction = frame.get("transaction")
            if transaction is not None and transaction in transactions:
                transactions[transaction].append(frame)
            else:
                deliver(frame)
        elif command == "DISCONNECT":
            return []
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
        found.append((_blame(name, value, seen, repeated.get(name, ()), got, version),
                      f"user header {name!r}: sent {value!r}, MESSAGE has "
                      f"{'none' if seen is None else repr(seen)}"))
    return found


def _trimmed(text: str) -> set[str]:
    """`text` with spaces (or any white space) taken off one end or both."""
    return {text.strip(" "), text.lstrip(" "), text.rstrip(" "), text.strip(), text.lstrip(),
            text.rstrip()} - {text}


def _blame(name: str, sent: str, seen: str | None, values: tuple[str, ...],
           got: dict[str, str], version: Version) -> str:
    """The statement a changed user header most likely breaks."""
    if seen is None:
        if any(got.get(other) == sent for other in _trimmed(name)):
            return statement_id("value-encoding.no-trim", version)
        return statement_id("send.user-headers-passed", version)
    if values and seen in values[1:]:
        return statement_id("repeated-headers.first-wins", version)
    if seen in _trimmed(sent):
        return statement_id("value-encoding.no-trim", version)
    special = (*(ESCAPES[version] or {}).values(), "\\")
    if any(ch in name + sent for ch in special):
        return statement_id("value-encoding.decode-escapes", version)
    return statement_id("send.user-headers-passed", version)


def _short(data: bytes) -> str:
    return repr(data[:40]) + ("..." if len(data) > 40 else "")
