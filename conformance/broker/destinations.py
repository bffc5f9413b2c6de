"""Destinations and subscriptions: what the broker holds between frames.

A queue (`/queue/...`) gives each message to one consumer, round robin among those with
room; a topic (`/topic/...`) gives it to every subscriber. A consumer has room while its
unacknowledged messages are under the limit and its connection's unsent bytes are under
the high-water mark, so a slow consumer makes messages wait in the queue (bounded by the
store's byte limit), never in an unbounded buffer.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(slots=True)
class Message:
    id: str
    destination: str
    #: the sender's headers (destination, receipt, transaction and content-length removed)
    headers: list[tuple[str, str]]
    body: bytes
    #: what the message costs a queue: its SEND frame's size on the wire
    size: int
    redelivered: bool = False


def is_topic(name: str) -> bool:
    """Whether destination `name` is a topic (every subscriber gets each message)."""
    return name.startswith("/topic/")


class Consumer(Protocol):
    """The session side of a subscription."""

    def has_room(self) -> bool: ...

    def deliver(self, subscription: Subscription, message: Message) -> None: ...

    def slow(self, subscription: Subscription) -> None: ...


@dataclass(eq=False, slots=True)
class Subscription:
    consumer: Consumer
    id: str
    destination: str
    ack: str  # auto, client, client-individual
    max_pending: int
    #: ack id -> message, in delivery order (client and client-individual only)
    unacked: OrderedDict[str, Message] = field(default_factory=OrderedDict)
    #: the encoded MESSAGE headers every delivery of this subscription carries (the
    #: session's business: see Session.deliver)
    head: bytes | None = None

    def has_room(self) -> bool:
        return len(self.unacked) < self.max_pending and self.consumer.has_room()


class QueueFull(Exception):
    pass


class Destination:
    def __init__(self, name: str, store: Store) -> None:
        self.name = name
        self.topic = is_topic(name)
        self.store = store
        self.messages: deque[Message] = deque()
        self.subscriptions: list[Subscription] = []
        self._turn = 0

    def send(self, message: Message, held: bool = False) -> None:
        """`held`: the store holds the message already (a transaction's, at COMMIT)."""
        if self.topic:  # a topic does not wait: a subscriber without room is too slow
            if held:
                self.store.release(message.size)
            for subscription in list(self.subscriptions):
                if subscription.has_room():
                    subscription.consumer.deliver(subscription, message)
                else:
                    subscription.consumer.slow(subscription)
            return
        if not held:
            self.store.hold(message.size)
        self.messages.append(message)
        self.dispatch()

    def requeue(self, messages: list[Message]) -> None:
        """Messages given back (NACK, or their consumer went): first in line again, held
        whatever the limit, since they were held before."""
        for message in reversed(messages):
            message.redelivered = True
            self.messages.appendleft(message)
            self.store.held += message.size
        self.dispatch()

    def dispatch(self) -> None:
        messages, subscriptions = self.messages, self.subscriptions
        while messages and subscriptions:
            count = len(subscriptions)
            for step in range(count):
                subscription = subscriptions[(self._turn + step) % count]
                if subscription.has_room():
                    self._turn = (self._turn + step + 1) % count
                    message = messages.popleft()
                    self.store.held -= message.size
                    subscription.consumer.deliver(subscription, message)
                    break
            else:
                return  # nobody has room: the messages wait

    @property
    def idle(self) -> bool:
        return not self.messages and not self.subscriptions


class Store:
    """Every destination in use, by name: one is made on first use and dropped once it
    holds no message and no subscription, so the names clients make up cost nothing after.
    `max_bytes` bounds the octets of the messages held, waiting in queues or sent in
    transactions not yet committed (see `hold`). Message ids are `id_prefix` and a count."""

    def __init__(self, *, max_bytes: int, id_prefix: str = "m-") -> None:
        self.max_bytes = max_bytes
        self.id_prefix = id_prefix
        self.held = 0
        self.destinations: dict[str, Destination] = {}
        self._ids = itertools.count(1)

    def hold(self, size: int) -> None:
        """Take `size` more octets of messages, or refuse them all with QueueFull."""
        if self.held + size > self.max_bytes:
            raise QueueFull(f"the broker holds {self.held} octets of messages, its limit is "
                            f"{self.max_bytes}")
        self.held += size

    def release(self, size: int) -> None:
        self.held -= size

    def destination(self, name: str) -> Destination:
        found = self.destinations.get(name)
        if found is None:
            found = self.destinations[name] = Destination(name, self)
        return found

    def _drop_if_idle(self, destination: Destination) -> None:
        if destination.idle and self.destinations.get(destination.name) is destination:
            del self.destinations[destination.name]

    def send(self, name: str, message: Message, held: bool = False) -> None:
        destination = self.destination(name)
        try:
            destination.send(message, held)
        finally:
            self._drop_if_idle(destination)

    def message_id(self) -> str:
        return f"{self.id_prefix}{next(self._ids)}"

    def subscribe(self, subscription: Subscription) -> None:
        destination = self.destination(subscription.destination)
        destination.subscriptions.append(subscription)
        destination.dispatch()

    def unsubscribe(self, subscription: Subscription, *, requeue: bool = True) -> None:
        destination = self.destination(subscription.destination)
        if subscription in destination.subscriptions:
            destination.subscriptions.remove(subscription)
        pending = list(subscription.unacked.values())
        subscription.unacked.clear()
        if requeue and pending and not destination.topic:
            destination.requeue(pending)
        self._drop_if_idle(destination)

    def dispatch_all(self, accept: Callable[[Destination], bool] = lambda d: True) -> None:
        for destination in list(self.destinations.values()):
            if accept(destination):
                destination.dispatch()
