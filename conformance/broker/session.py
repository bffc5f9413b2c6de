"""One client connection of the reference broker, its I/O: reading with the connect, frame,
idle and heart-beat timeouts, writing (what one pass of the event loop makes goes out in
one send), the write high-water mark, the broker's heart-beats, and the linger before
closing. What is read and what is written is the protocol's business (protocol.py): the
session carries out the actions the protocol answers with. A Session is also the Consumer
of its connection's subscriptions in the Store. It reads and writes asyncio streams over
TCP, or websocket.py's framing layer (`Reader`, `Writer`): the same session either way."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Coroutine, Iterable
from typing import Any, Protocol

from conformance.broker.config import BrokerConfig
from conformance.broker.destinations import Message, Store, Subscription
from conformance.broker.faults import Faults
from conformance.broker.protocol import Action, BrokerProtocol, Close, Heartbeats, Send

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
        self.config, self.faults = config, faults
        self.reader, self.writer = reader, writer
        self.sessions = sessions
        self._transport = writer.transport
        self._loop = asyncio.get_running_loop()
        self.protocol = BrokerProtocol(config, faults, store, self, f"s{next(_sessions)}",
                                       versions=versions)
        #: the protocol said Close: what is to send goes, nothing more is read or written
        self.closing = False
        #: seconds of silence before a heart-beat (0: none), and before the client's counts
        #: as missed (0: none expected)
        self.send_every = self.expect_within = 0.0
        self.last_write = time.monotonic()
        self._out: list[bytes] = []  # frames to send at the end of this pass of the loop
        self._out_bytes = 0
        self._tasks: set[asyncio.Task[None]] = set()  # running: cancelled when the session ends
        self._pumping = False
        self._flush_due = False

    def _act(self, actions: list[Action]) -> None:
        """Carry out what the protocol answered, in order."""
        for action in actions:
            if isinstance(action, Send):
                self._out += action.frames
                self._out_bytes += sum(map(len, action.frames))
                self._wrote()
            elif isinstance(action, Heartbeats):
                self.send_every, self.expect_within = action.send_every, action.expect_within
                if self.send_every:
                    self._start(self._heartbeats())
            elif isinstance(action, Close):
                self.closing = True

    # -- writing ----------------------------------------------------------------------------

    def has_room(self) -> bool:
        return not self.closing and self._transport.get_write_buffer_size() + \
            self._out_bytes + self.protocol.pending < self.config.write_high_water

    def _wrote(self) -> None:
        """There is something to send: it goes out at the end of this pass of the event
        loop, with whatever else is written meanwhile."""
        if not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self._flush)
        self.last_write = time.monotonic()

    def _flush(self) -> None:
        self._flush_due = False
        if self._out:
            frames, self._out, self._out_bytes = self._out, [], 0
            if not self.writer.is_closing():  # over TCP, in one send
                self.writer.writelines(frames)

    def deliver(self, subscription: Subscription, message: Message) -> None:
        if self.closing:
            return
        self._act(self.protocol.deliver(subscription, message))
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
        self._act(self.protocol.slow(subscription))
        self._flush()
        self.writer.close()

    def shut(self) -> None:
        """The broker stops: close the connection (the session then ends its own way)."""
        self.closing = True
        self.writer.close()

    def _timed_out(self, why: str) -> None:
        self._act(self.protocol.timed_out(why))

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
        while not self.closing:
            timeout = self._read_timeout(started, frame_started)
            try:
                async with asyncio.timeout(timeout):  # no task per read, as wait_for makes
                    data = await self.reader.read(65536)
            except TimeoutError:
                await self._clock_ran_out(started, frame_started)
                continue
            if not data:
                return
            self._act(self._received(data) if self.faults.bends_reads
                      else protocol.receive_data(data))
            if self.closing:
                return
            frame_started = (frame_started or time.monotonic()) if protocol.buffered else None
            await self.writer.drain()
            if not protocol.connected and time.monotonic() - started > config.connect_timeout:
                self._timed_out("no CONNECT frame in time")

    def _received(self, data: bytes) -> list[Action]:
        """What the protocol answers to a read as the read faults bend it."""
        protocol, faults = self.protocol, self.faults
        if faults.cr_is_eol_v10 and protocol.connected and protocol.version != "1.2":
            data = data.replace(b"\r", b"\n")
        if faults.first_frame_per_read:  # fed octet by octet, up to the NUL ending a frame
            actions: list[Action] = []
            for at in range(len(data)):
                actions += protocol.receive_data(data[at:at + 1])
                if data[at] == 0 and not protocol.buffered:
                    break
            return actions
        actions = protocol.receive_data(data)
        if faults.read_end_ends_frame and protocol.buffered and not protocol.closing:
            actions += protocol.receive_data(b"\0")
        return actions

    def _read_timeout(self, started: float, frame_started: float | None) -> float:
        config = self.config
        limits = [config.frame_timeout - (time.monotonic() - frame_started)
                  if frame_started else config.idle_timeout]
        if not self.protocol.connected:
            limits.append(config.connect_timeout - (time.monotonic() - started))
        if self.expect_within:
            limits.append(self.expect_within)
        return max(min(limits), 0.001)

    async def _clock_ran_out(self, started: float, frame_started: float | None) -> None:
        config = self.config
        now = time.monotonic()
        if not self.protocol.connected and now - started >= config.connect_timeout:
            self._timed_out("no CONNECT frame in time")
        elif frame_started and now - frame_started >= config.frame_timeout:
            self._timed_out(f"a frame took longer than {config.frame_timeout:g} s to arrive")
        elif self.expect_within:
            self._timed_out(f"no data for {self.expect_within:g} s: the heart-beat was missed")
        else:
            self._timed_out("connection idle for too long")
        try:
            await self.writer.drain()
        except (ConnectionError, OSError):
            pass

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
        """The connection is over: its tasks are cancelled, its protocol ends (aborting its
        transactions, giving back its unacknowledged messages)."""
        self.closing = True
        for task in list(self._tasks):
            task.cancel()
        self.protocol.end()
        self.sessions.discard(self)
