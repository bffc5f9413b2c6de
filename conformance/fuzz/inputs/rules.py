"""Whether an input is what it says it is, judged without a broker: a mutated input breaks
the rule its mutation names, a valid input breaks none. The minimiser keeps only
candidates that pass (so a reproducer never shrinks into a different input), and the tests
hold every mutation to it.

- grammar mutations: the project's strict parser refuses the bytes naming that very
  statement, and its observing parser reads them as whole frames (a reproducer cut in the
  middle of a frame would only show a broker waiting for the rest);
- limit mutations: the parser with the reference broker's limits refuses them with a
  LimitExceeded;
- session mutations: the frames parse, and a model of the session finds the rule broken
  (a frame before CONNECT, an ACK with no message to acknowledge, a required header
  missing, an unknown transaction, a handshake header that breaks its rule).
"""

from __future__ import annotations

from collections.abc import Callable

from conformance.broker import BrokerConfig
from conformance.codec import Frame, LimitExceeded, Parser, ProtocolViolation, StompError
from conformance.fuzz.inputs.expected import deliveries, frames_of
from conformance.fuzz.inputs.fuzz_input import Expect, FuzzInput
from conformance.fuzz.inputs.mutations import MUTATIONS
from conformance.spec.grammar import (
    CLIENT_REQUIRED_HEADERS,
    HEART_BEAT,
    Version,
    negotiate,
    parse_accept_version,
)

_BROKER_LIMITS = BrokerConfig().limits


def refusal(fuzz: FuzzInput) -> str | None:
    """The statement the project's strict parser names in refusing the input's bytes, or
    None when it reads them all as whole frames."""
    parser = Parser(version=fuzz.version, strict=True)
    try:
        parser.feed(fuzz.data)
    except ProtocolViolation as error:
        return error.statement or ""
    except StompError:
        return None
    return None


def beyond_limits(fuzz: FuzzInput) -> bool:
    """True when the bytes go beyond the reference broker's limits."""
    parser = Parser(version=fuzz.version, strict=False, limits=_BROKER_LIMITS)
    try:
        parser.feed(fuzz.data)
    except LimitExceeded:
        return True
    except StompError:
        return False
    return False


def missing_header(frame: Frame, version: Version) -> str | None:
    """The statement of a header `frame` must carry and does not (None: it has them all)."""
    required = CLIENT_REQUIRED_HEADERS.get(frame.command, {}).get(version, ())
    for name, statement in required:
        if name in frame:
            continue
        if frame.command == "UNSUBSCRIBE" and version == "1.0" and "id" in frame:
            continue  # 1.0: id or destination
        return statement
    return None


def _frame_before_connect(fuzz: FuzzInput, frames: list[Frame]) -> bool:
    return fuzz.connect is None and bool(frames) and \
        frames[0].command not in ("CONNECT", "STOMP")


def _bad_heart_beat(fuzz: FuzzInput, frames: list[Frame]) -> bool:
    value = dict(fuzz.connect_headers).get("heart-beat")
    return value is not None and HEART_BEAT.match(value) is None


def _no_common_version(fuzz: FuzzInput, frames: list[Frame]) -> bool:
    value = dict(fuzz.connect_headers).get("accept-version")
    return value is not None and negotiate(parse_accept_version(value)) is None


def _ack_unknown_id(fuzz: FuzzInput, frames: list[Frame]) -> bool:
    """An ACK or NACK on a connection no message can have reached before it."""
    return any(f.command in ("ACK", "NACK") and not deliveries(frames[:i])
               for i, f in enumerate(frames))


def _missing_required_header(fuzz: FuzzInput, frames: list[Frame]) -> bool:
    return any(missing_header(f, fuzz.version) == fuzz.statement for f in frames)


def _unknown_transaction(fuzz: FuzzInput, frames: list[Frame]) -> bool:
    begun: set[str] = set()
    for frame in frames:
        transaction = frame.get("transaction")
        if frame.command == "BEGIN" and transaction is not None:
            begun.add(transaction)
        elif frame.command in ("COMMIT", "ABORT"):
            if transaction not in begun:
                return True
            begun.discard(transaction)
    return False


_SESSION: dict[str, Callable[[FuzzInput, list[Frame]], bool]] = {
    "frame-before-connect": _frame_before_connect,
    "bad-heart-beat": _bad_heart_beat,
    "no-common-version": _no_common_version,
    "ack-unknown-id": _ack_unknown_id,
    "missing-required-header": _missing_required_header,
    "unknown-transaction": _unknown_transaction,
}


def breaks_its_rule(fuzz: FuzzInput) -> bool:
    """True when a mutated input breaks the rule its mutation names (see the module)."""
    mutation = MUTATIONS.get(fuzz.mutation)
    if mutation is None:
        return False
    if mutation.layer == "grammar":  # refused, and made of whole frames nonetheless
        return refusal(fuzz) == fuzz.statement and frames_of(fuzz) is not None
    if mutation.layer == "limit":
        return beyond_limits(fuzz)
    frames = frames_of(fuzz, strict=True)
    if frames is None:
        return False
    if mutation.name != "missing-required-header" and any(
            missing_header(f, fuzz.version) is not None for f in frames):
        return False  # one rule broken, not that one and another
    return _SESSION[mutation.name](fuzz, frames)


def well_formed(fuzz: FuzzInput) -> bool:
    """True when an input breaks no rule the fuzzer knows: the strict parser reads it all,
    every frame has its required headers, what it ends (a subscription, a transaction)
    exists, and its last frame asks the input's receipt."""
    frames = frames_of(fuzz, strict=True)
    if not frames or frames[-1].get("receipt") != fuzz.receipt:
        return False
    subscriptions: dict[str, str] = {}  # id (or destination) -> destination
    transactions: set[str] = set()
    for frame in frames:
        if missing_header(frame, fuzz.version) is not None:
            return False
        command, transaction = frame.command, frame.get("transaction")
        if command in ("CONNECT", "STOMP"):
            return False
        if command == "SUBSCRIBE":
            destination = frame.get("destination") or ""
            subscriptions[frame.get("id") or destination] = destination
        elif command == "UNSUBSCRIBE":
            key = frame.get("id")
            if key is None:  # 1.0: by destination
                key = next((k for k, d in subscriptions.items()
                            if d == frame.get("destination")), None)
            if key not in subscriptions:
                return False
            del subscriptions[key]
        elif command == "BEGIN":
            transactions.add(transaction or "")
        elif command in ("COMMIT", "ABORT"):
            if transaction not in transactions:
                return False
            transactions.discard(transaction or "")
        elif command in ("SEND", "ACK", "NACK") and transaction is not None:
            if transaction not in transactions:
                return False
        if command in ("ACK", "NACK"):
            return False  # nothing a valid input sends: no message id is known before
    return True


def is_what_it_says(fuzz: FuzzInput) -> bool:
    """Valid inputs are well-formed, mutated ones break their rule and still ask their
    receipt (without it a broker that accepts the input has nothing to answer, and the
    exchange could only end at the deadline)."""
    if fuzz.expect is Expect.VALID:
        return well_formed(fuzz)
    return b"receipt:" + fuzz.receipt.encode() in fuzz.data and breaks_its_rule(fuzz)
