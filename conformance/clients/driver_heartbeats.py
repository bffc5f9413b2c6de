"""The reference driver's heart-beats (driver.py): those it sends at the negotiated interval
and its watch on the server's, each bent by the heart-beat faults (faults.py)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from conformance.spec.grammar import HEART_BEAT
from conformance.wire.stream import Transport, TransportError

#: How many negotiated intervals without data from the server make the connection dead
#: (the error margin a heart-beat receiver SHOULD allow).
TOLERANCE = 2.0


class HeartBeating:
    """The heart-beat half of the reference driver's Client."""

    faults: set[str]
    version: str
    transport: Transport | None
    tasks: list[asyncio.Task[None]]
    last_write: float
    last_read: float
    #: whether heart-beats from the server were negotiated
    server_beats: bool

    async def write(self, data: bytes) -> None:
        raise NotImplementedError

    def start_heartbeats(self, offered: Any, answered: str | None) -> None:
        mine = HEART_BEAT.match(str(offered or "0,0"))
        if answered is None and "missing-heart-beat-mirrors-offer" in self.faults and mine:
            answered = f"{mine.group(2)},{mine.group(1)}"
        theirs = HEART_BEAT.match(answered or "0,0")
        if not (mine and theirs) or self.version == "1.0":
            return
        (cx, cy), (sx, sy) = map(int, mine.groups()), map(int, theirs.groups())
        if "beat-regardless" in self.faults:
            sy = sy or cx
        if "beat-when-offered-zero" in self.faults:
            cx = cx or sy
        if cx and sy and "no-heartbeats" not in self.faults:
            every = max(cx, sy) / 1000 * (3 if "slow-heartbeats" in self.faults else 1)
            self.tasks.append(asyncio.create_task(self.beat(every)))
        if sx and cy:
            self.server_beats = True
            margin = 0.9 if "heartbeat-no-tolerance" in self.faults else TOLERANCE
            self.tasks.append(asyncio.create_task(self.watch(max(sx, cy) / 1000 * margin)))

    async def beat(self, every: float) -> None:
        loop = asyncio.get_running_loop()
        while self.transport is not None and not self.transport.closed:
            # a beat is due `every` seconds after the last data written, ahead by a margin
            wait = self.last_write + every * 0.8 - loop.time()
            if wait <= 0:
                try:
                    await self.write(b"\n")
                except TransportError:  # the connection is gone: the reader says so
                    return
            else:
                await asyncio.sleep(wait)

    async def watch(self, limit: float) -> None:
        """Take the connection as dead after `limit` seconds without data from the server."""
        loop = asyncio.get_running_loop()
        while self.transport is not None and not self.transport.closed:
            wait = self.last_read + limit - loop.time()
            if wait <= 0:
                print(f"no data from the server for {limit * 1000:.0f} ms", file=sys.stderr)
                await self.transport.close()  # the reader then says the connection ended
                return
            await asyncio.sleep(wait)
