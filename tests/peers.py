"""Small STOMP peers on loopback for the engine's tests: a tiny broker that follows the
spec for the few frames the tests use, with switches that make it misbehave, and hostile
peers (silent, garbage, endless frame, closing mid-frame)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from ssl import SSLContext

from conformance.codec import Frame, Parser, StompError, encode
from conformance.spec.grammar import negotiate, parse_accept_version

Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class TinyBroker:
    """CONNECT/STOMP, SEND, SUBSCRIBE (one queue, auto ack), RECEIPT, ERROR then close.
    `faults` names what to get wrong: 'no-close-after-error', 'no-receipt', 'no-ack-header',
    'no-error-message', 'extra-after-error'."""

    def __init__(self, *faults: str) -> None:
        self.faults = set(faults)
        self.subscribers: dict[str, list[tuple[asyncio.StreamWriter, str, str]]] = {}
        self.count = 0

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        parser = Parser(version="1.2", strict=False)
        version = "1.2"

        def send(frame: Frame) -> None:
            writer.write(encode(frame, version=version))  # type: ignore[arg-type]

        async def error(message: str, receipt: str | None) -> None:
            headers = {} if "no-error-message" in self.faults else {"message": message}
            if receipt:
                headers["receipt-id"] = receipt
            send(Frame("ERROR", headers, message.encode()))
            if "extra-after-error" in self.faults:
                send(Frame("RECEIPT", {"receipt-id": "late"}))
            await writer.drain()
            if "no-close-after-error" not in self.faults:
                writer.close()
                raise ConnectionResetError

        try:
            while data := await reader.read(65536):
                try:
                    frames = [e for e in parser.feed(data) if isinstance(e, Frame)]
                except StompError as problem:
                    await error(problem.message, None)
                    continue
                for frame in frames:
                    receipt = frame.get("receipt")
                    if frame.violations:
                        await error(frame.violations[0].message, receipt)
                    elif frame.command in ("CONNECT", "STOMP"):
                        chosen = negotiate(parse_accept_version(frame.get("accept-version")))
                        if chosen is None:
                            await error("no common version", None)
                        version = chosen or "1.2"
                        parser.version = version  # type: ignore[assignment]
                        send(Frame("CONNECTED", {"version": version, "server": "tiny/1.0"}))
                    elif frame.command == "SUBSCRIBE":
                        self.subscribers.setdefault(frame.get("destination") or "", []).append(
                            (writer, frame.get("id") or "", frame.get("ack") or "auto"))
                    elif frame.command == "SEND":
                        for out, sub, ack in self.subscribers.get(frame.get("destination") or "",
                                                                  []):
                            self.count += 1
                            headers = [("subscription", sub), ("message-id", str(self.count)),
                                       *[(k, v) for k, v in frame.headers
                                         if k not in ("receipt", "content-length")]]
                            if ack != "auto" and "no-ack-header" not in self.faults:
                                headers.append(("ack", str(self.count)))
                            out.write(encode(Frame("MESSAGE", headers, frame.body)))
                    elif frame.command == "DISCONNECT":
                        if receipt:
                            send(Frame("RECEIPT", {"receipt-id": receipt}))
                        await writer.drain()
                        writer.close()
                        return
                    elif frame.command not in ("UNSUBSCRIBE", "ACK", "NACK", "BEGIN",
                                               "COMMIT", "ABORT"):
                        await error(f"unknown command {frame.command}", receipt)
                        continue
                    if receipt and "no-receipt" not in self.faults:
                        send(Frame("RECEIPT", {"receipt-id": receipt}))
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Accepts, reads, never answers."""
    while await reader.read(65536):
        pass


async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(65536)
    writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n\xff\xfe\x00" * 10)
    await writer.drain()
    await reader.read(65536)


async def mid_frame(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(65536)
    writer.write(b"CONNECTED\nversion:1.2\n\nhalf a fra")
    await writer.drain()
    writer.close()


async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED, then a MESSAGE whose header line never ends, as fast as it can."""
    await reader.read(65536)
    writer.write(b"CONNECTED\nversion:1.2\n\n\x00MESSAGE\nx:")
    chunk = b"y" * 65536
    try:
        for _ in range(20_000):  # bounded: at most about 1.3 GB, cut by the client long before
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass


@contextlib.contextmanager
def serving(behaviour: Behaviour, *, ssl: SSLContext | None = None) -> Iterator[int]:
    """Serve `behaviour` on 127.0.0.1 (over TLS with `ssl`) in a thread of its own; yield
    the port."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    port: list[int] = []

    async def main() -> None:
        server = await asyncio.start_server(behaviour, "127.0.0.1", 0, ssl=ssl)
        port.append(server.sockets[0].getsockname()[1])
        started.set()
        async with server:
            await server.serve_forever()

    def target() -> None:
        loop.run_until_complete(_quiet(main()))
        # let every connection handler run its own cleanup before the loop goes
        loop.run_until_complete(_finish_all())
        loop.close()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield port[0]
    finally:
        # one call in the loop's own thread: cancelling the server lets the loop close, so
        # the tasks cannot be cancelled one call at a time from here
        loop.call_soon_threadsafe(_cancel_all)
        thread.join(5)


def _cancel_all() -> None:
    for task in asyncio.all_tasks():
        task.cancel()


async def _finish_all() -> None:
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    await asyncio.gather(*others, return_exceptions=True)


async def _quiet(main: Awaitable[None]) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        await main


async def endless_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED, then a MESSAGE body that never gets its NUL."""
    await reader.read(65536)
    writer.write(b"CONNECTED\nversion:1.2\n\n\x00MESSAGE\ndestination:/q\n\n")
    chunk = b"z" * 65536
    try:
        for _ in range(20_000):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
