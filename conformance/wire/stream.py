"""What every transport is: a byte stream to a broker (`Transport`), and the errors opening
and using one raise. `transport.py` (TCP, TLS) and `websocket.py` implement it, and
`transport.open_transport` chooses between them; the rest of the harness sees only this.

Every failure is a `TransportError` with a one-line message fit to show a user."""

from __future__ import annotations

from abc import ABC, abstractmethod


class TransportError(Exception):
    """Base of the transports' errors; the message is one line fit to show a user."""


class TransportClosed(TransportError):
    """The connection was reset or aborted, or this side had already closed it."""


class ConnectError(TransportError):
    """The broker could not be reached."""


class CannotResolve(ConnectError):
    pass


class ConnectionRefused(ConnectError):
    pass


class ConnectTimeout(ConnectError):
    pass


class TlsHandshakeError(ConnectError):
    pass


class WebSocketRefused(ConnectError):
    """The broker answered the WebSocket upgrade with an HTTP refusal, or accepted none of
    the subprotocols offered."""


class SubprotocolNotOffered(ConnectError):
    """The broker accepted the WebSocket upgrade naming a subprotocol the client did not
    offer: no refusal, a broken handshake, which RFC 6455 makes the client fail."""


class Transport(ABC):
    """A connected byte stream to a broker: TCP (with TLS or not), or WebSocket messages
    carrying the bytes; the runner does not tell them apart."""

    #: the subprotocol the broker accepted in the WebSocket handshake (None over TCP)
    subprotocol: str | None = None

    @abstractmethod
    async def send(self, data: bytes) -> None:
        """Write `data`, waiting while the outgoing buffer is full. Raises TransportClosed."""

    @abstractmethod
    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Up to max_bytes as soon as any arrive; b"" once the peer closed cleanly. Raises
        TransportClosed for a reset or aborted connection, after the bytes that came first."""

    @abstractmethod
    async def close(self) -> None:
        """Close gracefully. Idempotent; never raises."""

    @abstractmethod
    async def abort(self) -> None:
        """Drop the connection at once with a TCP RST, as a crashed client would. Idempotent."""

    @property
    @abstractmethod
    def closed(self) -> bool:
        """True once this side closed or aborted, or the connection was lost."""

    @property
    @abstractmethod
    def peer(self) -> str:
        """The broker's HOST:PORT, printable: no credentials."""

    def take_notes(self) -> list[str]:
        """What happened on the connection besides its bytes, since the last call (the
        WebSocket handshake, messages, pings, the close), for the transcript; none over TCP."""
        return []
