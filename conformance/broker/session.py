"""One client connection of the reference broker: the STOMP 1.0-1.2 protocol, frame by
frame (CONNECT itself is answered in connect.py). Every error is an ERROR frame (with
`message`, and `receipt-id` when the offending frame asked for a receipt) followed by
closing the connection."""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from conformance.broker.connect import connect
from conformance.broker.destinations import Message, QueueFull, Subscription
from conformance.codec import (
    Frame,
    Heartbeat,
    LocalProtocolError,
    Parser,
    StompError,
    encode,
    encode_headers,
    encode_raw,
)
from conformance.spec.grammar import ACK_MODES, CLIENT_COMMANDS, Version

if TYPE_CHECKING:
    from conformance.broker.server import Broker

#: headers of SEND that are the broker's business, not the message's
TRANSPORT_HEADERS = frozenset({"destination", "receipt", "transaction", "content-length"})
_sessions = itertools.count(1)


class Refused(Exception):
    """A frame the broker answers with ERROR then close."""


#: After the last frame: how long, and how much, the broker reads and drops before closing.
LINGER_SECONDS = 2.0
LINGER_OCTETS = 1 << 20


class Session:
    def __init__(self, broker: Broker, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.broker, self.config = broker, broker.config
        self.faults = broker.config.faults
        self.reader, self.writer = reader, writer
        self._transport = writer.transport
        self._loop = asyncio.get_running_loop()
        self.id = f"s{next(_sessions)}"
        self.parser = Parser(version="1.2", strict=False, limits=self.config.limits,
                             content_length="ignore-content-length" not in self.faults)
        self.version = "1.2"
        self.connected = False
        self.closing = False
        self.subscriptions: dict[str, Subscription] = {}
        self.transactions: dict[str, list[Callable[[], None]]] = {}
        #: transaction -> octets of its SENDs the store holds until COMMIT or ABORT
        self._held: dict[str, int] = {}
        self._deferred = 0  # frames kept by open transactions
        self._acks = itertools.count(1)
        self.send_every = 0.0  # seconds between our heart-beats, 0: none
        self.expect_every = 0.0  # the client's
        self.last_write = time.monotonic()
        self._tasks: set[asyncio.Task[None]] = set()  # running: cancelled when the session ends
        self._pumping = False
        self._out: list[bytes] = []
        self._out_bytes = 0

    # -- writing ----------------------------------------------------------------------------

    def has_room(self) -> bool:
        return not self.closing and self._transport.get_write_buffer_size() + \
            self._out_bytes < self.config.write_high_water

    def write(self, frame: Frame) -> None:
        if self.closing:
            return
        faults = self.faults
        version = "1.2" if "escape-v10" in faults else self.version
        no_length = frame.command == ("MESSAGE" if "no-content-length" in faults else
                                      "ERROR" if "error-without-content-headers" in faults
                                      else None)
        try:
            if "no-escaping" in faults:
                raise LocalProtocolError("headers written as they are")
            data = encode(frame, version=version,  # type: ignore[arg-type]
                          content_length=False if no_length else None)
        except LocalProtocolError:
            if not faults:  # a 1.0 subscriber of a header it cannot carry: leave it out
                frame.headers = [(k, v) for k, v in frame.headers
                                 if "\n" not in k + v and ":" not in k]
                data = encode(frame, version=version)  # type: ignore[arg-type]
            else:  # a fault asked for what the encoder refuses: write it as it is
                data = encode_raw(frame.command, frame.headers, frame.body,
                                  content_length=len(frame.body) if frame.body and not no_length
                                  else None)
        self._emit(data)

    def _emit(self, data: bytes) -> None:
        # Frames written in one pass of the event loop go out in one send.
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(data)
        self._out_bytes += len(data)
        self.last_write = time.monotonic()

    def _flush(self) -> None:
        if self._out:
            data = b"".join(self._out)
            self._out.clear()
            self._out_bytes = 0
            if not self.writer.is_closing():
                self.writer.write(data)

    def deliver(self, subscription: Subscription, message: Message) -> None:
        if self.closing:
            return
        ack = None
        if subscription.ack != "auto":
            ack = f"ID:{self.id}:{next(self._acks)}" if self.config.colon_ids \
                else f"{self.id}-{next(self._acks)}"
            subscription.unacked[ack] = message
        data = None if self.faults else self._message_bytes(subscription, message, ack)
        if data is None:
            self.write(self._message_frame(subscription, message, ack))
        else:
            self._emit(data)
        if not self.has_room() and not self._pumping:
            self._pumping = True
            self._start(self._pump())

    def _message_bytes(self, subscription: Subscription, message: Message,
                       ack: str | None) -> bytes | None:
        """The MESSAGE frame from header lines the codec escaped: the ones every delivery
        of the subscription shares (encoded once), the per-delivery ids (which never need
        escaping) and the message's own. None when a header cannot be written in this
        version (the generic path leaves it out)."""
        version: Version = self.version  # type: ignore[assignment]
        try:
            if subscription.head is None:
                subscription.head = ("MESSAGE\n" + encode_headers(
                    [("subscription", subscription.id),
                     ("destination", subscription.destination)], version=version)).encode()
            lines = encode_headers(message.headers, version=version)
        except LocalProtocolError:
            return None
        ids = [("message-id", message.id)]
        if ack is not None and version == "1.2":
            ids.append(("ack", ack))
        lines = (encode_headers(ids, version=version) if self.config.colon_ids else
                 "".join(f"{k}:{v}\n" for k, v in ids)) + lines
        if message.redelivered:
            lines += "redelivered:true\n"
        body = message.body
        if body:  # content-length always: a body may hold NUL
            lines += f"content-length:{len(body)}\n"
        return b"".join((subscription.head, lines.encode(), b"\n", body, b"\x00"))

    def _message_frame(self, subscription: Subscription, message: Message,
                       ack: str | None) -> Frame:
        """The MESSAGE frame as a Frame, for the faults to bend."""
        headers = [("subscription", subscription.id), ("message-id", message.id),
                   ("destination", message.destination)]
        faults = self.faults
        if "no-subscription-header" in faults:
            headers.pop(0)
        if "no-message-id" in faults:
            headers = [h for h in headers if h[0] != "message-id"]
        if "no-destination-header" in faults:
            headers = [h for h in headers if h[0] != "destination"]
        if ack is not None and self.version == "1.2" and "no-ack-header" not in faults:
            headers.append(("ack", ack))
        if message.redelivered:
            headers.append(("redelivered", "true"))
        if "drop-user-headers" not in faults:
            headers += message.headers
        return Frame("MESSAGE", headers, message.body)

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pump(self) -> None:
        """Once the client has read what was written, give its queues another turn."""
        try:
            await self.writer.drain()
        except (ConnectionError, OSError):
            return
        self._pumping = False
        mine = {s.destination for s in self.subscriptions.values()}
        self.broker.store.dispatch_all(lambda d: d.name in mine)

    def slow(self, subscription: Subscription) -> None:
        """A topic subscriber without room: the broker will not buffer for it."""
        self.write(Frame("ERROR", [("message", f"slow consumer: subscription "
                                               f"{subscription.id!r} fell too far behind"),
                                   ("content-type", "text/plain")], b"slow consumer"))
        self.closing = True
        self._flush()
        self.writer.close()

    def error(self, message: str, frame: Frame | None = None, detail: str = "") -> None:
        """ERROR, then close (unless the error-without-close fault is on)."""
        headers = [] if "error-without-message" in self.faults else [("message", message)]
        receipt = frame.get("receipt") if frame is not None else None
        if receipt is not None and "no-receipt-id-on-error" not in self.faults:
            headers.append(("receipt-id", receipt))
        if "error-without-content-headers" not in self.faults:
            headers.append(("content-type", "text/plain"))
        body = (detail or message).encode()
        self.write(Frame("ERROR", headers, body))
        if "error-without-close" not in self.faults:
            self.closing = True

    # -- the connection -------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._read_loop()
        except (ConnectionError, OSError):
            pass
        finally:
            self.end()
            self._flush()
            try:  # bounded: a client that neither reads nor closes must not hold a stop
                async with asyncio.timeout(LINGER_SECONDS):
                    await self.writer.drain()
                    await self._linger()
            except (ConnectionError, OSError, TimeoutError, asyncio.CancelledError):
                pass
            self.writer.close()

    async def _linger(self) -> None:
        """Half-close, then drop what the client still sends, bounded in time and octets:
        closing with its input unread makes the kernel reset the connection, which can
        destroy the ERROR before the client reads it."""
        if not self.writer.can_write_eof():  # TLS: no half-close
            return
        self.writer.write_eof()
        left = LINGER_OCTETS
        try:
            async with asyncio.timeout(LINGER_SECONDS):
                while left > 0 and (data := await self.reader.read(min(left, 65536))):
                    left -= len(data)
        except TimeoutError:
            pass

    async def _read_loop(self) -> None:
        config = self.config
        started = time.monotonic()
        frame_started: float | None = None
        while not self.closing:
            timeout = self._read_timeout(started, frame_started)
            try:
                async with asyncio.timeout(timeout):  # no task per read, as wait_for makes
                    data = await self.reader.read(65536)
            except TimeoutError:
                await self._timed_out(started, frame_started)
                continue
            if not data:
                return
            try:
                events = self.parser.feed(data)
            except StompError as problem:
                for event in getattr(problem, "events", []):
                    self.handle(event)
                    if self.closing:
                        return
                if "limit-close-without-error" in self.faults:
                    return
                self.error(f"frame refused: {problem.message}", detail=str(problem))
                if not self.closing:  # error-without-close: read on, from a fresh parser
                    self.parser = Parser(version=self.parser.version, strict=False,
                                         limits=self.config.limits)
                    continue
                return
            for event in events:
                self.handle(event)
                if self.closing:
                    break
            frame_started = (frame_started or time.monotonic()) if self.parser.buffered else None
            await self.writer.drain()
            if not self.connected and time.monotonic() - started > config.connect_timeout:
                self.error("no CONNECT frame in time")

    def _read_timeout(self, started: float, frame_started: float | None) -> float:
        config = self.config
        limits = [config.frame_timeout - (time.monotonic() - frame_started)
                  if frame_started else config.idle_timeout]
        if not self.connected:
            limits.append(config.connect_timeout - (time.monotonic() - started))
        if self.expect_every:
            limits.append(self.expect_every * self._tolerance())
        return max(min(limits), 0.001)

    def _tolerance(self) -> float:
        return 0.9 if "heartbeat-no-tolerance" in self.faults else self.config.heartbeat_tolerance

    async def _timed_out(self, started: float, frame_started: float | None) -> None:
        now = time.monotonic()
        if not self.connected and now - started >= self.config.connect_timeout:
            self.error("no CONNECT frame in time")
        elif frame_started and now - frame_started >= self.config.frame_timeout:
            self.error(f"a frame took longer than {self.config.frame_timeout:g} s "
                             "to arrive")
        elif self.expect_every:
            self.error(f"no data for {self.expect_every * self._tolerance():g}"
                             " s: the heart-beat was missed")
        else:
            self.error("connection idle for too long")
        try:
            await self.writer.drain()
        except (ConnectionError, OSError):
            pass

    def start_heartbeats(self) -> None:
        self._start(self._heartbeats())

    async def _heartbeats(self) -> None:
        while not self.closing:
            wait = self.last_write + self.send_every - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            self.writer.write(b"\n")
            self.last_write = time.monotonic()
            await self.writer.drain()

    def end(self) -> None:
        """The connection is over: abort transactions, give back unacknowledged messages."""
        self.closing = True
        for task in list(self._tasks):
            task.cancel()
        for name in list(self.transactions):
            self._close(name, commit="no-implicit-abort" in self.faults)
        requeue = "no-redelivery" not in self.faults
        for subscription in self.subscriptions.values():
            self.broker.store.unsubscribe(subscription, requeue=requeue)
        self.subscriptions.clear()
        self.broker.sessions.discard(self)

    # -- frames ---------------------------------------------------------------------------

    def handle(self, event: Frame | Heartbeat) -> None:
        faults = self.faults
        if isinstance(event, Heartbeat):
            if event.eol == b"\r\n" and "crlf-heartbeat-refused" in faults:
                self.error("CR LF is not an EOL")
            return
        frame = event
        if faults and self._fault_first(frame):
            return
        if self.connected and frame.command not in CLIENT_COMMANDS and \
                self.config.unknown_command == "ignore":
            return  # a frame not in the client's list: the ERROR is a MAY (1.1, 1.2)
        if frame.violations:
            problems = [v for v in frame.violations if not self._excused(v.statement)]
            if problems:
                self.error(f"malformed frame: {problems[0].message}", frame,
                           "\n".join(str(p) for p in problems))
                return
        command = frame.command
        if command in ("CONNECT", "STOMP"):
            connect(self, frame)
            return
        if not self.connected and "accept-frames-before-connect" not in faults:
            self.error(f"{command} before CONNECT", frame)
            return
        handler = HANDLERS.get(command) if command in CLIENT_COMMANDS else None
        if handler is None:
            self.error(f"unknown command {command[:40]!r}", frame)
            return
        try:
            handler(self, frame)
        except (Refused, QueueFull) as refused:
            self.error(str(refused), frame)
            return
        receipt = frame.get("receipt")
        if receipt is not None and "drop-receipts" not in faults:
            value = receipt + "-x" if "wrong-receipt-id" in faults else receipt
            body = b"receipt" if "body-on-receipt" in faults else b""
            self.write(Frame("RECEIPT", [("receipt-id", value)], body))
        if command == "DISCONNECT":
            self.closing = True

    def _fault_first(self, frame: Frame) -> bool:
        """What faults do to a frame before it is judged; True if it was refused."""
        faults = self.faults
        if "trim-headers" in faults:
            frame.headers = [(k.strip(), v.strip()) for k, v in frame.headers]
        if "last-header-wins" in faults:
            frame.headers.reverse()
        if ("refuse-body-v10" in faults and self.version == "1.0" and frame.body
                and frame.command != "SEND"):
            self.error(f"a {frame.command} frame must not have a body", frame)
            return True
        return False

    def _excused(self, statement: str) -> bool:
        """A violation a fault tells the broker to let pass."""
        return ("accept-undefined-escape" in self.faults
                and statement.startswith("value-encoding.undefined-escape")) or \
            ("accept-body-on-subscribe" in self.faults and statement == "body.forbidden-frames")

    # -- the frames of a connected session ---------------------------------------------------

    def _required(self, frame: Frame, name: str) -> str:
        value = frame.get(name)
        if value is None:
            raise Refused(f"{frame.command} without the required {name!r} header")
        return value

    def _transaction(self, frame: Frame) -> str | None:
        """The open transaction the frame names, or None for a frame to act on now."""
        name = frame.get("transaction")
        if name is None or "ignore-transactions" in self.faults:
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
            self.broker.store.hold(held)
            self._held[name] = self._held.get(name, 0) + held
        self._deferred += 1
        self.transactions[name].append(action)

    def send(self, frame: Frame) -> None:
        destination = self._required(frame, "destination")
        if not destination.startswith(("/queue/", "/topic/")):
            raise Refused(f"unknown destination {destination[:60]!r}: use /queue/NAME or "
                          "/topic/NAME")
        store = self.broker.store
        headers = [(k, v) for k, v in frame.headers if k not in TRANSPORT_HEADERS]
        if self.config.server_headers:  # as ActiveMQ adds them; the sender's own win
            given = {k for k, _ in headers}
            headers += [(k, v) for k, v in (("expires", "0"), ("priority", "4"), (
                "timestamp", str(int(time.time() * 1000)))) if k not in given]
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
        subscription = Subscription(self, sub_id, destination, ack, self.config.max_pending)
        self.subscriptions[sub_id] = subscription
        self.broker.store.subscribe(subscription)

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
            self.broker.store.unsubscribe(self.subscriptions.pop(key))

    def _find_ack(self, frame: Frame) -> tuple[Subscription, str]:
        """The subscription and ack id an ACK or NACK names, per version."""
        if self.version == "1.2":
            ack_id = self._required(frame, "id")
            for subscription in self.subscriptions.values():
                if ack_id in subscription.unacked:
                    return subscription, ack_id
            raise Refused(f"{frame.command} of unknown or already acknowledged id {ack_id!r}")
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
        raise Refused(f"{frame.command} of unknown or already acknowledged message "
                      f"{message_id!r}")

    def _settle(self, subscription: Subscription, ack_id: str, *, requeue: bool) -> None:
        """ACK (requeue=False) or NACK one message, or, in client mode, every message of the
        subscription up to it."""
        if ack_id not in subscription.unacked:
            return  # settled meanwhile (a transaction's frames run at COMMIT)
        cumulative = subscription.ack == "client" or "individual-ack-cumulative" in self.faults
        scope = list(self.subscriptions.values()) \
            if "cumulative-ack-crosses-subscriptions" in self.faults else [subscription]
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
        store = self.broker.store
        for sub, message in settled:
            if requeue:
                store.destination(sub.destination).requeue([message])
        store.dispatch_all()

    def ack(self, frame: Frame) -> None:
        subscription, ack_id = self._find_ack(frame)
        self._in_transaction(frame, lambda: self._settle(subscription, ack_id, requeue=False))

    def nack(self, frame: Frame) -> None:
        if self.version == "1.0":
            raise Refused("NACK is not part of STOMP 1.0")
        subscription, ack_id = self._find_ack(frame)
        requeue = self.config.nack == "redeliver"
        self._in_transaction(frame, lambda: self._settle(subscription, ack_id, requeue=requeue))

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
            if "accept-unknown-transaction" in self.faults:
                return
            raise Refused(f"unknown transaction {name!r}")
        self._close(name, commit=commit)

    def _close(self, name: str, *, commit: bool) -> None:
        """Run an open transaction's actions, or drop them and what the store held for it."""
        actions = self.transactions.pop(name)
        self._deferred -= len(actions)
        held = self._held.pop(name, 0)
        if commit:  # its SENDs hand what the store held to their destinations
            for action in actions:
                action()
        else:
            self.broker.store.release(held)

    def commit(self, frame: Frame) -> None:
        self._finish(frame, commit=True)

    def abort(self, frame: Frame) -> None:
        self._finish(frame, commit=False)

    def disconnect(self, frame: Frame) -> None:
        """Nothing to do here: open transactions are aborted when the connection ends."""


HANDLERS: dict[str, Callable[[Session, Frame], None]] = {
    "SEND": Session.send, "SUBSCRIBE": Session.subscribe, "UNSUBSCRIBE": Session.unsubscribe,
    "ACK": Session.ack, "NACK": Session.nack, "BEGIN": Session.begin,
    "COMMIT": Session.commit, "ABORT": Session.abort, "DISCONNECT": Session.disconnect,
}
