"""The server's side of STOMP over WebSocket: `negotiate`, the answer to an upgrade request
(the reference broker's, broker/websocket.py, and the scripted broker's of the client
cases), and `accept_upgrade`, which answers one over a connected `Transport` and makes it
a `WebSocketTransport` (server side) for a harness that plays the broker to a client.

Negotiation: the server serves one path (404 elsewhere) and picks the newest STOMP
subprotocol the client offers of a version it speaks (v12.stomp, then v11.stomp, then
v10.stomp). A client that offers none is refused with 400 unless `accept_unnegotiated`:
STOMP over WebSocket is always negotiated (RabbitMQ, ActiveMQ and the browser clients all
offer the subprotocols), so a client offering none is not speaking it, and refusing says so
at the handshake rather than at the first frame. The versions the offer names bound the
session's (`Negotiated.versions`): a client that offered v11.stomp alone, having said it
speaks 1.1 on this connection, is never given 1.2."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, RejectConnection, RejectData, Request
from wsproto.utilities import ProtocolError

from conformance.wire.stream import ConnectTimeout, Transport, TransportClosed, WebSocketRefused
from conformance.wire.websocket import STOMP_SUBPROTOCOLS, SUBPROTOCOL_VERSIONS, WebSocketTransport

#: what a server answers a request that is not an HTTP upgrade at all
BAD_REQUEST = (b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\n"
               b"content-length: 41\r\nconnection: close\r\n\r\n"
               b"expected a WebSocket upgrade (STOMP) here")


def choose(offered: Iterable[str],
           versions: Iterable[str] = tuple(SUBPROTOCOL_VERSIONS.values())) -> str | None:
    """The newest STOMP subprotocol among those offered whose version is among `versions`
    (those the server speaks), or None."""
    offers, speaks = set(offered), set(versions)
    return next((name for name in STOMP_SUBPROTOCOLS
                 if name in offers and SUBPROTOCOL_VERSIONS[name] in speaks), None)


def offered_versions(offered: Iterable[str]) -> tuple[str, ...] | None:
    """The STOMP versions the subprotocols offered name, oldest first; None when they name
    none (the session is then not bound by the offer)."""
    names = set(offered)
    versions = tuple(v for name, v in reversed(SUBPROTOCOL_VERSIONS.items()) if name in names)
    return versions or None


@dataclass(frozen=True)
class Negotiated:
    """The answer to an upgrade request: accepted (101) naming `subprotocol` (None:
    unnegotiated), the session bound to `versions` (None: any); or refused with HTTP
    `status`, saying `text`."""

    status: int = 101
    subprotocol: str | None = None
    versions: tuple[str, ...] | None = None
    text: str = ""

    @property
    def accepted(self) -> bool:
        return self.status == 101


def negotiate(request: Request, path: str, speaks: Sequence[str], *,
              accept_unnegotiated: bool = False) -> Negotiated:
    """The answer of a server serving STOMP `speaks` at `path` to `request`."""
    target = request.target.partition("?")[0]
    versions = offered_versions(request.subprotocols)
    if target != path:
        return Negotiated(404, text=f"no STOMP endpoint at {target}: it is at {path}")
    subprotocol = choose(request.subprotocols, speaks)
    if subprotocol is not None or (versions is None and accept_unnegotiated):
        return Negotiated(subprotocol=subprotocol, versions=versions)
    if versions is None:
        return Negotiated(400, text="no STOMP subprotocol offered: offer v12.stomp, v11.stomp "
                                    "or v10.stomp")
    return Negotiated(400, text=f"no STOMP subprotocol offered of a version this broker "
                                f"speaks ({', '.join(speaks)})")


def refusal(ws: WSConnection, status: int, text: str) -> bytes:
    """The octets of an HTTP refusal of the upgrade, with `text` as its body."""
    body = text.encode("utf-8")
    return ws.send(RejectConnection(status_code=status, has_body=True, headers=[
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode())])) + \
        ws.send(RejectData(data=body, body_finished=True))


class UpgradeRefused(WebSocketRefused):
    """The client's upgrade request was refused (the refusal sent, the connection closed);
    `offered`: the subprotocols it offered."""

    def __init__(self, message: str, offered: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.offered = tuple(offered)


async def accept_upgrade(lower: Transport, path: str, speaks: Sequence[str], *,
                         timeout: float = 10.0) -> WebSocketTransport:
    """Answer the client's upgrade request on `lower` as `negotiate` does, within `timeout`
    seconds: a server-side WebSocketTransport once accepted (`offered` and `versions` say
    what the client offered and the versions that bound), UpgradeRefused once refused,
    ConnectTimeout or TransportClosed when no request came. `lower` is closed on failure."""
    ws = WSConnection(ConnectionType.SERVER)
    request: Request | None = None
    try:
        async with asyncio.timeout(timeout):
            while request is None:
                data = await lower.receive(65536)
                if not data:
                    raise TransportClosed(f"{lower.peer} closed the connection before its "
                                          "WebSocket upgrade request")
                ws.receive_data(data)
                request = next((e for e in ws.events() if isinstance(e, Request)), None)
    except ProtocolError as error:
        await lower.send(BAD_REQUEST)
        await lower.close()
        raise UpgradeRefused(f"not a WebSocket upgrade request: {error}") from None
    except TimeoutError:
        await lower.abort()
        raise ConnectTimeout(f"no WebSocket upgrade request from {lower.peer} within "
                             f"{timeout:g} s") from None
    except BaseException:
        await lower.abort()
        raise
    offer = ", ".join(request.subprotocols) or "no subprotocol"
    said = negotiate(request, path, speaks)
    if not said.accepted:
        await lower.send(refusal(ws, said.status, said.text))
        await lower.close()
        raise UpgradeRefused(f"the WebSocket upgrade of {request.target} offering {offer} "
                             f"refused with HTTP {said.status}: {said.text}",
                             request.subprotocols)
    await lower.send(ws.send(AcceptConnection(subprotocol=said.subprotocol)))
    transport = WebSocketTransport(lower, ws, said.subprotocol, server=True)
    transport.offered, transport.versions = tuple(request.subprotocols), said.versions
    transport.note(f"WebSocket upgrade of {request.target} offering {offer} accepted, "
                   f"subprotocol {said.subprotocol or 'none'}")
    await transport.handle(list(ws.events()))  # what came with the request
    return transport
