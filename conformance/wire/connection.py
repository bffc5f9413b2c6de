"""One connection of a case: a transport, an observing parser, and the transcript; and
the words (`describe`, `brief`) in which the runner, the probes and the fuzzers say what
arrived on it.

A reader task turns every byte the broker sends into events as it arrives, so a frame, a
heart-beat or a close is timestamped when it happens, not when a step asks for it.
Memory stays bounded: the parser's limits cut an endless or huge frame, and a broker that
floods frames nobody asks for is cut at `MAX_QUEUED` events or `MAX_QUEUED_OCTETS` of them.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence

from conformance.codec import Frame, Heartbeat, Limits, Parser, StompError
from conformance.wire.stream import Transport, TransportError
from conformance.wire.transcript import Record, Transcript, octets
from conformance.wire.websocket import MessageType, WebSocketTransport

MAX_QUEUED = 500
MAX_QUEUED_OCTETS = 1 << 20
#: What a case accepts from a broker: no case makes a broker send a frame of more than a
#: few KiB, and these bound what a connection holds (`jobs` cases, each with a few).
LIMITS = Limits(max_headers=1_000, max_header_line=64 * 1024, max_body=1 << 20,
                max_frame=(1 << 20) + (64 << 10))


class Closed:
    """The broker closed the connection (or reset it, or broke the harness's limits)."""

    def __init__(self, reason: str, at: float = 0.0) -> None:
        self.reason = reason
        self.at = at  # when the harness saw it, on the case's clock

    def __repr__(self) -> str:
        return f"Closed({self.reason!r})"


Received = Frame | Heartbeat | Closed


def describe(event: Received | None, within: float) -> str:
    """What arrived, for a step's `observed`: the frame's command, headers and body cut
    short, the close and its reason, or nothing within `within` seconds."""
    if event is None:
        return f"nothing within {within:g} s"
    if isinstance(event, Closed):
        return f"connection closed ({event.reason})"
    if isinstance(event, Heartbeat):
        return "a heart-beat EOL"
    headers = ", ".join(f"{k[:40]}:{v[:200]}" for k, v in event.headers[:8])
    body = event.body[:60].decode("utf-8", "replace")
    command = event.command if event.command.isalpha() else repr(event.command[:40])
    return f"{command[:40]} frame [{headers}]" + (f" body {body!r}" if event.body else "")


def brief(event: Received | None) -> str:
    """What arrived, in a few words: the command and any ERROR message, or the close."""
    if event is None:
        return "nothing"
    if isinstance(event, Closed):
        return f"a close ({event.reason})"
    if isinstance(event, Frame):
        message = event.get("message")
        return event.command + (f" ({' '.join(message.split())[:80]})" if message else "")
    return "a heart-beat"


class Connection:
    def __init__(self, name: str, transport: Transport, transcript: Transcript,
                 clock: Callable[[], float], *, limits: Limits = LIMITS,
                 peer: str = "broker") -> None:
        self.name = name
        #: who is at the other end, for what the connection says happened ("the broker
        #: closed the connection"): a client under test when the harness is the server
        self.peer = peer
        self.transport = transport
        self.transcript = transcript
        self.clock = clock
        self.parser = Parser(version="1.2", strict=False, limits=limits)
        self.version = "1.2"
        #: the CONNECT's accept-version list, for judging CONNECTED
        self.offered: list[str] | None = None
        #: subscription id -> ack mode, for judging MESSAGE's ack header
        self.ack_modes: dict[str, str] = {}
        #: the heart-beat offers, (cx, cy) sent in CONNECT and (sx, sy) read from CONNECTED
        #: (a missing header is 0,0; None: CONNECTED's header is not two integers)
        self.heart_beat: tuple[int, int] = (0, 0)
        self.server_heart_beat: tuple[int, int] | None = (0, 0)
        self.queue: deque[Received] = deque()
        self._queued = 0  # octets of the frames in the queue
        self._arrived = asyncio.Event()
        self.closed: Closed | None = None
        self._noted()  # the WebSocket handshake, over WebSocket
        self._reader = asyncio.get_running_loop().create_task(self._read())

    def _noted(self) -> None:
        """The transport's notes (WebSocket messages, pings, closes; none over TCP) into the
        transcript."""
        for note in self.transport.take_notes():
            self.transcript.add(Record(self.clock(), "note", self.name, note=note))

    def set_version(self, version: str) -> None:
        self.version = version
        self.parser.version = version  # type: ignore[assignment]

    async def _read(self) -> None:
        try:
            while True:
                data = await self.transport.receive()
                self._noted()
                if not data:
                    code = self.transport.close_code \
                        if isinstance(self.transport, WebSocketTransport) else None
                    self._close(f"the {self.peer} closed the connection"
                                + (f" (WebSocket close {code})" if code else ""))
                    return
                self.transcript.add(Record(self.clock(), "in", self.name, data))
                try:
                    events = self.parser.feed(data)
                except StompError as error:
                    self.queue.extend(getattr(error, "events", []))
                    self._close(f"the {self.peer} broke the harness's limits: {error}")
                    await self.transport.abort()
                    return
                self.queue.extend(events)
                self._queued += sum(e.size for e in events if isinstance(e, Frame))
                if len(self.queue) > MAX_QUEUED or self._queued > MAX_QUEUED_OCTETS:
                    self._close(f"the {self.peer} sent more than {len(self.queue) - 1} frames "
                                f"({octets(self._queued)}) nobody read")
                    self.queue.clear()  # nobody will: the close is what the case sees
                    self._queued = 0
                    await self.transport.abort()
                    return
                self._arrived.set()
        except TransportError as error:
            self._noted()
            self._close(str(error))
        except asyncio.CancelledError:
            raise

    def _close(self, reason: str) -> None:
        if self.closed is None:
            try:
                self.parser.eof()
            except StompError as error:
                reason += f" in the middle of a frame ({error.message})"
            self.closed = Closed(reason, self.clock())
            self.transcript.add(Record(self.closed.at, "close", self.name, note=reason))
        self._arrived.set()

    @property
    def websocket(self) -> bool:
        """Whether the connection is STOMP over WebSocket."""
        return isinstance(self.transport, WebSocketTransport)

    async def send(self, data: bytes, *, chunk: int = 0, pause: float = 0.0,
                   cuts: Sequence[int] | None = None,
                   message_type: MessageType | None = None) -> None:
        """Write `data`, in pieces of `chunk` octets with `pause` seconds between them.
        Over WebSocket, each piece is one message; `cuts` (offsets into `data`) cut the
        messages instead of `chunk`, and `message_type` forces their type. Over TCP both
        are ignored: the bytes go as they are."""
        if not data:
            return
        if cuts is not None and self.websocket:
            edges = [0, *sorted({c for c in cuts if 0 < c < len(data)}), len(data)]
        else:
            size = chunk or len(data) or 1
            edges = [*range(0, len(data), size), len(data)]
        for start, end in zip(edges, edges[1:], strict=False):
            piece = data[start:end]
            self.transcript.add(Record(self.clock(), "out", self.name, piece))
            try:
                if message_type is not None and isinstance(self.transport, WebSocketTransport):
                    await self.transport.send_as(piece, message_type)
                else:
                    await self.transport.send(piece)
                self._noted()
            except TransportError as error:
                # The broker closed or reset mid-send: what it did is for the next
                # expectation to judge, not a harness failure.
                self.transcript.add(Record(self.clock(), "note", self.name,
                                           note=f"send failed: {error}"))
                return
            if pause and end < len(data):
                await asyncio.sleep(pause)

    async def next_event(self, timeout: float, *, heartbeats: bool = False) -> Received | None:
        """The next frame (and heart-beat, if asked), a Closed once the queue is drained
        after a close, or None when nothing came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            while self.queue:
                event = self.queue.popleft()
                if isinstance(event, Frame):
                    self._queued -= event.size
                if heartbeats or not isinstance(event, Heartbeat):
                    return event
            if self.closed is not None:
                return self.closed
            self._arrived.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                await asyncio.wait_for(self._arrived.wait(), left)
            except TimeoutError:
                return None

    async def close(self, *, abort: bool = False) -> None:
        self._reader.cancel()
        try:
            await self._reader
        except (asyncio.CancelledError, Exception):  # the reader's end is already recorded
            pass
        if abort:
            await self.transport.abort()
        else:
            await self.transport.close()
