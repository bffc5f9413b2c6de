"""Byte streams to a broker: where it is (`parse_broker`), how to reach it (`open_transport`:
TCP with optional TLS, and WebSocket over them through websocket.py), bytes in and out
(`Transport`, in stream.py with the errors); the codec parses what arrives.

Every failure is a `TransportError` with a one-line message fit to show a user (no OSError,
ssl.SSLError or TimeoutError escapes), and no passcode is ever in a str, repr or message."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import re
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn
from urllib.parse import unquote

from conformance.wire.stream import (
    CannotResolve,
    ConnectError,
    ConnectionRefused,
    ConnectTimeout,
    TlsHandshakeError,
    Transport,
    TransportClosed,
    TransportError,
)

if TYPE_CHECKING:  # websocket.py (wsproto, h11) is loaded for a ws:// broker only
    from conformance.wire.websocket import MessageType

DEFAULT_PORT = 61613
SCHEMES = ("stomp", "stomp+ssl", "stomp+tls", "ws", "wss")
_FORM = "expected HOST[:PORT], [IPV6][:PORT] or SCHEME://HOST[:PORT], SCHEME one of " + (
    ", ".join(SCHEMES))
_HOST_PORT = re.compile(r"(?:\[(?P<ipv6>[^\]]*)\]|(?P<host>[\w.-]+))(?::(?P<port>.*))?")
_CLOSE_TIMEOUT = 5.0  # for a TLS peer's close_notify; then the connection is dropped


@dataclass(frozen=True, repr=False)
class BrokerAddress:
    """Where a broker listens: `host` without brackets, `path` for ws:// and wss:// only."""

    host: str
    port: int = DEFAULT_PORT
    scheme: str = "stomp"
    path: str = ""
    login: str | None = None
    passcode: str | None = None

    @property
    def tls(self) -> bool:
        return self.scheme in ("stomp+ssl", "stomp+tls", "wss")

    @property
    def websocket(self) -> bool:
        return self.scheme in ("ws", "wss")

    @property
    def transport(self) -> str:
        """What a case's `transports` calls this address's: "ws" or "tcp"."""
        return "ws" if self.websocket else "tcp"

    @property
    def hostport(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def display(self) -> str:
        """Where the broker is, for reports and logs: neither login nor passcode."""
        scheme = "" if self.scheme == "stomp" else f"{self.scheme}://"
        return f"{scheme}{self.hostport}{self.path}"

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        secret = ", passcode=<hidden>" if self.passcode is not None else ""
        return f"BrokerAddress({self.display!r}, login={self.login!r}{secret})"


def parse_broker(text: str) -> BrokerAddress:
    """`HOST[:PORT]`, `[IPV6][:PORT]`, or that after `stomp://`, `stomp+ssl://` (`stomp+tls://`),
    `ws://` or `wss://` (with a path), with an optional percent-encoded `LOGIN:PASSCODE@`.
    The port defaults to 61613 for every scheme. Raises ValueError saying what is wrong; the
    message never quotes the userinfo."""
    given = text.strip()
    if not given:
        raise ValueError(f"empty broker address: {_FORM}")
    scheme, sep, rest = given.partition("://")
    if not sep:
        scheme, rest = "stomp", given
    elif scheme.lower() not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r} in broker address: {_FORM}")
    scheme = scheme.lower()
    # Userinfo ends at the last '@', even when a passcode holds an unencoded '/', '?' or '#'.
    userinfo, at, rest = rest.rpartition("@")
    login = passcode = None
    if at:
        user, colon, secret = userinfo.partition(":")
        login, passcode = unquote(user), (unquote(secret) if colon else None)
    cut = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    path, websocket = rest[cut:], scheme in ("ws", "wss")
    if not websocket and path not in ("", "/"):
        raise ValueError(f"unexpected {path!r} after the port: only ws:// and wss:// take a path")
    if "#" in path:
        raise ValueError(f"a WebSocket address takes no fragment: {path!r}")
    path = (path or "/") if websocket else ""
    host, port = _host_port(rest[:cut])
    return BrokerAddress(host, port, scheme, path, login, passcode)


