"""A driver (cases/clients/README.md) for aiostomp: its AioStomp client on an asyncio loop,
with a message handler and an error handler reporting what it hands the application.

aiostomp offers STOMP 1.1 only, over TCP only (asyncio's create_connection: no WebSocket
transport, so a ws:// url is unsupported), and has no receipts, transactions or DISCONNECT
frame: those commands are reported unsupported. It hands the application no CONNECTED
frame either: `connect` returns once the socket is open and the CONNECT written, so
`connected` reports no headers."""

from __future__ import annotations

import asyncio
import sys
from importlib.metadata import version as installed
from typing import Any

from aiostomp import AioStomp
from aiostomp.errors import ExceededRetryCount, StompError
from contract import Unsupported, address, answer, b64, commands, emit, heart_beat, text_or_bytes


class Client(AioStomp):
    def connection_lost(self, exc: Exception | None) -> None:
        emit("disconnected")
        super().connection_lost(exc)


class Driver:
    def __init__(self) -> None:
        self.client: Client | None = None
        self.messages: list[Any] = []
        self.subscriptions: dict[str, Any] = {}  # the case's id -> aiostomp's Subscription
        self.gave_up = False  # its connecting failed (it reports that to the error handler)

    async def on_message(self, frame: Any, message: bytes | None) -> None:
        self.messages.append(frame)
        emit("message", n=len(self.messages) - 1, headers=dict(frame.headers),
             body_b64=b64(message))

    async def on_error(self, error: Exception) -> None:
        if isinstance(error, ExceededRetryCount):
            self.gave_up = True
        elif isinstance(error, StompError):
            emit("error", headers={"message": str(error)}, body_b64=b64(error.detail))

    async def run(self, op: str, c: dict[str, Any]) -> None:
        if op == "connect":
            if c.get("version") != "1.1":
                raise Unsupported(f"STOMP {c.get('version')}: aiostomp offers 1.1 only")
            host, port = address(str(c["url"]))
            cx, cy = heart_beat(c)
            # no reconnecting after a failed first attempt: the case sees it fail
            self.client = Client(host, port, heartbeat=bool(c.get("heart_beat")),
                                 heartbeat_interval_cx=cx, heartbeat_interval_cy=cy,
                                 reconnect_max_attempts=0, error_handler=self.on_error)
            self.gave_up = False
            await self.client.connect(c.get("login"), c.get("passcode"))
            await asyncio.sleep(0)  # a failed connect's error handler runs in the next tick
            if self.gave_up:
                raise ConnectionError("aiostomp could not connect")
            emit("connected", headers={})
            return
        client = self.client
        if client is None:
            raise RuntimeError("not connected")
        if c.get("receipt"):
            raise Unsupported("receipts (aiostomp reports no RECEIPT)")
        if op == "send":
            client.send(str(c["destination"]), text_or_bytes(c), dict(c.get("headers") or {}))
        elif op == "subscribe":
            # aiostomp numbers subscriptions itself; acknowledging is left to the driver
            self.subscriptions[str(c["id"])] = client.subscribe(
                str(c["destination"]), ack=str(c.get("ack", "auto")), handler=self.on_message,
                auto_ack=False)
        elif op == "unsubscribe":
            client.unsubscribe(self.subscriptions.pop(str(c["id"])))
        elif op in ("ack", "nack"):
            if c.get("transaction"):
                raise Unsupported("transactions")
            getattr(client, op)(self.messages[int(c["message"])])
        elif op == "disconnect":
            client.close()  # aiostomp closes the socket without a DISCONNECT frame
        elif op in ("begin", "commit", "abort"):
            raise Unsupported("transactions")
        else:
            raise Unsupported(f"no command {op!r}")


async def serve() -> None:
    emit("ready", library="aiostomp", version=installed("aiostomp"))
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()

    def read() -> None:  # stdin is read in a thread: commands() blocks
        for command in commands():
            loop.call_soon_threadsafe(lines.put_nowait, command)
        loop.call_soon_threadsafe(lines.put_nowait, None)

    loop.run_in_executor(None, read)
    driver = Driver()
    while (command := await lines.get()) is not None:
        op, fields = command
        try:
            await driver.run(op, fields)
        except Exception as error:  # the library's refusal, reported as the contract says
            answer(op, error)
        else:
            answer(op, None)


if __name__ == "__main__":
    asyncio.run(serve())
    sys.stdout.flush()
