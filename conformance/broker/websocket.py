"""The reference broker's WebSocket side: `accept` answers the HTTP upgrade, and
`WebSocketStream` is the framing layer between the socket and a Session (it is both the
session's Reader and its Writer), so STOMP over WebSocket runs through the same session and
protocol as over TCP, faults and all. Framing is wsproto's (sans-IO).

Negotiation is wire/websocket_server.py's `negotiate` (shared with the scripted broker of
the client cases): the broker serves `ws_path` only and picks the newest STOMP subprotocol
the client offers of a version it speaks; a client that offers none is refused with 400
(unless `ws_accept_unnegotiated`). The versions the offer names bound the session's
(`WebSocketStream.versions`): CONNECT's accept-version chooses among them.

Reading: the bytes of text and binary messages alike, in order (a frame may span messages,
and a message hold several frames); pings are answered; the client's close is answered and
is the end of input (the ws- faults of faults.py bend the upgrade and how messages are
read). Writing: each frame one message (text when valid UTF-8, else binary), a heart-beat
EOL too; `write_eof` is the broker's close (code 1000)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Message,
    Ping,
    Request,
    TextMessage,
)
from wsproto.utilities import ProtocolError

from conformance.broker.config import BrokerConfig
from conformance.broker.faults import Faults
from conformance.wire.websocket import is_text
from conformance.wire.websocket_server import BAD_REQUEST, negotiate, refusal

NO_FAULTS = Faults()


class WebSocketStream:
    """A session's Reader and Writer over an accepted WebSocket."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 ws: WSConnection, subprotocol: str | None, faults: Faults = NO_FAULTS, *,
                 versions: tuple[str, ...] | None = None) -> None:
        self._reader, self._writer, self._ws = reader, writer, ws
        self.subprotocol = subprotocol
        #: the STOMP versions the client's offer allows on this connection (None: any)
        self.versions = versions
        self._faults = faults
        self._message = b""  # a message so far, when faults read messages whole
        self._inbox: deque[bytes] = deque()
        self._ended = False

    # -- reading ----------------------------------------------------------------------------

    async def read(self, n: int = -1) -> bytes:
        """Up to `n` octets of the messages received (any, when n < 0); b"" at the end."""
        while not self._inbox:
            if self._ended:
                return b""
            data = await self._reader.read(65536)
            if not data:
                self._ended = True
                return b""
            self._ws.receive_data(data)
            self._handle(self._ws.events())
        data = self._inbox.popleft()
        if 0 <= n < len(data):
            self._inbox.appendleft(data[n:])
            data = data[:n]
        return data

    def _handle(self, events: Iterable[Event]) -> None:
        for event in events:
            if isinstance(event, Message):
                text = isinstance(event, TextMessage)
                if text and self._faults.ws_text_as_latin1:
                    data = str(event.data).encode("latin-1", "replace")
                else:
                    data = event.data.encode("utf-8") if isinstance(event.data, str) \
                        else bytes(event.data)
                if self._faults.bends_ws_messages:
                    self._message += data
                    if not event.message_finished:
                        continue
                    data, self._message = self._bent(self._message, text), b""
                if data:
                    self._inbox.append(data)
            elif isinstance(event, Ping):
                self._send(event.response())
            elif isinstance(event, CloseConnection):
                # the client's close, answered; or its broken framing (wsproto's close code)
                self._send(event.response() if self._ws.state is
                           ConnectionState.REMOTE_CLOSING else event)
                self._ended = True

    def _bent(self, data: bytes, text: bool) -> bytes:
        """A whole message as the WebSocket faults read it."""
        faults = self._faults
        if faults.ws_binary_as_text and not text:
            data = data.decode("utf-8", "replace").encode("utf-8")
        if faults.ws_message_is_frame and not data.rstrip(b"\r\n").endswith(b"\0") and \
                data.strip(b"\r\n"):
            return b""
        if faults.ws_first_frame_only and b"\0" in data:
            data = data[:data.index(b"\0") + 1]
        return data

    def _send(self, event: Event) -> None:
        if self._writer.is_closing():
            return
        try:
            self._writer.write(self._ws.send(event))
        except ProtocolError:  # the connection is closing: nothing more can go
            pass

    # -- writing ------------------------------------------------------------------------------

    @property
    def transport(self) -> asyncio.WriteTransport:
        return self._writer.transport

    def write(self, data: bytes) -> None:
        self.writelines([data])

    def writelines(self, data: Iterable[bytes]) -> None:
        """Each item one message, all in one write."""
        if self._ws.state is not ConnectionState.OPEN or self._writer.is_closing():
            return
        wire = b"".join(self._ws.send(TextMessage(item.decode("utf-8")) if is_text(item)
                                      else BytesMessage(item)) for item in data if item)
        if wire:
            self._writer.write(wire)

    def is_closing(self) -> bool:
        return self._writer.is_closing()

    async def drain(self) -> None:
        await self._writer.drain()

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        """The broker's close: the client answers it, which ends reading."""
        if self._ws.state is ConnectionState.OPEN:
            self._send(CloseConnection(1000))

    def close(self) -> None:
        self.write_eof()
        self._writer.close()


async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 config: BrokerConfig, faults: Faults = NO_FAULTS) -> WebSocketStream | None:
    """The server's side of the upgrade within the connect timeout: a stream once accepted,
    None once refused (with 400 or 404) or given up (the connection is then closed)."""
    ws = WSConnection(ConnectionType.SERVER)
    try:
        async with asyncio.timeout(config.connect_timeout):
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                ws.receive_data(data)
                request = next((e for e in ws.events() if isinstance(e, Request)), None)
                if request is not None:
                    return _answer(reader, writer, ws, request, config, faults)
    except ProtocolError:  # not an HTTP upgrade request
        writer.write(BAD_REQUEST)
    except (TimeoutError, ConnectionError, OSError):
        pass
    writer.close()
    return None


def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ws: WSConnection,
            request: Request, config: BrokerConfig, faults: Faults) -> WebSocketStream | None:
    said = negotiate(request, config.ws_path, config.versions,
                     accept_unnegotiated=config.ws_accept_unnegotiated)
    if faults.ws_subprotocol_unoffered and said.status != 404:
        # named whatever was offered: wsproto would not
        writer.write(ws.send(AcceptConnection(extra_headers=[
            (b"Sec-WebSocket-Protocol", b"v12.stomp")])))
        return WebSocketStream(reader, writer, ws, "v12.stomp", faults, versions=said.versions)
    if said.accepted:
        writer.write(ws.send(AcceptConnection(subprotocol=said.subprotocol)))
        bound = None if faults.ws_version_outside_subprotocol else said.versions
        return WebSocketStream(reader, writer, ws, said.subprotocol, faults, versions=bound)
    writer.write(refusal(ws, said.status, said.text))
    writer.close()
    return None
