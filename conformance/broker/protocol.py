"""One client connection of the reference broker, sans I/O: the STOMP 1.0-1.2 protocol,
frame by frame (CONNECT itself is answered in connect.py). Every error is an ERROR frame
(with `message`, and `receipt-id` when the offending frame asked for a receipt) followed by
closing the connection.

A BrokerProtocol owns no socket, task or clock of its own (the one it reads, for the
timestamp of server headers, is given). As h11's connection does, it answers each call with
a value its driver (session.py) carries out, never with flags the driver writes back:
`receive_data` (what the client sent), `deliver` and `slow` (what the store gives the
connection) and `timed_out` (the driver's clocks) return the actions to take, in order:
`Send` the octets of frames, start `Heartbeats`, `Close` once what is sent is sent. What it
reads of a connection is state the driver may look at (`connected`, `closing`, `buffered`,
`pending`), and the frames it receives it leaves as they are. Messages reach other
connections through the shared Store, which hands them to each subscription's Consumer (the
driver of that connection, which has its BrokerProtocol render them with `deliver`)."""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

from conformance.broker import incoming
from conformance.broker.config import BrokerConfig
from conformance.broker.connect import answer
from conformance.broker.destinations import Consumer, Message, QueueFull, Store, Subscription
from conformance.broker.faults import Faults
from conformance.broker.outgoing import (
    error_frame,
    frame_bytes,
    message_bytes,
    message_frame,
)
from conformance.broker.receipts import Receipts
from conformance.codec import Frame, Heartbeat, Parser, StompError
from conformance.spec.grammar import ACK_MODES, CLIENT_COMMANDS

#: headers of SEND that are the broker's business, not the message's
TRANSPORT_HEADERS = frozenset({"destination", "receipt", "transaction", "content-length"})


@dataclass(frozen=True, slots=True)
class Send:
    """Write these frames' octets, in order (over WebSocket, a message each)."""

    frames: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class Heartbeats:
    """The session's heart-beats: send an EOL after `send_every` seconds without writing
    (0: none), and count the client's as missed after `expect_within` seconds without
    reading (0: none expected)."""

    send_every: float
    expect_within: float


@dataclass(frozen=True, slots=True)
class Close:
    """Close the connection once what is to be sent is sent; nothing more is written."""

    why: str


Action = Send | Heartbeats | Close


class Refused(Exception):
    """A frame the broker answers with ERROR then close."""


class UnknownAck(Refused):
    """An ACK or NACK naming no message the connection holds unacknowledged."""


