"""STOMP over WebSocket, the client side: `upgrade` turns a connected TCP or TLS transport
into a `WebSocketTransport` (an HTTP/1.1 upgrade offering STOMP subprotocols), which
carries the same bytes in WebSocket messages. Framing, masking and the handshake are
wsproto's (sans-IO); this module does its I/O over the lower transport.

Sending: each `send` is one message, text when the bytes are valid UTF-8 and binary
otherwise (`message_type` forces one: a forced text message carries its bytes as they are,
UTF-8 or not); `send_as` sends one message of the type it is given. Receiving: the bytes
of each message, in order (the codec joins a frame split over messages); pings are
answered; the broker's close is a clean end (b""), its code and reason kept. What is not
STOMP bytes (the handshake, each message's opcode and length, pings, the close) is told by
`take_notes`, for the transcript.

The same transport serves the other side (`server=True`, made by websocket_server.py's
`accept_upgrade`) when the harness plays the broker to a client under test: its notes then
name the client, and once it has answered the client's close it closes the TCP connection,
as RFC 6455 has a server do."""

from __future__ import annotations

import asyncio
import os
import struct
from collections import deque
from collections.abc import Sequence
from typing import Literal

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Message,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import ProtocolError

from conformance.wire.stream import (
    ConnectTimeout,
    SubprotocolNotOffered,
    Transport,
    TransportClosed,
    TransportError,
    WebSocketRefused,
)

#: the STOMP subprotocols of the IANA WebSocket subprotocol registry and the STOMP version
#: each names, newest first: what a client offers by default and the order in which a
#: broker prefers them
SUBPROTOCOL_VERSIONS = {"v12.stomp": "1.2", "v11.stomp": "1.1", "v10.stomp": "1.0"}
STOMP_SUBPROTOCOLS = tuple(SUBPROTOCOL_VERSIONS)
MessageType = Literal["auto", "text", "binary"]
MESSAGE_TYPES: tuple[MessageType, ...] = ("auto", "text", "binary")
_CLOSE_WAIT = 2.0  # seconds to wait for the broker's answer to this side's close
_NOTES = 256  # notes kept until taken: a transport nobody takes them from stays small
_REFUSAL_BODY = 200  # octets of a refusal's body kept for its message
_HEAD = 16384  # octets of the answer's status line and headers kept to explain a failure