def _host_port(text: str) -> tuple[str, int]:
    if not text.startswith("[") and text.count(":") > 1:
        raise ValueError(f"an IPv6 address needs brackets, as in [::1]:61613, not {text!r}")
    if not text or text.startswith(":"):
        raise ValueError(f"no host in broker address: {_FORM}")
    found = _HOST_PORT.fullmatch(text)
    if found is None:
        raise ValueError(f"{text!r} is not a host and optional port: {_FORM}")
    host = found["host"] if found["ipv6"] is None else found["ipv6"]
    port = found["port"]
    try:
        if found["ipv6"] is not None:
            ipaddress.IPv6Address(host)
    except ValueError:
        raise ValueError(f"{host!r} in brackets is not an IPv6 address") from None
    if port is None:
        return host, DEFAULT_PORT
    if not (port.isascii() and port.isdigit()):
        raise ValueError(f"port {port!r} is not a number: expected HOST:PORT, PORT in 1..65535")
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"port {int(port)} is out of range: expected PORT in 1..65535")
    return host, int(port)


def is_loopback(address: BrokerAddress) -> bool:
    """True when the broker is on this machine: 'localhost', 127.0.0.0/8, ::1, or a name that
    resolves only to those. A name that does not resolve is not loopback."""
    if address.host.lower().rstrip(".") == "localhost":
        return True
    with contextlib.suppress(ValueError):
        return _loopback_ip(address.host)
    try:
        found = socket.getaddrinfo(address.host, None, type=socket.SOCK_STREAM)
    except (OSError, ValueError):  # gaierror; UnicodeError for a name IDNA refuses
        return False
    return bool(found) and all(_loopback_ip(str(info[4][0])) for info in found)


