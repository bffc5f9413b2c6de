"""Hostile brokers on loopback: each accepts STOMP connections and then misbehaves in one
way a broken or malicious broker can. Every flood is bounded in time and volume, so a
peer stops by itself. Serve one with peers.serving (in a thread of the test process) or,
to keep its own memory out of a measurement, with `python tests/zoo.py NAME`, which
prints the port and serves until its standard input closes."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
import time
from collections.abc import Awaitable, Callable

Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

CONNECTED = b"CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00"
#: The most one connection of a flood sends, and for how long.
FLOOD_BYTES = 1 << 30
FLOOD_SECONDS = 60.0


async def _flood(writer: asyncio.StreamWriter, chunk: Callable[[], bytes]) -> None:
    """Write chunks as fast as the client reads them, within the flood's bounds."""
    sent, stop = 0, time.monotonic() + FLOOD_SECONDS
    try:
        while sent < FLOOD_BYTES and time.monotonic() < stop:
            data = chunk()
            writer.write(data)
            sent += len(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass


async def _drain_reads(reader: asyncio.StreamReader) -> None:
    try:
        while await reader.read(65536):
            pass
    except (ConnectionError, OSError):
        pass


async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Accepts and reads, never sends a byte."""
    await _drain_reads(reader)


async def one_byte_a_second(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers CONNECT with CONNECTED, one octet a second."""
    await reader.read(65536)
    try:
        for octet in CONNECTED:
            writer.write(bytes([octet]))
            await writer.drain()
            await asyncio.sleep(1)
    except (ConnectionError, OSError):
        pass


async def closes_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.close()


async def connected_then_silent(reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
    """CONNECTED, then it reads everything and answers nothing."""
    await reader.read(65536)
    writer.write(CONNECTED)
    await _drain_reads(reader)


async def endless_frame(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED, then a MESSAGE whose header line never ends."""
    await reader.read(65536)
    writer.write(CONNECTED + b"MESSAGE\nx:")
    chunk = b"y" * 65536
    await _flood(writer, lambda: chunk)


async def huge_content_length(reader: asyncio.StreamReader,
                              writer: asyncio.StreamWriter) -> None:
    """CONNECTED, then a MESSAGE announcing a 10 GB body, and the body as fast as read."""
    await reader.read(65536)
    writer.write(CONNECTED + b"MESSAGE\nsubscription:a\nmessage-id:1\ndestination:/queue/a\n"
                 b"content-length:10737418240\n\n")
    chunk = b"z" * 65536
    await _flood(writer, lambda: chunk)


async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED, then random octets."""
    await reader.read(65536)
    writer.write(CONNECTED)
    await _flood(writer, lambda: os.urandom(65536))


async def reset_mid_frame(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED, half a MESSAGE, then a TCP reset."""
    await reader.read(65536)
    writer.write(CONNECTED + b"MESSAGE\nsubscription:a\nmessage-id:1\n")
    await writer.drain()
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _frames(command: bytes, count: int, body: bytes) -> bytes:
    return b"".join(command + b"\nmessage:storm " + str(n).encode() + b"\nsubscription:a\n"
                    b"message-id:m" + str(n).encode() + b"\ndestination:/queue/a\n"
                    b"content-length:" + str(len(body)).encode() + b"\n\n" + body + b"\x00"
                    for n in range(count))


async def error_storm(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED, then a stream of ERROR frames that never closes the connection."""
    await reader.read(65536)
    writer.write(CONNECTED)
    storm = _frames(b"ERROR", 500, b"something went wrong")
    await _flood(writer, lambda: storm)


async def message_flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED, then MESSAGE frames of 1 KiB as fast as the client reads them."""
    await reader.read(65536)
    writer.write(CONNECTED)
    flood = _frames(b"MESSAGE", 64, b"m" * 1024)
    await _flood(writer, lambda: flood)


async def big_messages(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED, then MESSAGE frames of 8 MiB each, one after another."""
    await reader.read(65536)
    writer.write(CONNECTED)
    one = _frames(b"MESSAGE", 1, b"b" * (8 << 20))
    await _flood(writer, lambda: one)


async def many_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED with 100,000 headers."""
    await reader.read(65536)
    headers = b"".join(b"h%d:v\n" % n for n in range(100_000))
    writer.write(b"CONNECTED\nversion:1.2\n" + headers + b"\n\x00")
    await _drain_reads(reader)


ZOO: dict[str, Behaviour] = {behaviour.__name__: behaviour for behaviour in (
    never_answers, one_byte_a_second, closes_at_once, connected_then_silent, endless_frame,
    huge_content_length, garbage, reset_mid_frame, error_storm, message_flood, big_messages,
    many_headers)}


async def _serve(name: str) -> None:
    async def quiet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await ZOO[name](reader, writer)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(quiet, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    stdin_closed = loop.create_future()
    loop.add_reader(sys.stdin.fileno(), lambda: stdin_closed.done() or (
        not os.read(sys.stdin.fileno(), 1) and stdin_closed.set_result(None)))
    async with server:
        await stdin_closed
    os._exit(0)  # without cancelling the connections' tasks one by one


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1]))