def is_text(data: bytes) -> bool:
    """Whether `data` can go as a text message: valid UTF-8."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _one_line(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


class WebSocketTransport(Transport):
    """WebSocket messages over a connected `lower` transport. `upgrade` makes them."""

    def __init__(self, lower: Transport, ws: WSConnection, subprotocol: str | None, *,
                 message_type: MessageType = "auto", server: bool = False) -> None:
        self._lower, self._ws = lower, ws
        self.subprotocol = subprotocol
        self.server = server
        #: who is at the other end, for the notes
        self._other = "client" if server else "broker"
        #: server side: the subprotocols the client offered, and the STOMP versions they
        #: bound the session to (None: any)
        self.offered: tuple[str, ...] = ()
        self.versions: tuple[str, ...] | None = None
        self.message_type: MessageType = message_type
        #: the broker's close code and reason, once it closed (1006: no close frame)
        self.close_code: int | None = None
        self.close_reason = ""
        #: received bytes, each with the note of the message it ends ("" if it ends none)
        self._inbox: deque[tuple[bytes, str]] = deque()
        self._notes: deque[str] = deque(maxlen=_NOTES)
        self._message = 0  # octets of the message being received so far
        self._ended = False  # the broker's close (or the end of the TCP stream) was seen
        self._end_note = ""
        self._broken = ""  # what was wrong with the broker's framing, if it was
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed or self._lower.closed

    @property
    def peer(self) -> str:
        return self._lower.peer

    def take_notes(self) -> list[str]:
        notes = list(self._notes)
        self._notes.clear()
        return notes

    def note(self, text: str) -> None:
        self._notes.append(text)

    async def send(self, data: bytes) -> None:
        await self.send_as(data, self.message_type)

    async def send_as(self, data: bytes, kind: MessageType) -> None:
        """`data` as one message of type `kind` (auto: text when valid UTF-8)."""
        if self.closed or self._ws.state is not ConnectionState.OPEN:
            raise TransportClosed(f"WebSocket connection to {self.peer} is closed")
        text = kind == "text" or (kind == "auto" and is_text(data))
        if text and not is_text(data):  # a text message wsproto would refuse: framed here
            wire = _frame(0x1, data, masked=not self.server)
        else:
            event = TextMessage(data.decode("utf-8")) if text else BytesMessage(data)
            wire = self._ws.send(event)
        self.note(f"out {'text' if text else 'binary'} message, {len(data)} B")
        await self._lower.send(wire)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        if self._closed:
            raise TransportClosed(f"connection to {self.peer} was closed by this side")
        while not self._inbox:
            if self._ended:
                if self._end_note:  # after the notes of the messages before it
                    self.note(self._end_note)
                    self._end_note = ""
                if self._broken:
                    raise TransportClosed(f"connection to {self.peer}: {self._broken}")
                return b""
            await self._pump()
        data, note = self._inbox.popleft()
        if len(data) > max_bytes:
            self._inbox.appendleft((data[max_bytes:], note))
            data, note = data[:max_bytes], ""
        if note:
            self.note(note)
        return data

    async def _pump(self) -> None:
        """Read from the lower transport once and handle what wsproto makes of it."""
        data = await self._lower.receive(65536)
        if not data:
            self._ended = True
            if self.close_code is None:
                self.close_code = 1006
                self._end_note = "the connection ended without a WebSocket close (1006)"
            return
        try:
            self._ws.receive_data(data)
            await self.handle(list(self._ws.events()))
        except ProtocolError as error:
            await self._lower.abort()
            raise TransportClosed(f"WebSocket connection to {self.peer} broken: "
                                  f"{_one_line(str(error))}") from None

    async def handle(self, events: Sequence[Event]) -> None:
        for event in events:
            if isinstance(event, Message):
                data = event.data.encode("utf-8") if isinstance(event.data, str) \
                    else bytes(event.data)
                self._message += len(data)
                note = ""
                if event.message_finished:
                    kind = "text" if isinstance(event, TextMessage) else "binary"
                    note = f"in {kind} message, {self._message} B"
                    self._message = 0
                if data:
                    self._inbox.append((data, note))
                elif note:
                    self.note(note)
            elif isinstance(event, Ping):
                self.note(f"ping ({len(event.payload)} B) answered")
                await self._reply(event.response())
            elif isinstance(event, CloseConnection) and self._ws.state is ConnectionState.OPEN:
                # wsproto found the broker's framing broken: this side closes with its code
                self._broken = f"the {self._other} broke the WebSocket framing: {event.reason}"
                self._end_note = f"{self._broken} (closed with {event.code})"
                self._ended = True
                await self._reply(event)
            elif isinstance(event, CloseConnection):
                self.close_code, self.close_reason = event.code, event.reason or ""
                reason = f" {_one_line(self.close_reason)!r}" if self.close_reason else ""
                self._end_note = f"the {self._other} closed the WebSocket: {event.code}{reason}"
                self._ended = True
                if self._ws.state is ConnectionState.REMOTE_CLOSING:
                    await self._reply(event.response())
                    if self.server:  # the server ends the TCP connection (RFC 6455 7.1.1)
                        await self._lower.close()
            # a Pong answers no ping of this side's: nothing to do

    async def _reply(self, event: Event) -> None:
        """A pong or close of this side's: one that cannot go is no loss to the bytes
        received before it (what went wrong shows at the next receive or send)."""
        try:
            await self._lower.send(self._ws.send(event))
        except TransportError:
            pass

    async def close(self) -> None:
        if self._closed:
            return
        try:
            if self._ws.state is ConnectionState.OPEN and not self._lower.closed:
                await self._lower.send(self._ws.send(CloseConnection(1000)))
                async with asyncio.timeout(_CLOSE_WAIT):  # the broker's answering close
                    while not self._ended:
                        await self._pump()
        except (TransportError, TimeoutError, ProtocolError):
            pass
        self._closed = True
        await self._lower.close()

    async def abort(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._lower.abort()


def _frame(opcode: int, payload: bytes, *, masked: bool) -> bytes:
    """One final frame, masked as a client's is: wsproto frames text only from a str."""
    size, bit = len(payload), 0x80 if masked else 0
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, bit | size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, bit | 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, bit | 127, size)
    if not masked:
        return head + payload
    mask = os.urandom(4)
    masks = (mask * (size // 4 + 1))[:size]
    body = (int.from_bytes(payload, "big") ^ int.from_bytes(masks, "big")).to_bytes(size, "big")
    return head + mask + body


async def upgrade(lower: Transport, host: str, path: str, *,
                  subprotocols: Sequence[str] = STOMP_SUBPROTOCOLS,
                  message_type: MessageType = "auto",
                  timeout: float = 10.0) -> WebSocketTransport:
    """The WebSocket handshake over `lower` (connected to `host`, the Host header), asking
    for `path` and offering `subprotocols`; raises WebSocketRefused when the broker refuses
    the upgrade or accepts none of them (when some were offered), SubprotocolNotOffered when
    it accepts naming one not offered, ConnectTimeout when it does not answer within
    `timeout` seconds. `lower` is aborted on failure."""
    ws = WSConnection(ConnectionType.CLIENT)
    where = lower.peer
    offer = ", ".join(subprotocols) or "no subprotocol"
    try:
        async with asyncio.timeout(timeout):
            await lower.send(ws.send(Request(host=host, target=path,
                                             subprotocols=list(subprotocols))))
            accepted = await _answer(lower, ws, where, subprotocols)
    except TimeoutError:
        await lower.abort()
        raise ConnectTimeout(f"WebSocket handshake with {where}: no answer within "
                             f"{float(timeout)} s") from None
    except BaseException:
        await lower.abort()
        raise
    if subprotocols and accepted.subprotocol is None:
        await lower.abort()
        raise WebSocketRefused(f"WebSocket handshake with {where}: the broker accepted none of "
                               f"the subprotocols offered ({', '.join(subprotocols)})")
    transport = WebSocketTransport(lower, ws, accepted.subprotocol, message_type=message_type)
    transport.note(f"WebSocket upgrade of {path} offering {offer} accepted, subprotocol "
                   f"{accepted.subprotocol or 'none'}")
    try:  # what came with the answer, such as a ping
        await transport.handle(list(ws.events()))
    except (TransportError, ProtocolError) as error:
        await lower.abort()
        raise TransportClosed(f"WebSocket connection to {where} broken: "
                              f"{_one_line(str(error))}") from None
    return transport


async def _answer(lower: Transport, ws: WSConnection, where: str,
                  offered: Sequence[str]) -> AcceptConnection:
    """The broker's answer to the upgrade request: accepted, or a one-line refusal."""
    head = body = b""
    refusal: RejectConnection | None = None
    while True:
        data = await lower.receive(65536)
        if len(head) < _HEAD:
            head = (head + data)[:_HEAD]
        first_line = head.partition(b"\n")[0].rstrip(b"\r")
        if not data:
            if refusal is not None:  # a body that ends with the connection
                break
            raise WebSocketRefused(f"WebSocket handshake with {where}: the broker closed the "
                                   "connection without answering the upgrade")
        try:
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, AcceptConnection):
                    return event
                if isinstance(event, RejectConnection):
                    refusal = event
                elif isinstance(event, RejectData):
                    body = (body + bytes(event.data))[:_REFUSAL_BODY]
        except ProtocolError as error:
            named = _unoffered(head, offered)
            if named is not None:
                raise SubprotocolNotOffered(
                    f"WebSocket handshake with {where}: the broker accepted the upgrade naming "
                    f"subprotocol {_one_line(named, 60)!r}, which was not offered (offered: "
                    f"{', '.join(offered) or 'none'})") from None
            status = first_line.decode("latin-1")
            said = f" (it said {_one_line(status)!r})" if status else ""
            raise WebSocketRefused(f"WebSocket handshake with {where} failed: "
                                   f"{_one_line(str(error))}{said}") from None
        if refusal is not None and ws.state is ConnectionState.CLOSED:  # its body is over
            break
    if refusal is None:
        raise WebSocketRefused(f"WebSocket handshake with {where} failed: no answer")
    status = first_line.decode("latin-1").partition(" ")[2]  # "400 Bad Request"
    text = body.decode("utf-8", "replace").strip()
    detail = f": {_one_line(text, 100)}" if text else ""
    raise WebSocketRefused(f"WebSocket upgrade refused by {where}: HTTP "
                           f"{_one_line(status) or refusal.status_code}{detail}")


def _unoffered(head: bytes, offered: Sequence[str]) -> str | None:
    """The subprotocol a 101 answer (its status line and headers, `head`) names that is not
    among those `offered`, if it names one."""
    lines = head.partition(b"\r\n\r\n")[0].split(b"\r\n")
    if lines[0].split(b" ")[1:2] != [b"101"]:
        return None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"sec-websocket-protocol":
            named = value.strip().decode("latin-1")
            return None if named in offered else named
    return None
