"""The reference broker under abuse from clients, in a process of its own: SEND storms from
connections that never read, thousands of subscriptions, slow consumers of a flooded
topic, all at once. Its RSS stays within its stated bounds, and a well-behaved client keeps
being served throughout."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from conformance.codec import Frame, encode

HELD = 32 << 20
HIGH_WATER = 1 << 20
STORMERS = 40
#: What the broker may hold: its base (about 40 MB), the messages it keeps (`HELD`), and
#: for each connection a frame being read and what waits to be written (`HIGH_WATER`),
#: doubled for the allocator's slack.
BOUND_MB = 60 + 2 * (HELD + (STORMERS + 4) * (HIGH_WATER + (64 << 10))) / (1 << 20)
STORM_S = 8.0


@pytest.fixture
def child_broker() -> Iterator[tuple[int, int]]:
    """(pid, port) of a reference broker started with bounds small enough to reach."""
    broker = subprocess.Popen(
        [sys.executable, "-m", "conformance", "broker", "--port", "0", "--until-stdin-closes",
         "--limit", f"held-bytes={HELD}", "--limit", f"write-high-water={HIGH_WATER}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert broker.stdout is not None and broker.stdin is not None
    line = broker.stdout.readline()
    match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
    assert match, line
    # what it says of each client it refuses, read so that it never blocks on the pipe
    threading.Thread(target=broker.stdout.read, daemon=True).start()
    try:
        yield broker.pid, int(match.group(1))
    finally:
        broker.stdin.close()
        broker.wait(30)


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


CONNECT = encode(Frame("CONNECT", {"accept-version": "1.2", "host": "load"}))


async def _open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(CONNECT)
    return reader, writer


async def _write(writer: asyncio.StreamWriter, data: bytes, until: float) -> None:
    """Write until the broker stops taking it (it closed us, or stopped reading) or time's up."""
    with contextlib.suppress(ConnectionError, OSError):
        writer.write(data)
        await asyncio.wait_for(writer.drain(), max(0.1, until - time.monotonic()))


async def storm(port: int, until: float) -> None:
    """Subscribes to the flooded topic, then SENDs with receipts and never reads."""
    _, writer = await _open(port)
    writer.write(encode(Frame("SUBSCRIBE", {"id": "s", "destination": "/topic/flooded"})))
    body = b"s" * 1024
    n = 0
    with contextlib.suppress(TimeoutError):
        while time.monotonic() < until and not writer.is_closing():
            n += 1
            await _write(writer, encode(Frame("SEND", {"destination": f"/queue/storm-{n % 50}",
                                                       "receipt": f"r{n}"}, body)), until)
    writer.close()


async def subscriptions(port: int, until: float) -> None:
    _, writer = await _open(port)
    frames = b"".join(encode(Frame("SUBSCRIBE", {"id": f"s{n}", "destination": f"/queue/q{n}"}))
                      for n in range(5000))
    with contextlib.suppress(TimeoutError):
        await _write(writer, frames, until)
    writer.close()


async def flood_topic(port: int, until: float) -> None:
    _, writer = await _open(port)
    frame = encode(Frame("SEND", {"destination": "/topic/flooded"}, b"t" * 65536))
    with contextlib.suppress(TimeoutError):
        while time.monotonic() < until and not writer.is_closing():
            await _write(writer, frame, until)
    writer.close()


async def well_behaved(port: int, until: float) -> list[float]:
    """Every 0.25 s, a SEND with a receipt to a topic it subscribes to (what the broker
    need not hold: the storm may fill its bound on held messages): how long the RECEIPT
    and the MESSAGE took to come back."""
    reader, writer = await _open(port)
    writer.write(encode(Frame("SUBSCRIBE", {"id": "calm", "destination": "/topic/calm"})))
    await asyncio.wait_for(reader.readuntil(b"\x00"), 5)  # CONNECTED
    waits = []
    n = 0
    while time.monotonic() < until:
        n += 1
        started = time.monotonic()
        writer.write(encode(Frame("SEND", {"destination": "/topic/calm", "receipt": f"c{n}"},
                                  f"calm {n}".encode())))
        answers = [await asyncio.wait_for(reader.readuntil(b"\x00"), 10) for _ in range(2)]
        assert sorted(a.split(b"\n", 1)[0] for a in answers) == [b"MESSAGE", b"RECEIPT"], \
            answers
        assert any(f"receipt-id:c{n}\n".encode() in a for a in answers), answers
        waits.append(time.monotonic() - started)
        await asyncio.sleep(0.25)
    writer.close()
    return waits


@pytest.mark.slow
def test_the_broker_holds_under_abuse_and_keeps_serving(
        child_broker: tuple[int, int], capsys: pytest.CaptureFixture[str]) -> None:
    pid, port = child_broker

    async def main() -> list[float]:
        until = time.monotonic() + STORM_S
        calm = asyncio.create_task(well_behaved(port, until))
        await asyncio.sleep(0.2)
        abuse = [asyncio.create_task(storm(port, until)) for _ in range(STORMERS)]
        abuse += [asyncio.create_task(subscriptions(port, until)),
                  asyncio.create_task(flood_topic(port, until))]
        waits = await calm
        await asyncio.gather(*abuse)
        return waits

    waits = asyncio.run(main())
    peak = peak_rss_mb(pid)
    with capsys.disabled():
        print(f"\nbroker under abuse: peak RSS {peak:.0f} MB (bound {BOUND_MB:.0f}); "
              f"{len(waits)} receipts to a calm client, the slowest in {max(waits):.2f} s")
    assert len(waits) >= STORM_S / 0.5  # served all along, not only before the storm
    assert peak < BOUND_MB
