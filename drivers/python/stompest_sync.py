"""A driver (cases/clients/README.md) for stompest's synchronous client (stompest.sync.Stomp
with a StompConfig). That client has no thread of its own: the application polls it for
frames (canRead, receiveFrame) and sends heart-beats itself (beat), as stompest's docs
show, so this driver's one thread does both between commands. stompest has no WebSocket
transport (its sync and Twisted clients open TCP sockets): a ws:// url is unsupported."""

from __future__ import annotations

import queue
import sys
import threading
import time
from importlib.metadata import version as installed
from typing import Any

from contract import Unsupported, address, answer, b64, body, commands, emit, heart_beat
from stompest.config import StompConfig
from stompest.error import StompConnectionError, StompFrameError
from stompest.protocol import StompSpec
from stompest.sync import Stomp

#: how long one poll for a frame waits (s): the latency of commands and heart-beats
POLL = 0.02


class Driver:
    def __init__(self) -> None:
        self.client: Stomp | None = None
        self.messages: list[Any] = []
        self.subscriptions: dict[str, Any] = {}  # the case's id -> stompest's token
        self.receipts: set[str] = set()

    def poll(self, timeout: float = POLL) -> None:
        """Read the frames that came, reporting each, and beat when one is due."""
        client = self.client
        if client is None:
            return
        try:
            if client.clientHeartBeat and \
                    time.time() - client.lastSent >= 0.8 * client.clientHeartBeat / 1000:
                client.beat()
            while client.canRead(timeout):
                self.report(client.receiveFrame())
                timeout = 0
        except StompConnectionError as error:
            print(f"connection lost: {error}", file=sys.stderr)
            self.client = None
            emit("disconnected")
        except StompFrameError as error:
            # a frame stompest cannot read is raised to the application, which can only
            # give the connection up: that frame is lost, and what follows it with it
            emit("error", headers={"message": str(error)}, body_b64=b64(b""))
            client.close()
            self.client = None
            emit("disconnected")

    def report(self, frame: Any) -> None:
        if frame.command == StompSpec.MESSAGE:
            self.messages.append(frame)
            emit("message", n=len(self.messages) - 1, headers=dict(frame.headers),
                 body_b64=b64(frame.body))
        elif frame.command == StompSpec.RECEIPT:
            receipt = frame.headers.get(StompSpec.RECEIPT_ID_HEADER, "")
            self.receipts.add(receipt)
            emit("receipt", id=receipt)
        elif frame.command == StompSpec.ERROR:
            emit("error", headers=dict(frame.headers), body_b64=b64(frame.body))

    def run(self, op: str, c: dict[str, Any]) -> None:
        if op == "connect":
            host, port = address(str(c["url"]))
            version = str(c.get("version", "1.2"))
            client = Stomp(StompConfig(f"tcp://{host}:{port}", login=c.get("login"),
                                       passcode=c.get("passcode"), version=version))
            # stompest refuses heart-beats at 1.0, even (0, 0)
            beats = None if version == StompSpec.VERSION_1_0 else heart_beat(c)
            client.connect(versions=[version], host=c.get("host"), heartBeats=beats,
                           connectTimeout=10, connectedTimeout=10)
            self.client, session = client, client.session
            # stompest keeps the CONNECTED frame to itself: these are what it hands on
            emit("connected", headers={"version": session.version, "server": session.server,
                                       "session": session.id})
            return
        client = self.client
        if client is None:
            raise RuntimeError("not connected")
        receipt = str(c["receipt"]) if c.get("receipt") else None
        if op == "send":
            client.send(str(c["destination"]), body(c), dict(c.get("headers") or {}), receipt)
        elif op == "subscribe":
            headers = {StompSpec.ID_HEADER: str(c["id"]),
                       StompSpec.ACK_HEADER: str(c.get("ack", "auto"))}
            self.subscriptions[str(c["id"])] = client.subscribe(str(c["destination"]), headers)
        elif op == "unsubscribe":
            client.unsubscribe(self.subscriptions.pop(str(c["id"])))
        elif op in ("ack", "nack"):
            if c.get("transaction"):
                raise Unsupported("ACK or NACK naming a transaction: stompest names the "
                                  "transaction the message came in, if any")
            getattr(client, op)(self.messages[int(c["message"])])
        elif op in ("begin", "commit", "abort"):
            getattr(client, op)(str(c["transaction"]))
        elif op == "disconnect":
            if not c.get("receipt"):
                client.disconnect()
                self.client = None
                return
            # with a receipt the application waits for it, then closes (stompest's docs)
            wanted = f"disconnect-{time.monotonic_ns()}"
            client.disconnect(receipt=wanted)
            deadline = time.monotonic() + 10
            while wanted not in self.receipts and self.client and time.monotonic() < deadline:
                self.poll()
            if wanted not in self.receipts:
                raise TimeoutError("no RECEIPT for DISCONNECT")
            client.close()
            self.client = None
        else:
            raise Unsupported(f"no command {op!r}")


def main() -> None:
    emit("ready", library="stompest", version=installed("stompest"))
    lines: queue.Queue[tuple[str, dict[str, Any]] | None] = queue.Queue()

    def read() -> None:
        for command in commands():
            lines.put(command)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    driver = Driver()
    while True:
        driver.poll()
        try:
            command = lines.get(timeout=POLL if driver.client is None else 0)
        except queue.Empty:
            continue
        if command is None:
            break
        op, fields = command
        try:
            driver.run(op, fields)
        except Exception as error:  # the library's refusal, reported as the contract says
            answer(op, error)
        else:
            answer(op, None)


if __name__ == "__main__":
    main()
