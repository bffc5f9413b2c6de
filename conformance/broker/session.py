"""One client connection of the reference broker, its I/O: reading with the connect, frame,
idle and heart-beat timeouts, writing (what one pass of the event loop makes goes out in
one send), the write high-water mark, the broker's heart-beats, and the linger before
closing. What is read and what is written is the protocol's business (protocol.py); a
Session is also the Consumer of its connection's subscriptions in the Store. It reads and
writes asyncio streams over TCP, or websocket.py's framing layer (`Reader`, `Writer`): the
same session either way."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Coroutine, Iterable
from typing import Any, Protocol

from conformance.broker.config import BrokerConfig
from conformance.broker.destinations import Message, Store, Subscription
from conformance.broker.faults import Faults
from conformance.broker.protocol import BrokerProtocol

_sessions = itertools.count(1)

#: After the last frame: how long, and how much, the broker reads and drops before closing.
LINGER_SECONDS = 2.0
LINGER_OCTETS = 1 << 20


class Reader(Protocol):
    """What a session reads from: an asyncio.StreamReader, or a WebSocket's messages."""

    async def read(self, n: int = -1) -> bytes: ...


class Writer(Protocol):
    """What a session writes to: an asyncio.StreamWriter, or WebSocket messages (each
    `write`, and each of `writelines`, one message)."""

    @property
    def transport(self) -> asyncio.WriteTransport: ...

    def write(self, data: bytes) -> None: ...

    def writelines(self, data: Iterable[bytes]) -> None: ...

    def is_closing(self) -> bool: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...

    def can_write_eof(self) -> bool: ...

    def write_eof(self) -> None: ...


class Session:
    def __init__(self, config: BrokerConfig, faults: Faults, store: Store,
                 reader: Reader, writer: Writer,
                 sessions: set[Session], *, versions: tuple[str, ...] | None = None) -> None:
        """`sessions`: the broker's open sessions, this one among them until it ends;
        `versions`: the STOMP versions the connection allows (None: any)."""
        self.config = config
        self.reader, self.writer = reader, writer
        self.sessions = sessions
        self._transport = writer.transport
        self._loop = asyncio.get_running_loop()
        self.protocol = BrokerProtocol(config, faults, store, self, f"s{next(_sessions)}",
                                       versions=versions)
        self.last_write = time.monotonic()
        self._tasks: set[asyncio.Task[None]] = set()  # running: cancelled when the session ends
        self._pumping = False
        self._flush_due = False

    # -- writing ----------------------------------------------------------------------------

    def has_room(self) -> bool:
        protocol = self.protocol
        return not protocol.closing and self._transport.get_write_buffer_size() + \
            protocol.out_bytes < self.config.write_high_water

    def _wrote(self) -> None:
        """The protocol has something to send: it goes out at the end of this pass of the
        event loop, with whatever else is written meanwhile."""
        if not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self._flush)
        self.last_write = time.monotonic()

    def _flush(self) -> None:
        self._flush_due = False
        if self.protocol.out:
            frames = self.protocol.frames_to_send()
            if not self.writer.is_closing():  # over TCP, in one send
                self.writer.writelines(frames)

    def deliver(self, subscription: Subscription, message: Message) -> None:
        protocol = self.protocol
        if protocol.closing:
            return
        protocol.deliver(subscription, message)
        self._wrote()
        if not self.has_room() and not self._pumping:
            self._pumping = True
            self._start(self._pump())

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
        self.protocol.resume()

    def slow(self, subscription: Subscription) -> None:
        """A topic subscriber without room: the broker will not buffer for it."""
        self.protocol.slow(subscription)
        self._flush()
        self.writer.close()

    def shut(self) -> None:
        """The broker stops: close the connection (the session then ends its own way)."""
        self.protocol.closing = True
        self.writer.close()

    def _error(self, message: str) -> None:
        self.protocol.error(message)
        if self.protocol.out:
            self._wrote()

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
        config, protocol = self.config, self.protocol
        started = time.monotonic()
        frame_started: float | None = None
        while not protocol.closing:
            timeout = self._read_timeout(started, frame_started)
            try:
                async with asyncio.timeout(timeout):  # no task per read, as wait_for makes
                    data = await self.reader.read(65536)
            except TimeoutError:
                await self._timed_out(started, frame_started)
                continue
            if not data:
                return
            parsed = protocol.receive_data(data)
            if protocol.beat:
                protocol.beat = False
                self._start(self._heartbeats())
            if protocol.out:
                self._wrote()
            if not parsed:
                if protocol.closing:
                    return
                continue  # error-without-close: read on, from a fresh parser
            frame_started = (frame_started or time.monotonic()) if protocol.buffered else None
            await self.writer.drain()
            if not protocol.connected and time.monotonic() - started > config.connect_timeout:
                self._error("no CONNECT frame in time")

    def _read_timeout(self, started: float, frame_started: float | None) -> float:
        config, protocol = self.config, self.protocol
        limits = [config.frame_timeout - (time.monotonic() - frame_started)
                  if frame_started else config.idle_timeout]
        if not protocol.connected:
            limits.append(config.connect_timeout - (time.monotonic() - started))
        if protocol.expect_every:
            limits.append(protocol.heartbeat_deadline)
        return max(min(limits), 0.001)

    async def _timed_out(self, started: float, frame_started: float | None) -> None:
        config, protocol = self.config, self.protocol
        now = time.monotonic()
        if not protocol.connected and now - started >= config.connect_timeout:
            self._error("no CONNECT frame in time")
        elif frame_started and now - frame_started >= config.frame_timeout:
            self._error(f"a frame took longer than {config.frame_timeout:g} s to arrive")
        elif protocol.expect_every:
            self._error(f"no data for {protocol.heartbeat_deadline:g} s: the heart-beat was "
                        "missed")
        else:
            self._error("connection idle for too long")
        try:
            await self.writer.drain()
        except (ConnectionError, OSError):
            pass

    async def _heartbeats(self) -> None:
        protocol = self.protocol
        while not protocol.closing:
            wait = self.last_write + protocol.send_every - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            self.writer.write(b"\n")
            self.last_write = time.monotonic()
            await self.writer.drain()

    def end(self) -> None:
        """The connection is over: its tasks are cancelled, its protocol ends (aborting its
        transactions, giving back its unacknowledged messages)."""
        self.protocol.closing = True
        for task in list(self._tasks):
            task.cancel()
        self.protocol.end()
        self.sessions.discard(self)
