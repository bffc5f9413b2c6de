"""The reference broker: an asyncio STOMP 1.0-1.2 server built on the project's codec,
over TCP and, on a port of its own (`ws_port`), over WebSocket (websocket.py).
The embedded default target of `stomp-conformance run`, and `stomp-conformance broker`.

Bounds (what one broker holds at most, whatever clients send):
- per connection: one frame of `limits.max_frame` octets being parsed, plus
  `write_high_water` octets written and not yet read by the client (a slower consumer gets
  no more queue messages, and a topic subscriber that falls behind is disconnected);
- `max_held_bytes` of messages, waiting in queues or sent in open transactions, over all
  destinations (a SEND beyond it gets ERROR then close); a destination is kept only while
  it holds a message or a subscription;
- per connection: `max_subscriptions` subscriptions, `max_pending` unacknowledged messages
  per subscription, `max_transactions` open transactions keeping `max_transaction_frames`
  frames in all;
- `max_connections` connections (more are refused at once).
A connection that has not sent CONNECT within `connect_timeout`, or takes longer than
`frame_timeout` to finish a frame, gets ERROR then close (slow-loris input).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import replace

from conformance.broker.config import CHOICES, LIMITS, BrokerConfig
from conformance.broker.destinations import Store
from conformance.broker.faults import Faults
from conformance.broker.session import Reader, Session, Writer
from conformance.broker.websocket import accept

__all__ = ["CHOICES", "LIMITS", "Broker", "BrokerConfig", "embedded"]


class Broker:
    def __init__(self, config: BrokerConfig | None = None) -> None:
        self.config = config or BrokerConfig()
        #: the fault switches on, read by every connection
        self.faults = Faults.of(self.config.faults)
        self.store = Store(max_bytes=self.config.max_held_bytes,
                           id_prefix="ID:reference:1:" if self.config.colon_ids else "m-")
        self.sessions: set[Session] = set()
        self.server: asyncio.Server | None = None
        self.ws_server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self.server is not None, "the broker is not started"
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    @property
    def ws_port(self) -> int:
        assert self.ws_server is not None, "the broker serves no WebSocket"
        port: int = self.ws_server.sockets[0].getsockname()[1]
        return port

    def url(self, *, websocket: bool = False) -> str:
        """Where a client reaches this broker: HOST:PORT, or ws://HOST:PORT/PATH."""
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        if websocket:
            return f"ws://{host}:{self.ws_port}{self.config.ws_path}"
        return f"{host}:{self.port}"

    async def start(self) -> None:
        config = self.config
        self.server = await asyncio.start_server(self._accept, config.host, config.port,
                                                 reuse_address=True)
        if config.ws_port is not None:
            try:
                self.ws_server = await asyncio.start_server(
                    self._accept_ws, config.host, config.ws_port, reuse_address=True)
            except BaseException:
                self.server.close()
                raise

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._admit(writer):
            await self._serve(reader, writer)

    async def _accept_ws(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        """A WebSocket client: its upgrade answered, then the same session as over TCP."""
        if not self._admit(writer):
            return
        stream = await accept(reader, writer, self.config, self.faults)
        if stream is not None:
            await self._serve(stream, stream, stream.versions)

    def _admit(self, writer: asyncio.StreamWriter) -> bool:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if len(self.sessions) >= self.config.max_connections:
            writer.close()
            return False
        return True

    async def _serve(self, reader: Reader, writer: Writer,
                     versions: tuple[str, ...] | None = None) -> None:
        """`versions`: those the connection allows (a WebSocket offer's; None: any)."""
        session = Session(self.config, self.faults, self.store, reader, writer,
                          self.sessions, versions=versions)
        self.sessions.add(session)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await session.run()
        finally:
            self._tasks.discard(task)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            if self.ws_server is not None:
                self.ws_server.close()
            for session in list(self.sessions):
                session.shut()
            if self._tasks:  # let every session end its own way: requeue, abort, close
                await asyncio.wait(self._tasks, timeout=5)
            await self.server.wait_closed()
            if self.ws_server is not None:
                await self.ws_server.wait_closed()

    async def serve_forever(self) -> None:
        assert self.server is not None
        async with self.server:
            await self.server.serve_forever()


@contextlib.asynccontextmanager
async def embedded(config: BrokerConfig | None = None, *,
                   websocket: bool = False) -> AsyncIterator[Broker]:
    """A broker on a free loopback port for the duration of the block; `websocket`: on a
    second free port for WebSocket too (`url(websocket=True)`)."""
    config = config or BrokerConfig(port=0)
    if websocket and config.ws_port is None:
        config = replace(config, ws_port=0)
    broker = Broker(config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()
