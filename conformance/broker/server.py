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
from dataclasses import dataclass, field

from conformance.broker.faults import FAULTS
from conformance.broker.session import Session
from conformance.broker.store import Store
from conformance.codec import Limits


@dataclass(frozen=True)
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 61613
    versions: tuple[str, ...] = ("1.0", "1.1", "1.2")
    #: login -> passcode; None: no authentication
    users: dict[str, str] | None = field(default=None, repr=False)
    #: accepted values of CONNECT's host header; None: any
    vhosts: frozenset[str] | None = None
    #: the CONNECTED heart-beat: what the broker can send, what it wants (ms)
    heartbeat: tuple[int, int] = (1000, 1000)
    #: a client heart-beat may come this many times its interval late before the
    #: connection is dropped ("the receiver SHOULD be tolerant")
    heartbeat_tolerance: float = 2.0
    limits: Limits = Limits(max_headers=1000, max_header_line=64 * 1024,
                            max_body=8 * 1024 * 1024, max_frame=9 * 1024 * 1024)
    max_subscriptions: int = 1000
    max_pending: int = 1000
    max_transactions: int = 1000
    max_transaction_frames: int = 10_000
    max_held_bytes: int = 256 * 1024 * 1024
    max_connections: int = 1000
    write_high_water: int = 4 * 1024 * 1024
    connect_timeout: float = 10.0
    frame_timeout: float = 30.0
    idle_timeout: float = 600.0
    faults: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = sorted(self.faults - FAULTS.keys())
        if unknown:
            raise ValueError(f"unknown fault {', '.join(unknown)}: choose from "
                             f"{', '.join(sorted(FAULTS))}")


class Broker:
    def __init__(self, config: BrokerConfig | None = None) -> None:
        self.config = config or BrokerConfig()
        self.store = Store(max_bytes=self.config.max_held_bytes)
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
        session = Session(self, reader, writer)
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
                session.closing = True
                session.writer.close()
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
