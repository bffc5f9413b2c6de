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
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from conformance import __version__
from conformance.clients.driver_heartbeats import HeartBeating
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
from conformance.spec.grammar import BODY_COMMANDS, UNESCAPED_COMMANDS
from conformance.wire.stream import Transport, TransportError
from conformance.wire.transport import open_transport, parse_broker

LIBRARY = "stomp-conformance reference driver"


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


#: The writing faults the codec's `encode` cannot express: their frames go through `raw`.
RAW_WRITING = frozenset({"crlf-eols", "newline-body", "no-nul-after-body", "escape-connect",
                         "no-send-escape", "escape-v10", "count-characters",
                         "no-content-length", "names-not-escaped"})
#: backslash-escape-greedy's decoding: each escape replaced in turn, \\ last
GREEDY = (("\\n", "\n"), ("\\r", "\r"), ("\\c", ":"), ("\\\\", "\\"))


class Client(HeartBeating):
    def __init__(self, faults: set[str]) -> None:
        self.faults = faults
        self.transport: Transport | None = None
        self.version = "1.2"
        self.parser = Parser(version="1.2", strict=False,
                             content_length="read-to-nul" not in faults)
        self.messages: list[Frame] = []
        self.waiting: dict[str, asyncio.Future[Frame]] = {}  # CONNECTED, receipt ids
        self.tasks: list[asyncio.Task[None]] = []
        self.last_write = self.last_read = 0.0
        self.receipts = 0
        #: the application's subscription id -> (destination, the id written, ack mode)
        self.subscriptions: dict[str, tuple[str, str, str]] = {}
        #: the first subscription and transaction ids (for the reused-* faults)
        self.first: dict[str, str] = {}
        #: whether heart-beats from the server were negotiated
        self.server_beats = False
        #: the messages acknowledged (ack or nack) by the application; the octets of an
        #: unfinished frame; whether the last read held a CR LF (for the reading faults)
        self.settled: set[int] = set()
        self.tail = b""
        self.crlf_read = False

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
        await self.write(self.wire(command, headers, body))
        if command == "DISCONNECT" and "frames-after-disconnect" in self.faults:
            for _, written, _ in self.subscriptions.values():
                await self.write(self.wire("UNSUBSCRIBE", [("id", written)]))
        return await asyncio.wait_for(waiter, 10) if waiter is not None else None

    def wire(self, command: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
        """A frame's octets: the codec's encoding for the session's version, bent by the
        writing faults."""
        faults = self.faults
        if "trim-headers" in faults:
            headers = [(k, v.strip()) for k, v in headers]
        if command == "CONNECT" and "stomp-command" in faults:
            command = "STOMP"
        if not (faults & RAW_WRITING):
            return encode(Frame(command, headers, body), version=self.version)  # type: ignore[arg-type]
        return self.raw(command, headers, body)

    def raw(self, command: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
        faults, version = self.faults, self.version
        escaped = command not in UNESCAPED_COMMANDS and (version != "1.0" or
                                                         "escape-v10" in faults)
        if command in UNESCAPED_COMMANDS and "escape-connect" in faults:
            escaped = True
        if command == "SEND" and "no-send-escape" in faults:
            escaped = False
        if escaped:
            rules = "1.1" if version == "1.0" else version
            raw_names = command == "SEND" and "names-not-escaped" in faults
            headers = [(k if raw_names else escape(k, rules),  # type: ignore[arg-type]
                        escape(v, rules)) for k, v in headers]  # type: ignore[arg-type]
        length: int | None = None
        if body and not (command == "SEND" and "no-content-length" in faults):
            length = len(body.decode("utf-8", "replace")) if "count-characters" in faults \
                else len(body)
        if not body and command not in BODY_COMMANDS and "newline-body" in faults:
            body = b"\n"
        nul = b"" if length is not None and "no-nul-after-body" in faults else b"\x00"
        eol = b"\r\n" if "crlf-eols" in faults else b"\n"
        return encode_raw(command, headers, body, content_length=length, nul=nul, eol=eol)

    # -- reading -------------------------------------------------------------------------

    async def read(self) -> None:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        try:
            while data := await self.transport.receive():
                self.last_read = loop.time()
                if "read-past-nul" in self.faults and data.count(b"\x00") > 1 \
                        and b"content-length" not in data:
                    cut = data.rindex(b"\x00")
                    data = data[:cut].replace(b"\x00", b"") + data[cut:]
                self.crlf_read = b"\r\n" in data
                if "crlf-heartbeat-fatal" in self.faults and self.crlf_read \
                        and not data.strip(b"\r\n"):
                    print("a CR where a frame must start", file=sys.stderr)
                    break
                try:
                    events = self.parser.feed(data)
                except StompError as error:
                    print(f"unreadable frame: {error}", file=sys.stderr)
                    break
                if not all(map(self.take, events)):
                    break
                if "ws-message-is-frame" in self.faults and self.parser.buffered:
                    # a message's unfinished frame dropped (over WebSocket, each receive is
                    # one message's octets)
                    self.parser = Parser(version=self.parser.version, strict=False)
                self.tail = (self.tail + data)[-self.parser.buffered:] \
                    if self.parser.buffered else b""
                if "headers-in-one-read" in self.faults and self.tail \
                        and b"\n\n" not in self.tail.replace(b"\r\n", b"\n"):
                    # the head of a frame still arriving is dropped
                    self.parser = Parser(version=self.parser.version, strict=False)
                    self.tail = b""
        except TransportError as error:  # a reset: the connection is gone all the same
            print(f"connection lost: {error}", file=sys.stderr)
        await self.transport.close()
        for waiter in self.waiting.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError("the server closed the connection"))
        if "ignore-close" not in self.faults:
            emit("disconnected")

    def take(self, event: Frame | Heartbeat) -> bool:
        """Take one event of the server's; False when it is fatal to the connection."""
        if isinstance(event, Heartbeat):
            if "eol-after-nul-fatal" in self.faults and not self.server_beats:
                print("an EOL where a frame must start", file=sys.stderr)
                return False
            return True
        fatal = [v for v in event.violations
                 if v.statement.startswith("value-encoding.undefined-escape-fatal")]
        if fatal and "lenient-escapes" not in self.faults:
            print(f"fatal protocol error: {fatal[0].message}", file=sys.stderr)
            return False
        if "content-length-only-with-body" in self.faults and "content-length" in event \
                and event.command not in BODY_COMMANDS:
            print(f"content-length on a {event.command} frame", file=sys.stderr)
            return False
        self.received(event)
        return True

    def received(self, frame: Frame) -> None:
        command = frame.command
        frame = frame.replace(headers=self.decoded(frame.headers))
        if "crlf-kept-outside-message" in self.faults and self.crlf_read and \
                command != "MESSAGE":
            frame = frame.replace(headers=[(k, v + "\r") for k, v in frame.headers])
        if "body-as-text" in self.faults and "content-type" not in frame:
            frame = frame.replace(body=frame.body.decode("utf-8", "replace").encode())
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

    def decoded(self, headers: Sequence[tuple[str, str]]) -> Sequence[tuple[str, str]]:
        """A frame's headers as the application gets them, bent by the reading faults."""
        faults = self.faults
        if "raw-header-names" in faults and self.version != "1.0":
            headers = [(k, unescape(v, self.version)) for k, v in headers]  # type: ignore[arg-type]
        if "backslash-escape-greedy" in faults and self.version != "1.0":
            for escaped, meant in GREEDY:
                headers = [(k.replace(escaped, meant), v.replace(escaped, meant))
                           for k, v in headers]
        if "trim-headers" in faults:
            headers = [(k, v.strip()) for k, v in headers]
        if "latin1-headers" in faults:
            headers = [(k, v.encode("utf-8", "surrogateescape").decode("latin-1"))
                       for k, v in headers]
        if "case-insensitive-headers" in faults:
            headers = [(k.lower(), v) for k, v in headers]
        return headers

    def reported(self, frame: Frame) -> list[list[str]] | dict[str, str]:
        if "last-header-wins" in self.faults:
            return dict(frame.headers)
        return [[k, v] for k, v in frame.headers]

    # -- commands ------------------------------------------------------------------------

    async def connect(self, args: dict[str, Any]) -> dict[str, Any]:
        url = urlsplit(str(args["url"]))
        if url.scheme not in ("tcp", "ws") or not url.hostname or not url.port:
            raise NotImplementedError(f"unsupported: url {args['url']!r} (tcp:// or ws:// only)")
        faults, version = self.faults, str(args.get("version", "1.2"))
        # over WebSocket, the subprotocol of the version asked, as accept-version names it
        # (websocket.py, with wsproto, loaded then only: a driver starts for every case run)
        subprotocols = None
        if url.scheme == "ws":
            from conformance.wire.websocket import SUBPROTOCOL_VERSIONS
            subprotocols = [n for n, v in SUBPROTOCOL_VERSIONS.items() if v == version]
        self.transport = await open_transport(
            parse_broker(str(args["url"]).removeprefix("tcp://")), subprotocols=subprotocols)
        headers: list[tuple[str, str]] = []
        if version != "1.0":
            if "no-accept-version" not in faults:
                headers.append(("accept-version", f"{version},1.0"
                                if "descending-accept-version" in faults else version))
            if "no-host" not in faults:
                headers.append(("host", str(args.get("host") or url.hostname)))
        for name in ("login", "passcode"):
            if args.get(name):
                written = "password" if name == "passcode" and "no-passcode" in faults else name
                headers.append((written, str(args[name])))
        if args.get("heart_beat") and version != "1.0":
            offer = str(args["heart_beat"])
            headers.append(("heart-beat", offer.replace(",", ", ")
                            if "heart-beat-spaces" in faults else offer))
        headers += [(str(k), str(v)) for k, v in (args.get("headers") or {}).items()]
        waiter = self.waiting["CONNECTED"] = asyncio.get_running_loop().create_future()
        self.tasks.append(asyncio.create_task(self.read()))
        stomp = "stomp-not-connect" in faults and version != "1.0"
        await self.write(self.wire("STOMP" if stomp else "CONNECT", headers))
        connected = await asyncio.wait_for(waiter, 10)
        self.version = (connected.get("version") or "1.0").rstrip("\r")
        self.parser.version = self.version  # type: ignore[assignment]
        if faults & {"crlf-not-eol", "no-cr-escape"} and self.version == "1.2":
            self.parser.version = "1.1"
        if faults & {"raw-header-names", "backslash-escape-greedy"}:
            self.parser.version = "1.0"  # values are unescaped in `decoded`, names not
        if "escape-v10" in faults and self.version == "1.0":
            self.parser.version = "1.1"
        self.start_heartbeats(args.get("heart_beat"), connected.get("heart-beat"))
        emit("connected", headers=[[k, v] for k, v in connected.headers])
        return {}

    async def command(self, op: str, args: dict[str, Any]) -> None:
        if op == "connect":
            await self.connect(args)
        elif op == "send":
            await self.send(args)
        elif op == "subscribe":
            await self.subscribe(args)
        elif op == "unsubscribe":
            destination, written, _ = self.subscriptions.pop(str(args["id"]),
                                                             ("", str(args["id"]), ""))
            headers = [("id", written)]
            if destination and "unsubscribe-by-destination" in self.faults:
                headers = [("destination", destination)]
            elif destination and "unsubscribe-unknown-id" in self.faults:
                headers = [("id", destination)]
            await self.frame("UNSUBSCRIBE", headers)
        elif op in ("ack", "nack"):
            message = self.messages[int(args["message"])]
            self.settled.add(int(args["message"]))
            if op == "ack" and "no-ack-in-client-mode" in self.faults and \
                    self.ack_mode(message) == "client":
                return
            await self.frame(op.upper(), self.ack_headers(op.upper(), message,
                                                          args.get("transaction")))
        elif op in ("begin", "commit", "abort"):
            await self.transaction(op, str(args["transaction"]))
        elif op == "disconnect":
            if "ack-unacked-on-disconnect" in self.faults:
                for n, message in enumerate(self.messages):
                    if n not in self.settled and self.ack_mode(message) != "auto":
                        await self.frame("ACK", self.ack_headers("ACK", message, None))
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

    async def send(self, args: dict[str, Any]) -> None:
        faults = self.faults
        text = "body_b64" not in args
        body = str(args.get("body", "")).encode() if text else base64.b64decode(args["body_b64"])
        name = "Destination" if "send-destination-capitalized" in faults else "destination"
        headers = [(name, str(args["destination"]))]
        headers += [(str(k), str(v)) for k, v in (args.get("headers") or {}).items()]
        # a text body the application gave no content-type is labelled as what it is
        if body and text and "content-type" not in dict(headers) and \
                "no-content-type" not in faults:
            headers.append(("content-type", "text" if "bad-content-type" in faults
                            else "text/plain;charset=utf-8"))
        await self.frame("SEND", headers, body, receipt=args.get("receipt", False))

    async def subscribe(self, args: dict[str, Any]) -> None:
        given, destination = str(args["id"]), str(args["destination"])
        written = self.first.setdefault("subscription", given) \
            if "reused-subscription-id" in self.faults else given
        mode = str(args.get("ack") or "")
        headers = [("destination", destination)]
        if "subscribe-no-id" not in self.faults:
            headers.append(("id", written))
        if mode:
            headers.append(("ack", mode.upper() if "ack-mode-case" in self.faults else mode))
        self.subscriptions[given] = (destination, written, mode or "auto")
        await self.frame("SUBSCRIBE", headers, receipt=args.get("receipt", False))

    async def transaction(self, op: str, transaction: str) -> None:
        faults = self.faults
        if op == "begin" and "reused-transaction-id" in faults:
            transaction = self.first.setdefault("transaction", transaction)
        left_out = f"{op}-without-transaction" in faults
        await self.frame(op.upper(), [] if left_out else [("transaction", transaction)])

    def ack_mode(self, message: Frame) -> str:
        """The ack mode of the subscription a message came for."""
        return next((mode for _, written, mode in self.subscriptions.values()
                     if written == message.get("subscription")), "auto")

    def ack_headers(self, command: str, message: Frame,
                    transaction: Any) -> list[tuple[str, str]]:
        faults = self.faults
        message_id = message.get("message-id") or ""
        fault = "ack" if command == "ACK" else "nack"
        if self.version != "1.2" and "ack-id-header" in faults:
            headers = [("id", message_id)]
        elif self.version == "1.2":
            wrong = f"{fault}-message-id" in faults
            headers = [("id", message_id if wrong else message.get("ack") or "")]
        elif self.version == "1.1":
            headers = [("message-id", message_id)]
            if f"{fault}-no-subscription" not in faults:
                headers.append(("subscription", message.get("subscription") or ""))
        else:
            headers = [("message-id", message_id)]
        return headers + ([("transaction", str(transaction))] if transaction else [])


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
