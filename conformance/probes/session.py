"""What the probes of one run share: the options (`ProbeOptions`), the target and fresh
names (`ProbeRun`), the way onto a connection past CONNECTED and the reading of the
broker's answer to a frame; and `Failed`, a probe that cannot go on."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from conformance.codec import Frame
from conformance.spec import statement_id
from conformance.spec.grammar import Version
from conformance.wire.connection import Closed, Connection, brief
from conformance.wire.handshake import connect_frame
from conformance.wire.stream import TransportError
from conformance.wire.target import Target
from conformance.wire.transcript import Transcript


@dataclass(frozen=True)
class ProbeOptions:
    version: Version = "1.2"
    #: seconds an answer may take
    within: float = 5.0
    #: seconds each probe may take in all
    budget: float = 60.0
    #: the largest sizes the limit probes try
    max_headers: int = 65_536
    max_header_line: int = 4 << 20
    max_body: int = 64 << 20
    #: seconds between the two writes of a split frame
    pause: float = 0.002
    #: seconds between the octets of a slow-loris frame, and how long to keep at it
    slow_interval: float = 1.0
    slow_budget: float = 40.0
    #: frames written at once by `many-frames`
    many: int = 200

    def __post_init__(self) -> None:
        for name in ("within", "budget", "slow_interval", "slow_budget"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ProbeOptions.{name} must be a number of seconds above 0")
        for name in ("max_headers", "max_header_line", "max_body", "many"):
            if getattr(self, name) < 1:
                raise ValueError(f"ProbeOptions.{name} must be a positive whole number")
        if self.pause < 0:
            raise ValueError("ProbeOptions.pause must not be negative")


class Failed(Exception):
    """A probe cannot go on (a connection refused, no CONNECTED): its one-line reason."""



class ProbeRun:
    """What every probe of one run shares: the target, the options, fresh names."""

    def __init__(self, target: Target, options: ProbeOptions) -> None:
        self.target, self.options = target, options
        self.run_id = uuid.uuid4().hex[:8]
        self.count = 0
        self.transcript = Transcript(head=32 << 10, tail=32 << 10)
        self.started = time.monotonic()

    def name(self, what: str) -> str:
        self.count += 1
        return f"probe-{self.run_id}-{what}-{self.count}"

    def rule(self, rule: str) -> str:
        return statement_id(rule, self.options.version)

    async def open(self, name: str = "probe") -> Connection:
        target = self.target
        try:
            transport = await target.open(timeout=self.options.within)
        except TransportError as error:
            raise Failed(str(error)) from None
        self.transcript = Transcript(head=32 << 10, tail=32 << 10)  # the last connection's
        return Connection(name, transport, self.transcript,
                          lambda: time.monotonic() - self.started)

    def connect_frame(self) -> bytes:
        return connect_frame(self.target, self.options.version)

    async def connected(self, name: str = "probe", *, patient: bool = False) -> Connection:
        """A fresh connection past CONNECTED. `patient`: try three times, a broker still
        chewing on the last probe's frame may answer late."""
        for attempt in range(3 if patient else 1):
            conn = await self.open(name)
            await conn.send(self.connect_frame())
            event = await conn.next_event(self.options.within * (attempt + 1))
            if isinstance(event, Frame) and event.command == "CONNECTED":
                conn.set_version(event.get("version") or "1.0")
                return conn
            await conn.close(abort=True)
        raise Failed(f"CONNECT was answered with {brief(event)}")

    async def answer(self, conn: Connection, receipt: str) -> str:
        """How the broker answered a frame asking for `receipt`: 'accepted',
        'ERROR then close', 'ERROR, then FRAMES before the close', 'ERROR, the connection
        left open', 'a close without ERROR' or 'no answer'."""
        within = self.options.within
        while True:
            event = await conn.next_event(within)
            if isinstance(event, Frame) and event.command == "RECEIPT" and \
                    event.get("receipt-id") == receipt:
                return "accepted"
            if isinstance(event, Frame) and event.command == "ERROR":
                grace = time.monotonic() + min(within, 2.0)
                more = []
                while isinstance(after := await conn.next_event(
                        max(grace - time.monotonic(), 0)), Frame):
                    more.append(after.command)
                if not isinstance(after, Closed):
                    return "ERROR, the connection left open"
                return f"ERROR, then {' '.join(more)} before the close" if more else \
                    "ERROR then close"
            if isinstance(event, Closed):
                return "a close without ERROR"
            if event is None:
                return "no answer"
