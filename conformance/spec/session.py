"""What the spec requires a broker to deliver, as one model of STOMP sessions: the stateful
fuzzer checks a broker against it, and the network fuzzer asks it which MESSAGEs one
well-formed input must get (fuzz/inputs/expected.py). Sans-IO: the caller tells the model
what the client did and what arrived; the model says whether a delivery was allowed and
which deliveries are due.

Destinations are queues (each message goes to one consumer), or with `topics` topics: a
message goes to every subscription of its topic open when it is sent, or when its
transaction commits, once each, and nowhere when there is none; settling a topic's message
changes nothing. A message is in one state:

- HELD: sent in a transaction still open ("any messages sent ... during a transaction will
  be processed atomically"): it must not be delivered until COMMIT.
- QUEUED: it must reach a subscriber of its queue as soon as there is one.
- IN_FLIGHT: delivered to a `client` or `client-individual` subscription, not yet settled:
  it must not be delivered again unless given back.
- CONSUMED: delivered to an `auto` subscription ("the server will assume the client has
  received the message as soon as it sends it"), or ACKed: never delivered again.
- RELEASED: NACKed (the server "can then either send the message to a different client,
  discard it, or put it in a dead letter queue") or its subscription was cancelled: it may be
  delivered again, or not.
- DROPPED: aborted, or sent before CONNECT: it must never be delivered.

A client-mode ACK or NACK settles its message and the earlier unsettled ones of its own
subscription; a client-individual one settles its own message only. When a connection ends,
its open transactions are aborted and its unsettled messages are queued again (with
`redelivery`, what every queue broker does: "the server will assume the message has not
been processed"), else released.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

#: Statement ids are the 1.2 rules; a writer maps them to a version's wording.
ATOMIC = "begin.atomic"
IMPLICIT_ABORT = "begin.implicit-abort"
AUTO = "subscribe-ack.auto-mode"
CUMULATIVE = "subscribe-ack.client-cumulative"
INDIVIDUAL = "subscribe-ack.individual-not-cumulative"
REDELIVER = "subscribe-ack.may-redeliver"
PROCESSED = "receipt.sent-after-processing"
NACK_SCOPE = "nack.scope"
SUBSCRIPTION = "message.id-and-subscription-required"
BEFORE_CONNECT = "connecting.connected-response"

MODES = ("auto", "client", "client-individual")


class State(enum.StrEnum):
    HELD = "held"
    QUEUED = "queued"
    IN_FLIGHT = "in-flight"
    CONSUMED = "consumed"
    RELEASED = "released"
    DROPPED = "dropped"


@dataclass(frozen=True, slots=True)
class Holder:
    """A subscription of one incarnation of a connection slot."""

    slot: str
    incarnation: int
    sub: str


@dataclass(slots=True)
class Message:
    body: str
    queue: int
    state: State
    #: the statements a wrong delivery of it breaks, or a missing one (set with its state)
    why: tuple[str, ...] = ()
    reason: str = ""
    holder: Holder | None = None
    #: what its last delivery carried: ack (1.2), message-id (1.1 ACK and NACK)
    ack: str | None = None
    message_id: str | None = None
    #: the case variable its last delivery's ack id was captured into
    var: str | None = None
    #: the rule of the transaction aborted with an ACK or NACK of its last delivery in it
    rolled_back: str | None = None
    delivered_at: int = -1
    deliveries: int = 0
    #: released by UNSUBSCRIBE on this connection: queued again when the connection ends
    limbo: tuple[str, int] | None = None
    #: on a topic: the (slot, subscription) pairs it must still reach, once each
    copies: list[tuple[str, str]] = field(default_factory=list)


@dataclass(slots=True)
class Subscription:
    id: str
    queue: int
    mode: str
    #: bodies of the messages delivered to it, in order (the scope of a cumulative ACK)
    order: list[str] = field(default_factory=list)
    #: UNSUBSCRIBE sent, its RECEIPT not yet come: deliveries to it are still allowed, and
    #: its unsettled messages may already go elsewhere
    closing: bool = False


@dataclass(frozen=True, slots=True)
class Settle:
    """An ACK or NACK that took effect: what a refused later one is explained by."""

    at: int
    nack: bool
    mode: str
    sub: str
    body: str


@dataclass(slots=True)
class OpenSession:
    slot: str
    incarnation: int
    version: str
    subs: dict[str, Subscription] = field(default_factory=dict)
    #: transaction -> its frames, applied at COMMIT: ("send", body) or ("ack"|"nack", body)
    txs: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    settles: list[Settle] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Problem:
    """A broker behaviour the model does not allow."""

    kind: str
    statements: tuple[str, ...]
    detail: str
    slot: str = ""


class Model:
    def __init__(self, *, queues: int = 2, redelivery: bool = True,
                 topics: bool = False) -> None:
        self.queues = queues
        self.redelivery = redelivery
        #: destinations are topics, not queues (see the module)
        self.topics = topics
        self.sessions: dict[str, OpenSession] = {}
        self.messages: dict[str, Message] = {}
        self.incarnations: dict[str, int] = {}
        self._clock = 0

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    # -- what the client did ----------------------------------------------------------------

    def connect(self, slot: str, version: str) -> OpenSession:
        incarnation = self.incarnations[slot] = self.incarnations.get(slot, 0) + 1
        session = self.sessions[slot] = OpenSession(slot, incarnation, version)
        return session

    def subscribe(self, slot: str, sub: str, queue: int, mode: str) -> None:
        self.sessions[slot].subs[sub] = Subscription(sub, queue, mode)

    def unsubscribe(self, slot: str, sub: str) -> None:
        """UNSUBSCRIBE sent: until its RECEIPT (`unsubscribed`) messages may still come."""
        self.sessions[slot].subs[sub].closing = True

    def unsubscribed(self, slot: str, sub: str) -> None:
        session = self.sessions[slot]
        session.subs.pop(sub)
        for message in self._held_by(session, sub):
            self._release(message, "its subscription was cancelled")
            message.limbo = (slot, session.incarnation)

    def send(self, slot: str, body: str, queue: int, tx: str | None = None) -> Message:
        message = self.messages[body] = Message(body, queue, State.QUEUED, (PROCESSED,),
                                                "sent outside any transaction")
        if tx is not None:
            self._set(message, State.HELD, (ATOMIC,), f"sent in transaction {tx}, not committed")
            self.sessions[slot].txs[tx].append(("send", body))
        else:
            self._publish(message)
        return message

    def refused_send(self, body: str, queue: int) -> Message:
        """A SEND written before CONNECT: the broker must not take it."""
        message = self.messages[body] = Message(body, queue, State.DROPPED, (BEFORE_CONNECT,),
                                                "sent before CONNECT")
        return message

    def begin(self, slot: str, tx: str) -> None:
        self.sessions[slot].txs[tx] = []

    def commit(self, slot: str, tx: str) -> None:
        for kind, body in self.sessions[slot].txs.pop(tx):
            message = self.messages[body]
            if kind == "send":
                self._set(message, State.QUEUED, (ATOMIC,), f"committed in transaction {tx}")
                self._publish(message)
            else:
                self._settle(slot, body, nack=kind == "nack")

    def abort(self, slot: str, tx: str, *, implicit: bool = False) -> None:
        rule = IMPLICIT_ABORT if implicit else ATOMIC
        for kind, body in self.sessions[slot].txs.pop(tx):
            message = self.messages[body]
            if kind == "send":
                how = "left open when its connection ended" if implicit else "aborted"
                self._set(message, State.DROPPED, (rule, ATOMIC),
                          f"sent in transaction {tx}, {how}")
            elif message.state is State.IN_FLIGHT:
                # its ACK or NACK never took effect: a broker that applied it anyway breaks
                # the transaction's rule first
                message.rolled_back = rule

    def ack(self, slot: str, body: str, tx: str | None = None, *, nack: bool = False) -> None:
        if tx is not None:
            self.sessions[slot].txs[tx].append(("nack" if nack else "ack", body))
        else:
            self._settle(slot, body, nack=nack)

    def end(self, slot: str) -> None:
        """The connection is over: DISCONNECT, a close either side, or ERROR."""
        session = self.sessions.get(slot)
        if session is None:
            return
        for tx in list(session.txs):
            self.abort(slot, tx, implicit=True)
        del self.sessions[slot]
        back = State.QUEUED if self.redelivery else State.RELEASED
        for sub in session.subs.values():
            for message in self._held_by(session, sub.id):
                aborted = (message.rolled_back,) if message.rolled_back else ()
                rules = (*aborted, *self._suspects(session, message),
                         CUMULATIVE if sub.mode == "client" else INDIVIDUAL, REDELIVER)
                self._set(message, back, rules, f"unacknowledged on {sub.mode} subscription "
                          f"{sub.id} when its connection ended")
        for message in self.messages.values():
            if message.state is State.RELEASED and message.limbo == (slot, session.incarnation):
                rules = (*self._suspects(session, message), REDELIVER)
                self._set(message, back, rules, "unacknowledged on a cancelled subscription "
                          "when its connection ended")

    # -- what arrived -----------------------------------------------------------------------

    def delivered(self, slot: str, sub_id: str | None, body: str, *, ack: str | None,
                  message_id: str | None) -> Problem | None:
        """A MESSAGE arrived on `slot`: None when the model allows it (and takes it into
        account), else what is wrong with it."""
        session = self.sessions[slot]
        sub = session.subs.get(sub_id or "")
        if sub is None:
            return Problem("wrong-subscription", (SUBSCRIPTION,),
                           f"MESSAGE {body!r} for subscription {sub_id!r}, which is not open "
                           f"on this connection", slot)
        message = self.messages.get(body)
        if message is None:
            return Problem("unknown-message", (SUBSCRIPTION,),
                           f"MESSAGE with a body no client sent ({body[:40]!r})", slot)
        if message.queue != sub.queue:
            return Problem("wrong-destination", (SUBSCRIPTION,),
                           f"MESSAGE {body!r} of queue {message.queue} delivered to "
                           f"subscription {sub.id} of queue {sub.queue}", slot)
        if self.topics:
            return self._copy_delivered(session, sub, message)
        holder = message.holder
        if message.state is State.IN_FLIGHT and holder is not None and \
                holder.slot in self.sessions and \
                self.sessions[holder.slot].incarnation == holder.incarnation and \
                getattr(self.sessions[holder.slot].subs.get(holder.sub), "closing", False):
            self._release(message, "its subscription is being cancelled")
        if message.state not in (State.QUEUED, State.RELEASED):
            how = "held by " + message.holder.sub if message.holder and \
                message.state is State.IN_FLIGHT else ""
            why = message.why
            if message.state is State.IN_FLIGHT and holder is not None and \
                    holder.slot in self.sessions:
                why = (*self._suspects(self.sessions[holder.slot], message), *why)
                if any(kind != "send" for ops in self.sessions[holder.slot].txs.values()
                       for kind, _ in ops):  # an ACK or NACK in a transaction not committed
                    why = (ATOMIC, *why)
            return Problem(f"delivered-{message.state.value}", why or (REDELIVER,),
                           f"MESSAGE {body!r} delivered to subscription {sub.id} although "
                           f"it is {message.state.value}{' (' + how + ')' if how else ''}: "
                           f"{message.reason}", slot)
        message.deliveries += 1
        message.delivered_at = self._tick()
        message.ack, message.message_id, message.limbo = ack, message_id, None
        message.rolled_back = None
        message.holder = Holder(slot, session.incarnation, sub.id)
        sub.order.append(body)
        if sub.mode == "auto":
            self._set(message, State.CONSUMED, (AUTO,), f"delivered to auto subscription {sub.id}")
        else:
            self._set(message, State.IN_FLIGHT, (REDELIVER,),
                      f"delivered to {sub.mode} subscription {sub.id} and not settled")
        return None

    def due(self) -> list[tuple[Message, list[tuple[str, str]]]]:
        """Queued messages that have a subscriber, each with the (slot, subscription) pairs
        it may go to; on topics one entry per copy still due, with its one subscription."""
        out = []
        for message in self.messages.values():
            if message.state is State.QUEUED and self.topics:
                out += [(message, [taker]) for taker in message.copies]
            elif message.state is State.QUEUED:
                takers = [(s.slot, sub.id) for s in self.sessions.values()
                          for sub in s.subs.values()
                          if sub.queue == message.queue and not sub.closing]
                if takers:
                    out.append((message, takers))
        return out

    def waiting(self) -> list[Message]:
        """Messages a fresh subscriber of every queue must get (of a topic: none)."""
        if self.topics:
            return []
        return [m for m in self.messages.values() if m.state is State.QUEUED]

    def ackable(self, slot: str) -> list[Message]:
        """Unsettled messages of the live client subscriptions of `slot` that no open
        transaction of it already settles (a second settle would be ambiguous)."""
        session = self.sessions.get(slot)
        if session is None:
            return []
        pending = {body for ops in session.txs.values() for kind, body in ops if kind != "send"}
        busy = {self.messages[b].holder.sub for b in pending  # type: ignore[union-attr]
                if self.messages[b].holder is not None}
        return [m for sub in session.subs.values() if sub.id not in busy
                for m in self._held_by(session, sub.id)]

    def explain_refusal(self, slot: str, message: Message, *, nack: bool) -> tuple[str, ...]:
        """The statements a refusal of a valid ACK or NACK of `message` breaks: the scope
        rules of the settles that may have taken it already, then the id rule."""
        found = self._suspects(self.sessions[slot], message)
        return (*found, "nack.id-required" if nack else "ack.id-required")

    def _suspects(self, session: OpenSession, message: Message) -> tuple[str, ...]:
        """Scope rules of the settles after `message` was delivered that a broker may have
        wrongly applied to it: a client-mode one of another subscription, an individual one
        of a later message of its own."""
        holder = message.holder
        found: list[str] = []
        for settle in session.settles:
            if holder is None or settle.at <= message.delivered_at:
                continue
            other = self.messages[settle.body]
            if settle.sub != holder.sub and settle.mode == "client":
                found.append(NACK_SCOPE if settle.nack else CUMULATIVE)
            elif settle.sub == holder.sub and settle.mode == "client-individual" and \
                    other.delivered_at > message.delivered_at:
                found.append(NACK_SCOPE if settle.nack else INDIVIDUAL)
        return tuple(dict.fromkeys(found))

    # -- inside -----------------------------------------------------------------------------

    def _publish(self, message: Message) -> None:
        """A message now processed (sent outside a transaction, or committed): on a topic it
        is due to every subscription open now, and goes nowhere when there is none."""
        if not self.topics:
            return
        message.copies = [(s.slot, sub.id) for s in self.sessions.values()
                          for sub in s.subs.values()
                          if sub.queue == message.queue and not sub.closing]
        if not message.copies:
            self._set(message, State.DROPPED, message.why,
                      "sent to a topic with no subscription")

    def _copy_delivered(self, session: OpenSession, sub: Subscription,
                        message: Message) -> Problem | None:
        """A MESSAGE of a topic arrived: one of its copies still due, else a problem."""
        taker = (session.slot, sub.id)
        if message.state is not State.QUEUED or taker not in message.copies:
            return Problem("delivered-again", message.why or (REDELIVER,),
                           f"MESSAGE {message.body!r} delivered to subscription {sub.id}, "
                           f"which it was not due to: {message.reason}", session.slot)
        message.copies.remove(taker)
        message.deliveries += 1
        message.delivered_at = self._tick()
        message.holder = Holder(session.slot, session.incarnation, sub.id)
        sub.order.append(message.body)
        if not message.copies:
            self._set(message, State.CONSUMED, message.why,
                      "delivered to every subscription of its topic")
        return None

    def _held_by(self, session: OpenSession, sub: str) -> list[Message]:
        holder = Holder(session.slot, session.incarnation, sub)
        return [m for m in self.messages.values()
                if m.state is State.IN_FLIGHT and m.holder == holder]

    def _settle(self, slot: str, body: str, *, nack: bool) -> None:
        session = self.sessions[slot]
        message = self.messages[body]
        holder = message.holder
        if message.state is not State.IN_FLIGHT or holder is None or \
                holder.incarnation != session.incarnation or holder.sub not in session.subs:
            return  # settled meanwhile (a transaction's frames take effect at COMMIT)
        sub = session.subs[holder.sub]
        scope = [body]
        if sub.mode == "client":  # this message and the earlier ones of its subscription
            last = len(sub.order) - 1 - sub.order[::-1].index(body)
            scope = [b for b in sub.order[:last + 1]
                     if self.messages[b].state is State.IN_FLIGHT
                     and self.messages[b].holder == holder]
        for key in scope:
            if nack:
                self._release(self.messages[key], "NACKed")
            else:
                rule = CUMULATIVE if sub.mode == "client" else INDIVIDUAL
                self._set(self.messages[key], State.CONSUMED, (rule,),
                          f"acknowledged on {sub.mode} subscription {sub.id}")
        session.settles.append(Settle(self._tick(), nack, sub.mode, sub.id, body))

    def _release(self, message: Message, reason: str) -> None:
        self._set(message, State.RELEASED, (), reason)

    @staticmethod
    def _set(message: Message, state: State, why: tuple[str, ...], reason: str) -> None:
        message.state, message.why, message.reason = state, why, reason