def _loopback_ip(text: str) -> bool:
    ip = ipaddress.ip_address(text.partition("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is not loopback to ipaddress before 3.13
    return ip.is_loopback


@dataclass(frozen=True)
class TlsOptions:
    """Client TLS. No ca_file: the system's CAs. verify=False checks neither the chain nor
    the host name. server_hostname replaces the address's host for SNI and that check."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    server_hostname: str | None = None


def ssl_context(options: TlsOptions) -> ssl.SSLContext:
    """A client SSLContext; raises TransportError naming a file it cannot read or load."""
    for kind, path in (("CA", options.ca_file), ("client certificate", options.cert_file),
                       ("client key", options.key_file)):
        try:
            if path is not None:
                open(path, "rb").close()
        except OSError as exc:
            raise TransportError(f"cannot read {kind} file {path!r}: {_reason(exc)}") from None
    if options.key_file is not None and options.cert_file is None:
        raise TransportError(f"client key file {options.key_file!r} needs a certificate file")
    try:
        context = ssl.create_default_context(cafile=options.ca_file)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise TransportError(f"cannot load CA file {options.ca_file!r}: {_reason(exc)}") from None
    if not options.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if options.cert_file is not None:
        def encrypted() -> NoReturn:  # else OpenSSL would ask for a password on the terminal
            raise TransportError(f"client key {options.key_file or options.cert_file!r} is "
                                 "encrypted: give an unencrypted key file")
        try:
            context.load_cert_chain(options.cert_file, options.key_file, password=encrypted)
        except (OSError, ValueError) as exc:
            reason = _reason(exc).replace("PEM lib", "not a PEM certificate and key")
            raise TransportError(f"cannot load client certificate {options.cert_file!r}: "
                                 f"{reason}") from None
    return context


class _Reader(asyncio.StreamReader):
    """Hands out the bytes that arrived before a reset, then reports it: the stock reader
    raises at once and drops them, such as the ERROR frame a broker sent before a reset."""

    reset: BaseException | None = None

    def set_exception(self, exc: BaseException) -> None:
        self.reset = exc
        self.feed_eof()


class TcpTransport(Transport):
    """TCP (TCP_NODELAY set), with TLS when asked, over asyncio streams. `open_transport`
    makes them."""

    def __init__(self, reader: _Reader, writer: asyncio.StreamWriter, peer: str) -> None:
        self._reader, self._writer, self._peer = reader, writer, peer
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed or self._writer.transport.is_closing()

    @property
    def peer(self) -> str:
        return self._peer

    def get_extra_info(self, name: str, default: object = None) -> object:
        """asyncio's details of the connection: 'socket', 'sockname', 'peercert', 'cipher'..."""
        return self._writer.get_extra_info(name, default)

    async def send(self, data: bytes) -> None:
        if self._reader.reset is not None:
            raise _lost(self._peer, self._reader.reset)
        if self.closed:
            raise TransportClosed(f"connection to {self._peer} is closed")
        try:
            self._writer.write(data)
            await self._writer.drain()
        except OSError as exc:
            raise _lost(self._peer, exc) from exc

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        if self._closed:
            raise TransportClosed(f"connection to {self._peer} was closed by this side")
        try:
            data = await self._reader.read(max_bytes)
        except OSError as exc:
            raise _lost(self._peer, exc) from exc
        if not data and self._reader.reset is not None:
            raise _lost(self._peer, self._reader.reset)
        return data

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.close()
            async with asyncio.timeout(_CLOSE_TIMEOUT):
                await self._writer.wait_closed()
        except (OSError, RuntimeError):  # already broken, or no TLS close_notify in time
            self._writer.transport.abort()

    async def abort(self) -> None:
        if self._closed:
            return
        self._closed = True
        sock = self._writer.get_extra_info("socket")
        with contextlib.suppress(OSError, AttributeError):  # linger 0: close() sends an RST
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._writer.transport.abort()
        await asyncio.sleep(0)  # the socket is closed in a callback: let it run now


async def open_transport(address: BrokerAddress, *, tls: TlsOptions | None = None,
                         timeout: float = 10.0, subprotocols: Sequence[str] | None = None,
                         message_type: MessageType = "auto") -> Transport:
    """A transport connected to `address` within `timeout` seconds: TCP, with TLS when `tls`
    is given or the scheme asks for it (then TlsOptions() by default); for ws:// and wss://,
    WebSocket over them, offering `subprotocols` (default v12.stomp, v11.stomp, v10.stomp)
    and sending each `send` as one message of `message_type`. Raises a ConnectError when the
    broker cannot be reached or refuses the upgrade, a TransportError for a bad TLS file."""
    if not address.websocket:
        return await _open_tcp(address, tls, timeout)
    from conformance.wire.websocket import STOMP_SUBPROTOCOLS, upgrade

    started = time.monotonic()
    lower = await _open_tcp(address, tls, timeout)
    left = max(timeout - (time.monotonic() - started), 0.001)
    offered = STOMP_SUBPROTOCOLS if subprotocols is None else tuple(subprotocols)
    try:
        return await upgrade(lower, address.hostport, address.path or "/",
                             subprotocols=offered, message_type=message_type, timeout=left)
    except ConnectTimeout:  # said with the time given for all of it
        raise ConnectTimeout(f"WebSocket handshake with {address.hostport}: no answer within "
                             f"{float(timeout)} s") from None


async def listen_tcp(host: str, accepted: Callable[[TcpTransport], Awaitable[None]],
                     *, port: int = 0) -> asyncio.Server:
    """A TCP listener on `host` (port 0: a free one) handing each connection it accepts to
    `accepted` as a TcpTransport: the server side of the same byte stream, for a harness
    that plays the broker to a client under test."""
    loop = asyncio.get_running_loop()

    def protocol() -> asyncio.StreamReaderProtocol:
        reader = _Reader(loop=loop)

        async def connected(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            name = writer.get_extra_info("peername") or ("?", 0)
            await accepted(TcpTransport(reader, writer, f"{name[0]}:{name[1]}"))

        return asyncio.StreamReaderProtocol(reader, connected, loop=loop)

    return await loop.create_server(protocol, host, port)


async def _open_tcp(address: BrokerAddress, tls: TlsOptions | None,
                    timeout: float) -> TcpTransport:
    tls = tls or (TlsOptions() if address.tls else None)
    context = ssl_context(tls) if tls is not None else None
    where, loop = address.hostport, asyncio.get_running_loop()
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            sock = await _connect(address)
            reader = _Reader(loop=loop)
            protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
            try:
                transport, _ = await loop.create_connection(lambda: protocol, sock=sock)
            except BaseException:
                sock.close()
                raise
            writer = asyncio.StreamWriter(transport, protocol, reader, loop)
            if context is not None and tls is not None:
                await writer.start_tls(context, server_hostname=tls.server_hostname or address.host)
    except BaseException as exc:
        if writer is not None:
            writer.transport.abort()
        handshake = writer is not None and context is not None
        if isinstance(exc, TimeoutError):
            stage = f"TLS handshake with {where}" if handshake else f"cannot connect to {where}"
            raise ConnectTimeout(f"{stage}: no answer within {float(timeout)} s") from None
        if isinstance(exc, (OSError, ValueError)) and handshake:  # ssl.SSLError, peer hung up
            raise TlsHandshakeError(f"TLS handshake with {where} failed: {_reason(exc)}") from exc
        if isinstance(exc, OSError):
            raise ConnectError(f"cannot connect to {where}: {_reason(exc)}") from exc
        raise
    return TcpTransport(reader, writer, where)


async def _connect(address: BrokerAddress) -> socket.socket:
    """A connected non-blocking socket, trying each address the host resolves to in turn."""
    loop = asyncio.get_running_loop()
    try:
        if _is_ip(address.host):  # no resolver, so no trip to a thread (the fuzzer's rate)
            found = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_NUMERICHOST)
        else:
            found = await loop.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM)
    except (OSError, ValueError) as exc:  # gaierror; UnicodeError for a name IDNA refuses
        reason = _reason(exc) if isinstance(exc, OSError) else "not a valid host name"
        raise CannotResolve(f"cannot resolve host {address.host!r}: {reason}") from exc
    errors: list[OSError] = []
    for family, kind, proto, _, sockaddr in found:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            # Byte-at-a-time cases need each write on the wire now, not after Nagle's wait.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, sockaddr)
            return sock
        except BaseException as exc:
            sock.close()
            if not isinstance(exc, OSError):
                raise
            errors.append(exc)
    if errors and all(isinstance(error, ConnectionRefusedError) for error in errors):
        raise ConnectionRefused(f"cannot connect to {address.hostport}: connection refused")
    reason = _reason(errors[0]) if errors else "the host has no address"
    raise ConnectError(f"cannot connect to {address.hostport}: {reason}")


@functools.lru_cache(maxsize=64)
def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False
    return True


def _lost(peer: str, exc: BaseException) -> TransportClosed:
    if isinstance(exc, ConnectionResetError) and exc.errno is not None:
        return TransportClosed(f"connection to {peer} was reset by the peer")
    return TransportClosed(f"connection to {peer} was broken: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    """An OS or OpenSSL error as one short line: no '[SSL: X]' tag, no '(_ssl.c:N)'."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    text = re.sub(r"^\[[A-Z0-9]+(: [A-Z0-9_]+)?\] |\s*\(_ssl\.c:\d+\)$", "", " ".join(text.split()))
    text = text or type(exc).__name__
    return text[0].lower() + text[1:] if text[1:2].islower() else text