class BrokerProtocol:
    def __init__(self, config: BrokerConfig, faults: Faults, store: Store, consumer: Consumer,
                 id: str, *, clock: Callable[[], float] = time.time,
                 versions: tuple[str, ...] | None = None) -> None:
        """`consumer` stands for this connection in its subscriptions; `id` names it
        (CONNECTED's session header, ack ids); `clock` gives the time of day in seconds;
        `versions` bounds the versions CONNECT may choose (None: the broker's)."""
        self.config, self.faults, self.store = config, faults, store
        self.versions = versions
        self.consumer = consumer
        self.id = id
        self.clock = clock
        self.parser = Parser(version="1.2", strict=False, limits=config.limits,
                             content_length=not faults.ignore_content_length)
        self.version = "1.2"
        self.connected = False
        #: the connection is over once what is to send is sent; nothing more is written
        self.closing = False
        self.subscriptions: dict[str, Subscription] = {}
        self.transactions: dict[str, list[Callable[[], None]]] = {}
        #: transaction -> octets of its SENDs the store holds until COMMIT or ABORT
        self._held: dict[str, int] = {}
        self._deferred = 0  # frames kept by open transactions
        self._acks = itertools.count(1)
        self.receipts = Receipts(faults)
        #: what the next answer holds: frames to send (and their octets), the heart-beats
        #: to start, why the connection closes. A delivery the store makes to this
        #: connection while it handles a frame answers with what is to send so far, so
        #: that everything goes out in the order it was made.
        self._out: list[bytes] = []
        self.pending = 0
        self._beats: Heartbeats | None = None
        self._closed = ""

    # -- in and out ---------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Action]:
        """What to do about what the client sent (nothing, once closing)."""
        if self.closing:
            return []
        self._receive(data)
        return self._answer()

    def _receive(self, data: bytes) -> None:
        try:
            events = self.parser.feed(data)
        except StompError as problem:
            for event in getattr(problem, "events", []):
                self.handle(event)
                if self.closing:
                    return
            if self.faults.limit_close_without_error:
                self._close(f"frame refused: {problem.message}")
                return
            self.error(f"frame refused: {problem.message}", detail=str(problem))
            if not self.closing:  # error-without-close: read on, from a fresh parser
                self.parser = Parser(version=self.parser.version, strict=False,
                                     limits=self.config.limits)
            return
        for event in events:
            self.handle(event)
            if self.closing:
                return

    def _answer(self) -> list[Action]:
        """What is to do since the last answer."""
        actions: list[Action] = []
        if self._out:
            actions.append(Send(tuple(self._out)))
            self._out, self.pending = [], 0
        if self._beats is not None:
            actions.append(self._beats)
            self._beats = None
        if self._closed:
            actions.append(Close(self._closed))
            self._closed = ""
        return actions

    @property
    def buffered(self) -> int:
        """Octets received of a frame not yet complete."""
        return self.parser.buffered

    def _emit(self, data: bytes) -> None:
        self._out.append(data)
        self.pending += len(data)

    def write(self, frame: Frame) -> None:
        if not self.closing:
            self._emit(frame_bytes(frame, self.version, self.faults))

    def _close(self, why: str) -> None:
        if not self.closing:
            self.closing = True
            self._closed = why

    def error(self, message: str, frame: Frame | None = None, detail: str = "") -> None:
        """ERROR, then close (unless the error-without-close fault is on)."""
        self.write(error_frame(message, frame, detail, self.faults))
        if not self.faults.error_without_close:
            self._close(message)

    def timed_out(self, why: str) -> list[Action]:
        """The driver's clock ran out (no CONNECT, a frame too slow, a missed heart-beat,
        an idle connection): ERROR saying `why`, then close."""
        self.error(why)
        return self._answer()

    # -- what the store gives this connection ---------------------------------------------------

    def deliver(self, subscription: Subscription, message: Message) -> list[Action]:
        """MESSAGE of `message` to `subscription`, one of this connection's."""
        if self.closing:
            return []
        ack = None
        if subscription.ack != "auto":
            ack = f"ID:{self.id}:{next(self._acks)}" if self.config.colon_ids \
                else f"{self.id}-{next(self._acks)}"
        if self.faults.keeps_unacked(subscription.ack, self.version):
            subscription.unacked[ack or f"auto-{next(self._acks)}"] = message
        data = None if self.faults.bends_to(subscription.destination) else message_bytes(
            subscription, message, ack, self.version, self.config.colon_ids)  # type: ignore[arg-type]
        if data is None:
            self.write(message_frame(subscription, message, ack, self.version, self.faults))
        else:
            self._emit(data)
        return self._answer()

    def slow(self, subscription: Subscription) -> list[Action]:
        """A topic subscriber without room: the broker will not buffer for it."""
        self.write(Frame("ERROR", [("message", f"slow consumer: subscription "
                                               f"{subscription.id!r} fell too far behind"),
                                   ("content-type", "text/plain")], b"slow consumer"))
        self._close("slow consumer")
        return self._answer()

    def resume(self) -> None:
        """The client has read what was written: give its queues another turn (deliveries
        come through the consumers, this one's among them)."""
        mine = {s.destination for s in self.subscriptions.values()}
        self.store.dispatch_all(lambda d: d.name in mine)

    def end(self) -> None:
        """The connection is over: abort transactions, give back unacknowledged messages."""
        self.closing = True
        self._out, self.pending, self._closed = [], 0, ""
        for name in list(self.transactions):
            self._end_transaction(name, commit=self.faults.no_implicit_abort)
        requeue = not self.faults.no_redelivery
        for subscription in self.subscriptions.values():
            self.store.unsubscribe(subscription, requeue=requeue)
        self.subscriptions.clear()

    # -- frames ---------------------------------------------------------------------------

    def handle(self, event: Frame | Heartbeat) -> None:
        faults = self.faults
        if isinstance(event, Heartbeat):
            if event.eol == b"\r\n" and faults.crlf_heartbeat_refused:
                self.error("CR LF is not an EOL")
            return
        frames = [event]
        if faults.bends_incoming:  # the frames a defect makes of it, in their order
            bent = incoming.bend(faults, event, self.version, self.parser.version)
            if isinstance(bent, str):
                self.error(bent, event)
                return
            frames = bent
        for frame in frames:
            if not self.closing:
                self._act_on(frame)

    def _act_on(self, frame: Frame) -> None:
        faults = self.faults
        if self.connected and frame.command not in CLIENT_COMMANDS and \
                self.config.unknown_command == "ignore":
            return  # a frame not in the client's list: the ERROR is a MAY (1.1, 1.2)
        if frame.violations:
            problems = [v for v in frame.violations
                        if not incoming.excused(faults, v.statement)]
            if problems:
                self.error(f"malformed frame: {problems[0].message}", frame,
                           "\n".join(str(p) for p in problems))
                return
        command = frame.command
        if command in ("CONNECT", "STOMP"):
            self.connect(frame)
            return
        if not self.connected and not faults.accept_frames_before_connect:
            self.error(f"{command} before CONNECT", frame)
            return
        handler = HANDLERS.get(command) if command in CLIENT_COMMANDS else None
        if handler is None:
            self.error(f"unknown command {command[:40]!r}", frame)
            return
        try:
            handler(self, frame)
        except (Refused, QueueFull) as refused:
            if isinstance(refused, UnknownAck) and faults.unknown_ack_closed_silently:
                self._close(str(refused))  # no ERROR says why
            else:
                self.error(str(refused), frame)
            return
        for receipt in self.receipts.after(frame, self.version):
            self.write(receipt)
        if command == "DISCONNECT":
            self._close("DISCONNECT")

    def connect(self, frame: Frame) -> None:
        """Carry out connect.py's answer to CONNECT (or STOMP)."""
        if self.connected:
            self.error("a second CONNECT on one connection", frame)
            return
        done = answer(self.config, self.faults, frame, self.id, self.versions)
        if done.version is not None:
            self.version = done.version
        if done.parser_version is not None:
            self.parser.version = done.parser_version  # type: ignore[assignment]
        if done.refused:
            self.error(done.refused, frame)
        if done.connected:
            self.connected = True
        for reply in done.frames:
            self.write(reply)
        if done.close:
            self._close(done.close)
        if done.connected and (done.beat or done.expect_every):
            tolerance = 0.9 if self.faults.heartbeat_no_tolerance else \
                self.config.heartbeat_tolerance
            self._beats = Heartbeats(done.send_every if done.beat else 0.0,
                                     done.expect_every * tolerance)

    # -- the frames of a connected session ---------------------------------------------------

    def _required(self, frame: Frame, name: str) -> str:
        value = frame.get(name)
        if value is None:
            raise Refused(f"{frame.command} without the required {name!r} header")
        return value

    def _transaction(self, frame: Frame) -> str | None:
        """The open transaction the frame names, or None for a frame to act on now."""
        name = frame.get("transaction")
        if name is None or self.faults.ignore_transactions:
            return None
        if name not in self.transactions:
            raise Refused(f"unknown transaction {name!r}")
        return name

    def _in_transaction(self, frame: Frame, action: Callable[[], None]) -> None:
        name = self._transaction(frame)
        if name is None:
            action()
        else:
            self._defer(name, action)

    def _defer(self, name: str, action: Callable[[], None], held: int = 0) -> None:
        """Keep `action` for COMMIT; the store holds a SEND's `held` octets till then."""
        if self._deferred >= self.config.max_transaction_frames:
            raise Refused(f"more than {self.config.max_transaction_frames} frames in open "
                          "transactions")
        if held:
            self.store.hold(held)
            self._held[name] = self._held.get(name, 0) + held
        self._deferred += 1
        self.transactions[name].append(action)

    def send(self, frame: Frame) -> None:
        destination = self._required(frame, "destination")
        if not destination.startswith(("/queue/", "/topic/")):
            raise Refused(f"unknown destination {destination[:60]!r}: use /queue/NAME or "
                          "/topic/NAME")
        store = self.store
        headers = [(k, v) for k, v in frame.headers if k not in TRANSPORT_HEADERS]
        if self.config.server_headers:  # as ActiveMQ adds them; the sender's own win
            given = {k for k, _ in headers}
            headers += [(k, v) for k, v in (("expires", "0"), ("priority", "4"), (
                "timestamp", str(int(self.clock() * 1000)))) if k not in given]
        message = Message(store.message_id(), destination, headers, frame.body, frame.size)
        name = self._transaction(frame)
        if name is None:
            store.send(destination, message)
        else:
            self._defer(name, functools.partial(store.send, destination, message, held=True),
                        message.size)

    def subscribe(self, frame: Frame) -> None:
        destination = self._required(frame, "destination")
        if self.version == "1.0":
            sub_id = frame.get("id") or destination
        else:
            sub_id = self._required(frame, "id")
        if sub_id in self.subscriptions:
            raise Refused(f"subscription id {sub_id!r} is already in use on this connection")
        ack = frame.get("ack", "auto") or "auto"
        if ack not in ACK_MODES[self.version]:  # type: ignore[index]
            raise Refused(f"ack mode {ack!r} is not one of "
                          f"{', '.join(sorted(ACK_MODES[self.version]))}")  # type: ignore[index]
        if not destination.startswith(("/queue/", "/topic/")):
            raise Refused(f"unknown destination {destination[:60]!r}")
        if len(self.subscriptions) >= self.config.max_subscriptions:
            raise Refused(f"more than {self.config.max_subscriptions} subscriptions")
        subscription = Subscription(self.consumer, sub_id, destination, ack,
                                    self.config.max_pending)
        self.subscriptions[sub_id] = subscription
        self.store.subscribe(subscription)

    def unsubscribe(self, frame: Frame) -> None:
        sub_id = frame.get("id")
        if sub_id is None and self.version == "1.0":  # 1.0 may name the destination instead
            destination = self._required(frame, "destination")
            chosen = [k for k, v in self.subscriptions.items() if v.destination == destination]
            if not chosen:
                raise Refused(f"no subscription to {destination[:60]!r} on this connection")
        elif sub_id is None:
            raise Refused("UNSUBSCRIBE without the required 'id' header")
        elif sub_id not in self.subscriptions:
            raise Refused(f"no subscription {sub_id!r} on this connection")
        else:
            chosen = [sub_id]
        for key in chosen:
            self.store.unsubscribe(self.subscriptions.pop(key))

    def _find_ack(self, frame: Frame) -> tuple[Subscription, str]:
        """The subscription and ack id an ACK or NACK names, per version."""
        if self.version == "1.2":
            ack_id = self._required(frame, "id")
            for subscription in self.subscriptions.values():
                if ack_id in subscription.unacked:
                    return subscription, ack_id
            raise UnknownAck(f"{frame.command} of unknown or already acknowledged id {ack_id!r}")
        message_id = self._required(frame, "message-id")
        if self.version == "1.1":
            named = self.subscriptions.get(self._required(frame, "subscription"))
            candidates = [named] if named else []
        else:
            candidates = list(self.subscriptions.values())
        for subscription in candidates:
            for ack_id, message in subscription.unacked.items():
                if message.id == message_id:
                    return subscription, ack_id
        raise UnknownAck(f"{frame.command} of unknown or already acknowledged message "
                         f"{message_id!r}")

    def _settle(self, subscription: Subscription, ack_id: str, *, requeue: bool,
                nack: bool = False) -> None:
        """ACK (requeue=False) or NACK one message, or, in client mode, every message of the
        subscription up to it."""
        if ack_id not in subscription.unacked:
            return  # settled meanwhile (a transaction's frames run at COMMIT)
        wide = nack and self.faults.nack_settles_connection
        cumulative = subscription.ack == "client" or self.faults.individual_ack_cumulative \
            or wide
        scope = list(self.subscriptions.values()) \
            if self.faults.cumulative_ack_crosses_subscriptions or wide else [subscription]
        settled = []
        if cumulative:
            target = subscription.unacked[ack_id]
            for sub in scope:
                for key in list(sub.unacked):
                    message = sub.unacked.pop(key)
                    settled.append((sub, message))
                    if message is target:
                        break
        else:
            settled.append((subscription, subscription.unacked.pop(ack_id)))
        store = self.store
        for sub, message in settled:
            if requeue:
                store.destination(sub.destination).requeue([message])
        store.dispatch_all()

    def ack(self, frame: Frame) -> None:
        subscription, ack_id = self._find_ack(frame)
        if self.faults.ack_v10_ignored and self.version == "1.0":
            return
        self._in_transaction(frame, lambda: self._settle(subscription, ack_id, requeue=False))

    def nack(self, frame: Frame) -> None:
        if self.version == "1.0":
            raise Refused("NACK is not part of STOMP 1.0")
        subscription, ack_id = self._find_ack(frame)
        requeue = self.config.nack == "redeliver"
        self._in_transaction(frame, lambda: self._settle(subscription, ack_id, requeue=requeue,
                                                         nack=True))

    def begin(self, frame: Frame) -> None:
        name = self._required(frame, "transaction")
        if name in self.transactions:
            raise Refused(f"transaction {name!r} is already open on this connection")
        if len(self.transactions) >= self.config.max_transactions:
            raise Refused(f"more than {self.config.max_transactions} open transactions")
        self.transactions[name] = []

    def _finish(self, frame: Frame, *, commit: bool) -> None:
        name = self._required(frame, "transaction")
        if name not in self.transactions:
            if self.faults.accept_unknown_transaction:
                return
            raise Refused(f"unknown transaction {name!r}")
        self._end_transaction(name, commit=commit)

    def _end_transaction(self, name: str, *, commit: bool) -> None:
        """Run an open transaction's actions, or drop them and what the store held for it."""
        actions = self.transactions.pop(name)
        self._deferred -= len(actions)
        held = self._held.pop(name, 0)
        if commit:  # its SENDs hand what the store held to their destinations
            for action in actions:
                action()
        else:
            self.store.release(held)

    def commit(self, frame: Frame) -> None:
        self._finish(frame, commit=True)

    def abort(self, frame: Frame) -> None:
        self._finish(frame, commit=False)

    def disconnect(self, frame: Frame) -> None:
        """Nothing to do here: open transactions are aborted when the connection ends."""


HANDLERS: dict[str, Callable[[BrokerProtocol, Frame], None]] = {
    "SEND": BrokerProtocol.send, "SUBSCRIBE": BrokerProtocol.subscribe,
    "UNSUBSCRIBE": BrokerProtocol.unsubscribe, "ACK": BrokerProtocol.ack,
    "NACK": BrokerProtocol.nack, "BEGIN": BrokerProtocol.begin,
    "COMMIT": BrokerProtocol.commit, "ABORT": BrokerProtocol.abort,
    "DISCONNECT": BrokerProtocol.disconnect,
}
