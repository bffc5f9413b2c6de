"""A driver (cases/clients/README.md) for stomper, a STOMP frame builder and parser that does
no I/O ("its up to the user to do the sending and receiving", its README). Every frame it
writes is built by stomper: the function for its command (stomper.connect, subscribe, send,
ack, ...; stomper.stomp_10's at 1.0, as stomper's README says to import it), or, for a SEND
carrying headers stomper.send does not take (any but destination, transaction and
content-type; a receipt), a stomper.Frame with those headers, packed by Frame.pack. Every
frame it reads is parsed by unpack_frame (stomper.stomp_10's at 1.0) and handed to a
stomper.Engine, whose handlers report it, as stomper's examples (receiver.py) do.

The work stomper leaves to its user is done here the plainest way, and is no part of what is
judged: a TCP socket (stomper has no transport, and none for WebSocket: a ws:// url is
unsupported); octets cut into frames at the NUL that ends each (or after content-length
octets, where the frame's head gives one), with the EOLs between frames (heart-beats)
dropped; a frame decoded as UTF-8 (octets that are not UTF-8 kept as surrogate escapes, so
that a body comes back octet for octet) before stomper reads it, and stomper's text encoded
back the same way; heart-beats (an EOL every negotiated interval) sent by a thread of the
driver's. stomper's StompBuffer, its optional reassembly of partial frames, is not used: it
finds a frame's end only at a NUL followed by LF (stomper/stompbuffer.py line 189 of 0.4.3),
so it never yields a frame from a server that ends frames at the NUL, as the spec has them.

stomper speaks STOMP 1.0 (stomper.stomp_10) and 1.1 (stomper.stomp_11, the default, whose
connect writes accept-version:1.1 whatever the application wants, stomp_11.py line 349): a
connect at 1.2 is unsupported."""

from __future__ import annotations

import re
import socket
import sys
import threading
import time
from importlib.metadata import version as installed
from types import ModuleType
from typing import Any

import stomper
import stomper.stomp_10
from contract import Unsupported, address, answer, b64, body, commands, emit, heart_beat

#: how long the driver waits for the frame a command waits on (s)
WAIT = 10
#: content-length in a frame's head (the framing the driver does, not stomper)
CONTENT_LENGTH = re.compile(rb"\ncontent-length:([0-9]+)\r?\n")


def text(octets: bytes) -> str:
    return octets.decode("utf-8", "surrogateescape")


def octets(frame: str) -> bytes:
    return frame.encode("utf-8", "surrogateescape")


def next_frame(buffer: bytearray) -> bytes | None:
    """Cut the next frame off `buffer` (EOLs before it dropped), or None until it is whole."""
    while buffer and buffer[0] in b"\r\n":
        del buffer[:1]
    head_end = min((i for i in (buffer.find(b"\n\n"), buffer.find(b"\n\r\n")) if i >= 0),
                   default=-1)
    if head_end < 0:
        return None
    length = CONTENT_LENGTH.search(bytes(buffer[:head_end + 1]))
    if length:
        start = buffer.index(b"\n", head_end + 1) + 1
        end = start + int(length.group(1))
        if len(buffer) <= end:
            return None
    else:
        end = buffer.find(b"\x00", head_end)
        if end < 0:
            return None
    frame = bytes(buffer[:end + 1])
    del buffer[:end + 1]
    return frame


class Reporter(stomper.Engine):  # type: ignore[misc]
    """stomper's Engine, whose handlers report each frame as the contract says (as stomper's
    examples override connected and ack); none of them answers anything."""

    def __init__(self, driver: Driver) -> None:
        super().__init__()
        self.driver = driver

    def connected(self, msg: dict[str, Any]) -> str:
        self.driver.server_heart_beat = str(msg["headers"].get("heart-beat", "0,0"))
        emit("connected", headers=msg["headers"])
        self.driver.got("CONNECTED")
        super().connected(msg)  # keeps the session header as sessionId
        return str(stomper.NO_RESPONSE_NEEDED)

    def ack(self, msg: dict[str, Any]) -> str:  # stomper's handler of MESSAGE
        self.driver.messages.append(msg)
        emit("message", n=len(self.driver.messages) - 1, headers=msg["headers"],
             body_b64=b64(octets(msg["body"])))
        return str(stomper.NO_RESPONSE_NEEDED)

    def error(self, msg: dict[str, Any]) -> str:
        super().error(msg)
        emit("error", headers=msg["headers"], body_b64=b64(octets(msg["body"])))
        self.driver.got("ERROR")
        return str(stomper.NO_RESPONSE_NEEDED)

    def receipt(self, msg: dict[str, Any]) -> str:
        super().receipt(msg)
        receipt = msg["headers"].get("receipt-id", "")
        self.driver.receipts.add(receipt)
        emit("receipt", id=receipt)
        self.driver.got("RECEIPT")
        return str(stomper.NO_RESPONSE_NEEDED)


