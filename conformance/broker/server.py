"""The reference broker: an asyncio STOMP 1.0-1.2 server built on the project's codec.
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

from conformance.broker.config import CHOICES, LIMITS, BrokerConfig
from conformance.broker.destinations import Store
from conformance.broker.faults import Faults
from conformance.broker.session import Session

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
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self.server is not None, "the broker is not started"
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._accept, self.config.host,
                                                 self.config.port, reuse_address=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if len(self.sessions) >= self.config.max_connections:
            writer.close()
            return
        session = Session(self.config, self.faults, self.store, reader, writer,
                          self.sessions)
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
            for session in list(self.sessions):
                session.shut()
            if self._tasks:  # let every session end its own way: requeue, abort, close
                await asyncio.wait(self._tasks, timeout=5)
            await self.server.wait_closed()

    async def serve_forever(self) -> None:
        assert self.server is not None
        async with self.server:
            await self.server.serve_forever()


@contextlib.asynccontextmanager
async def embedded(config: BrokerConfig | None = None) -> AsyncIterator[Broker]:
    """A broker on a free loopback port for the duration of the block."""
    broker = Broker(config or BrokerConfig(port=0))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()
