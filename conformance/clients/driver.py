"""The reference driver: a STOMP client built on the project's codec, speaking the driver
contract (cases/clients/README.md) on its standard input and output, over TCP (tcp://) or
STOMP over WebSocket (ws://) through the project's own transports (wire/). It passes every
client case; each `--fault NAME` (faults.py) makes it break one client statement, so that
every client case is shown able to fail.

    python -m conformance.clients.driver [--fault NAME ...]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
from typing import Any
from urllib.parse import urlsplit

from conformance import __version__
from conformance.clients.faults import CLIENT_FAULTS, check
from conformance.codec import (
    Frame,
    Heartbeat,
    Parser,
    StompError,
    encode,
    encode_raw,
    escape,
    unescape,
)
from conformance.spec.grammar import HEART_BEAT
from conformance.wire.stream import Transport, TransportError
from conformance.wire.transport import open_transport, parse_broker
from conformance.wire.websocket import SUBPROTOCOL_VERSIONS

LIBRARY = "stomp-conformance reference driver"


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


class Client:
    def __init__(self, faults: set[str]) -> None:
        self.faults = faults
        self.transport: Transport | None = None
        self.version = "1.2"
        self.parser = Parser(version="1.2", strict=False,
                             content_length="read-to-nul" not in faults)
        self.messages: list[Frame] = []
        self.waiting: dict[str, asyncio.Future[Frame]] = {}  # CONNECTED, receipt ids
        self.tasks: list[asyncio.Task[None]] = []
        self.last_write = 0.0
        self.receipts = 0

    # -- writing -------------------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        if self.transport is None:
            raise RuntimeError("not connected")
        await self.transport.send(data)
        self.last_write = asyncio.get_running_loop().time()

    async def frame(self, command: str, headers: list[tuple[str, str]], body: bytes = b"",
                    *, receipt: bool | str = False) -> Frame | None:
        """Write a frame (asking a receipt if told) and wait for its RECEIPT."""
        waiter: asyncio.Future[Frame] | None = None
        if receipt:
            self.receipts += 1
            value = receipt if isinstance(receipt, str) else f"rcpt-{self.receipts}"
            headers = [*headers, ("receipt", value)]
            waiter = self.waiting[value] = asyncio.get_running_loop().create_future()
        if command == "SEND" and "no-send-escape" in self.faults and self.version != "1.0":
            data = encode_raw(command, headers, body,
                              content_length=None if "no-content-length" in self.faults
                              else len(body))
        elif command == "SEND" and "no-content-length" in self.faults:
            data = encode_raw(command, _escaped(headers, self.version), body)
        else:
            data = encode(Frame(command, headers, body), version=self.version)  # type: ignore[arg-type]
        await self.write(data)
        return await asyncio.wait_for(waiter, 10) if waiter is not None else None

    # -- reading -------------------------------------------------------------------------

    async def read(self) -> None:
        assert self.transport is not None
        try:
            while data := await self.transport.receive():
                try:
                    events = self.parser.feed(data)
                except StompError as error:
                    print(f"unreadable frame: {error}", file=sys.stderr)
                    break
                for event in events:
                    if not isinstance(event, Heartbeat):
                        self.received(event)
                if "ws-message-is-frame" in self.faults and self.parser.buffered:
                    # a message's unfinished frame dropped (over WebSocket, each receive is
                    # one message's octets)
                    self.parser = Parser(version=self.parser.version, strict=False)
        except TransportError as error:  # a reset: the connection is gone all the same
            print(f"connection lost: {error}", file=sys.stderr)
        for waiter in self.waiting.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError("the server closed the connection"))
        if "ignore-close" not in self.faults:
            emit("disconnected")

    def received(self, frame: Frame) -> None:
        command = frame.command
        if "raw-header-names" in self.faults and self.version != "1.0":
            frame.headers = [(k, unescape(v, self.version))  # type: ignore[arg-type]
                             for k, v in frame.headers]
        if command == "CONNECTED":
            waiter = self.waiting.pop("CONNECTED", None)
            if waiter is not None and not waiter.done():
                waiter.set_result(frame)
        elif command == "MESSAGE":
            self.messages.append(frame)
            emit("message", n=len(self.messages) - 1, headers=self.reported(frame),
                 body_b64=base64.b64encode(frame.body).decode())
        elif command == "RECEIPT" and "ignore-receipt" not in self.faults:
            receipt = frame.get("receipt-id") or ""
            emit("receipt", id=receipt)
            waiter = self.waiting.pop(receipt, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(frame)
        elif command == "ERROR" and "ignore-error" not in self.faults:
            emit("error", headers=self.reported(frame),
                 body_b64=base64.b64encode(frame.body).decode())
            for waiter in self.waiting.values():
                if not waiter.done():
                    waiter.set_exception(ConnectionError(frame.get("message") or "ERROR"))

    def reported(self, frame: Frame) -> list[list[str]] | dict[str, str]:
        if "last-header-wins" in self.faults:
            return dict(frame.headers)
        return [[k, v] for k, v in frame.headers]

    # -- commands ------------------------------------------------------------------------

    async def connect(self, args: dict[str, Any]) -> dict[str, Any]:
        url = urlsplit(str(args["url"]))
        if url.scheme not in ("tcp", "ws") or not url.hostname or not url.port:
            raise NotImplementedError(f"unsupported: url {args['url']!r} (tcp:// or ws:// only)")
        version = str(args.get("version", "1.2"))
        # over WebSocket, the subprotocol of the version asked, as accept-version names it
        self.transport = await open_transport(
            parse_broker(str(args["url"]).removeprefix("tcp://")),
            subprotocols=[n for n, v in SUBPROTOCOL_VERSIONS.items() if v == version])
        headers: list[tuple[str, str]] = []
        if version != "1.0":
            if "no-accept-version" not in self.faults:
                headers.append(("accept-version", version))
            if "no-host" not in self.faults:
                headers.append(("host", str(args.get("host") or url.hostname)))
        for name in ("login", "passcode"):
            if args.get(name):
                headers.append((name, str(args[name])))
        if args.get("heart_beat") and version != "1.0":
            headers.append(("heart-beat", str(args["heart_beat"])))
        headers += [(str(k), str(v)) for k, v in (args.get("headers") or {}).items()]
        if "escape-connect" in self.faults:
            data = encode_raw("CONNECT", _escaped(headers, "1.2"))
        else:
            data = encode(Frame("CONNECT", headers), version="1.2")
        waiter = self.waiting["CONNECTED"] = asyncio.get_running_loop().create_future()
        self.tasks.append(asyncio.create_task(self.read()))
        await self.write(data)
        connected = await asyncio.wait_for(waiter, 10)
        self.version = connected.get("version") or "1.0"
        self.parser.version = "1.1" if "crlf-not-eol" in self.faults and \
            self.version == "1.2" else self.version  # type: ignore[assignment]
        if "raw-header-names" in self.faults:
            self.parser.version = "1.0"  # values are unescaped in `received`, names not
        self.start_heartbeats(args.get("heart_beat"), connected.get("heart-beat"))
        emit("connected", headers=[[k, v] for k, v in connected.headers])
        return {}

    def start_heartbeats(self, offered: Any, answered: str | None) -> None:
        mine = HEART_BEAT.match(str(offered or "0,0"))
        theirs = HEART_BEAT.match(answered or "0,0")
        if not (mine and theirs) or self.version == "1.0":
            return
        cx, sy = int(mine.group(1)), int(theirs.group(2))
        if cx and sy and "no-heartbeats" not in self.faults:
            every = max(cx, sy) / 1000 * (3 if "slow-heartbeats" in self.faults else 1)
            self.tasks.append(asyncio.create_task(self.beat(every)))

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

    async def command(self, op: str, args: dict[str, Any]) -> None:
        if op == "connect":
            await self.connect(args)
        elif op == "send":
            body = base64.b64decode(args["body_b64"]) if "body_b64" in args else \
                str(args.get("body", "")).encode()
            headers = [("destination", str(args["destination"]))]
            headers += [(str(k), str(v)) for k, v in (args.get("headers") or {}).items()]
            await self.frame("SEND", headers, body, receipt=args.get("receipt", False))
        elif op == "subscribe":
            headers = [("destination", str(args["destination"])), ("id", str(args["id"]))]
            if args.get("ack"):
                headers.append(("ack", str(args["ack"])))
            await self.frame("SUBSCRIBE", headers, receipt=args.get("receipt", False))
        elif op == "unsubscribe":
            await self.frame("UNSUBSCRIBE", [("id", str(args["id"]))])
        elif op in ("ack", "nack"):
            await self.frame(op.upper(), self.ack_headers(self.messages[int(args["message"])],
                                                          args.get("transaction")))
        elif op in ("begin", "commit", "abort"):
            await self.frame(op.upper(), [("transaction", str(args["transaction"]))])
        elif op == "disconnect":
            await self.frame("DISCONNECT", [], receipt=bool(args.get("receipt")))
            await self.hang_up()
        else:
            raise NotImplementedError(f"unsupported: no command {op!r}")

    async def hang_up(self) -> None:
        """This side ends the connection: the reader and heart-beats stop first (a
        WebSocket's close reads the server's answering close itself)."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.transport is not None:
            await self.transport.close()
        if "ignore-close" not in self.faults:
            emit("disconnected")

    def ack_headers(self, message: Frame, transaction: Any) -> list[tuple[str, str]]:
        message_id = message.get("message-id") or ""
        if self.version == "1.2":
            ack = message_id if "ack-message-id" in self.faults else message.get("ack") or ""
            headers = [("id", ack)]
        elif self.version == "1.1":
            headers = [("message-id", message_id)]
            if "ack-no-subscription" not in self.faults:
                headers.append(("subscription", message.get("subscription") or ""))
        else:
            headers = [("message-id", message_id)]
        return headers + ([("transaction", str(transaction))] if transaction else [])