class Driver:
    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.stomp: ModuleType = stomper
        self.messages: list[dict[str, Any]] = []
        self.receipts: set[str] = set()
        self.destinations: dict[str, str] = {}  # subscription id -> destination (for 1.0)
        self.server_heart_beat = "0,0"
        self.frames = threading.Condition()
        self.seen: list[str] = []
        self.closed = threading.Event()
        self.write_lock = threading.Lock()

    def got(self, command: str) -> None:
        with self.frames:
            self.seen.append(command)
            self.frames.notify_all()

    def mark(self) -> int:
        with self.frames:
            return len(self.seen)

    def wait_for(self, command: str, since: int, done: Any = None) -> str:
        """Wait for a frame of `command` (or ERROR, or the end of the connection) read after
        the `since`th frame."""
        deadline = time.monotonic() + WAIT
        with self.frames:
            while True:
                for seen in self.seen[since:]:
                    if seen in (command, "ERROR") and (done is None or done()):
                        return seen
                if self.closed.is_set():
                    return "closed"
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {command} within {WAIT} s")
                self.frames.wait(min(left, 0.1))

    def write(self, frame: str) -> None:
        sock = self.sock
        if sock is None:
            raise RuntimeError("not connected")
        with self.write_lock:
            sock.sendall(octets(frame))

    def read(self, sock: socket.socket) -> None:
        """The reading thread: each frame through unpack_frame to stomper's Engine."""
        engine = Reporter(self)
        buffer = bytearray()
        try:
            while chunk := sock.recv(65536):
                buffer += chunk
                while (frame := next_frame(buffer)) is not None:
                    msg = self.stomp.unpack_frame(text(frame))
                    reply = engine.react(msg)
                    if reply:
                        self.write(reply)
        except OSError as error:
            print(f"connection lost: {error}", file=sys.stderr)
        except Exception as error:  # stomper raised reading a frame: the application ends
            print(f"stomper raised: {type(error).__name__}: {error}", file=sys.stderr)
            sock.close()
        self.closed.set()
        with self.frames:
            self.frames.notify_all()
        emit("disconnected")

    def beat(self, sock: socket.socket, interval: float) -> None:
        """The heart-beats stomper leaves to its user: an EOL every interval."""
        while not self.closed.wait(interval):
            try:
                with self.write_lock:
                    sock.sendall(b"\n")
            except OSError:
                return

    def connect(self, c: dict[str, Any]) -> None:
        version = str(c.get("version", "1.1"))
        if version == "1.2":
            raise Unsupported("STOMP 1.2: stomper speaks 1.0 (stomper.stomp_10) and 1.1, "
                              "its connect writing accept-version:1.1 (stomper/stomp_11.py "
                              "line 349 of 0.4.3)")
        host, port = address(str(c["url"]))
        self.sock = socket.create_connection((host, port), timeout=WAIT)
        self.sock.settimeout(None)
        login, passcode = str(c.get("login") or ""), str(c.get("passcode") or "")
        cx, cy = heart_beat(c)
        if version == "1.0":
            self.stomp = stomper.stomp_10
            frame = stomper.stomp_10.connect(login, passcode)
        else:
            frame = stomper.connect(login, passcode, c.get("host") or host, (cx, cy))
        threading.Thread(target=self.read, args=(self.sock,), daemon=True).start()
        since = self.mark()
        self.write(frame)
        if self.wait_for("CONNECTED", since) != "CONNECTED":
            raise ConnectionError("no CONNECTED")
        sx, sy = (int(n) for n in self.server_heart_beat.split(","))
        if version != "1.0" and cx and sy:
            threading.Thread(target=self.beat, args=(self.sock, max(cx, sy) / 1000),
                             daemon=True).start()

    def run(self, op: str, c: dict[str, Any]) -> None:
        if op == "connect":
            self.connect(c)
            return
        s, v10 = self.stomp, self.stomp is stomper.stomp_10
        transaction = str(c["transaction"]) if c.get("transaction") else None
        if op == "send":
            self.write(self.send(c, transaction))
        elif op == "subscribe":
            destination, ack = str(c["destination"]), str(c.get("ack", "auto"))
            self.destinations[str(c["id"])] = destination
            self.write(s.subscribe(destination, ack) if v10 else
                       s.subscribe(destination, str(c["id"]), ack))
        elif op == "unsubscribe":
            # stomper.stomp_10's unsubscribe names the destination, stomp_11's the id
            self.write(s.unsubscribe(self.destinations[str(c["id"])]) if v10 else
                       s.unsubscribe(str(c["id"])))
        elif op in ("ack", "nack"):
            if v10 and op == "nack":
                raise Unsupported("NACK: stomper.stomp_10 has no nack")
            headers = self.messages[int(c["message"])]["headers"]
            message_id = headers.get("message-id", "")
            self.write(s.ack(message_id, transaction) if v10 else
                       getattr(s, op)(message_id, headers.get("subscription", ""), transaction))
        elif op in ("begin", "commit", "abort"):
            self.write(getattr(s, op)(transaction))
        elif op == "disconnect":
            self.disconnect(bool(c.get("receipt")))
        else:
            raise Unsupported(f"no command {op!r}")

    def send(self, c: dict[str, Any], transaction: str | None) -> str:
        destination = str(c["destination"])
        headers = {str(k): str(v) for k, v in (c.get("headers") or {}).items()}
        content = text(body(c))
        if c.get("receipt") or set(headers) - {"content-type"}:
            # headers stomper.send does not take: a Frame holding them, as stomper lets a
            # user add to its headers (stomper.Frame's docstring)
            frame = self.stomp.Frame()
            frame.cmd = "SEND"
            frame.headers = {"destination": destination, **headers}
            if transaction:
                frame.headers["transaction"] = transaction
            if c.get("receipt"):
                frame.headers["receipt"] = str(c["receipt"])
            frame.body = content
            return str(frame.pack())
        if self.stomp is stomper.stomp_10:
            return str(stomper.stomp_10.send(destination, content, transaction))
        if "content-type" in headers:
            return str(stomper.send(destination, content, transaction, headers["content-type"]))
        return str(stomper.send(destination, content, transaction))

    def disconnect(self, receipt: bool) -> None:
        sock = self.sock
        if sock is None:
            raise RuntimeError("not connected")
        wanted, since = f"disconnect-{time.monotonic_ns()}", self.mark()
        if self.stomp is not stomper.stomp_10:
            # stomp_11's disconnect always asks a receipt (a uuid when given none)
            self.write(stomper.disconnect(wanted if receipt else None))
        elif receipt:  # stomp_10's disconnect takes no receipt: a Frame holding one
            frame = stomper.stomp_10.Frame()
            frame.cmd, frame.headers = "DISCONNECT", {"receipt": wanted}
            self.write(str(frame.pack()))
        else:
            self.write(stomper.stomp_10.disconnect())
        if receipt and self.wait_for("RECEIPT", since, lambda: wanted in self.receipts) \
                != "RECEIPT":
            raise ConnectionError("no RECEIPT for DISCONNECT")
        sock.close()
        self.sock = None


def main() -> None:
    emit("ready", library="stomper", version=installed("stomper"))
    driver = Driver()
    for op, fields in commands():
        try:
            driver.run(op, fields)
        except Exception as error:  # the library's refusal, reported as the contract says
            answer(op, error)
        else:
            answer(op, None)


if __name__ == "__main__":
    main()