def _escaped(headers: list[tuple[str, str]], version: str) -> list[tuple[str, str]]:
    return [(escape(k, version), escape(v, version))  # type: ignore[arg-type]
            for k, v in headers]


async def serve(faults: set[str]) -> None:
    client = Client(faults)
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    emit("ready", library=LIBRARY, version=__version__,
         **({"faults": sorted(faults)} if faults else {}))
    commands: asyncio.Queue[bytes] = asyncio.Queue()
    stop = asyncio.Event()

    async def read_commands() -> None:
        # read ahead of the commands that run, so that `exit` (or the input closing) ends
        # one that would wait forever
        while (line := await stdin.readline()) and b'"exit"' not in line:
            await commands.put(line)
        stop.set()

    reading = asyncio.create_task(read_commands())
    stopping = asyncio.create_task(stop.wait())
    while not stop.is_set():
        getting = asyncio.create_task(commands.get())
        await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not getting.done():
            getting.cancel()
            break
        try:
            command = json.loads(getting.result())
            op = str(command.pop("op"))
        except (ValueError, KeyError, AttributeError, TypeError):
            emit("failed", op="?", error="not a command line")
            continue
        running = asyncio.create_task(client.command(op, command))
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not running.done():
            running.cancel()
            break
        error = running.exception()
        if isinstance(error, NotImplementedError):
            emit("failed", op=op, error=str(error))
        elif error is not None:  # the library's failure, reported as the contract says
            emit("failed", op=op, error=f"{type(error).__name__}: {error}")
        else:
            emit("done", op=op)
    reading.cancel()
    for task in client.tasks:
        task.cancel()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.clients.driver",
                                     description="The reference STOMP client driver.")
    parser.add_argument("--fault", action="append", default=[], metavar="NAME",
                        help=f"break one client statement: {', '.join(sorted(CLIENT_FAULTS))}")
    args = parser.parse_args(argv)
    try:
        check(args.fault)
    except ValueError as error:
        parser.error(str(error))
    asyncio.run(serve(set(args.fault)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
