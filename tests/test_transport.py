"""The transport: broker addresses, and real sockets on loopback (127.0.0.1, ::1) only: round
trips, clean and abrupt closes, refused connections, timeouts, TLS with a throwaway CA."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import cast

import pytest
import trustme

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
from conformance.wire.transport import (
    BrokerAddress,
    TcpTransport,
    TlsOptions,
    is_loopback,
    open_transport,
    parse_broker,
    ssl_context,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

#: A name glibc refuses to put in a DNS query (over 255 octets): resolving it fails on this
#: machine, before any packet is sent.
UNRESOLVABLE = ".".join(["a" * 63] * 5) + ".invalid"


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text and text == text.strip(), repr(text)
    return text


# -- addresses ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, host, port, scheme, path, display", [
    ("localhost", "localhost", 61613, "stomp", "", "localhost:61613"),
    ("broker.example:61620", "broker.example", 61620, "stomp", "", "broker.example:61620"),
    ("  10.1.2.3:1  ", "10.1.2.3", 1, "stomp", "", "10.1.2.3:1"),
    ("stomp://broker:65535", "broker", 65535, "stomp", "", "broker:65535"),
    ("stomp://broker/", "broker", 61613, "stomp", "", "broker:61613"),
    ("STOMP://Broker:7", "Broker", 7, "stomp", "", "Broker:7"),
    ("stomp+ssl://broker:61614", "broker", 61614, "stomp+ssl", "", "stomp+ssl://broker:61614"),
    ("stomp+ssl://broker", "broker", 61613, "stomp+ssl", "", "stomp+ssl://broker:61613"),
    ("stomp+tls://broker", "broker", 61613, "stomp+tls", "", "stomp+tls://broker:61613"),
    ("ws://broker:15674/ws", "broker", 15674, "ws", "/ws", "ws://broker:15674/ws"),
    ("ws://broker", "broker", 61613, "ws", "/", "ws://broker:61613/"),
    ("wss://broker:443/stomp?v=1", "broker", 443, "wss", "/stomp?v=1",
     "wss://broker:443/stomp?v=1"),
    ("[::1]:61613", "::1", 61613, "stomp", "", "[::1]:61613"),
    ("[::1]", "::1", 61613, "stomp", "", "[::1]:61613"),
    ("stomp+ssl://[2001:db8::7]:9", "2001:db8::7", 9, "stomp+ssl", "",
     "stomp+ssl://[2001:db8::7]:9"),
    ("wss://[::1]:8443/ws", "::1", 8443, "wss", "/ws", "wss://[::1]:8443/ws"),
])
def test_parse_broker_accepts(text: str, host: str, port: int, scheme: str, path: str,
                              display: str) -> None:
    address = parse_broker(text)
    assert (address.host, address.port, address.scheme, address.path) == (host, port, scheme,
                                                                          path)
    assert address.display == str(address) == display
    assert address.tls == (scheme in ("stomp+ssl", "stomp+tls", "wss"))
    assert address.websocket == (scheme in ("ws", "wss"))
    assert address.login is None and address.passcode is None


@pytest.mark.parametrize("text, login, passcode", [
    ("stomp://guest:guest@broker:61613", "guest", "guest"),
    ("stomp+ssl://admin:p%40ss%3Aw0rd@broker", "admin", "p@ss:w0rd"),
    ("alice@broker:1", "alice", None),
    ("wss://bob:pw@broker/ws", "bob", "pw"),
    ("stomp://carol:sl/ash#and?more@broker:2", "carol", "sl/ash#and?more"),
])
def test_parse_broker_userinfo(text: str, login: str, passcode: str | None) -> None:
    address = parse_broker(text)
    assert (address.login, address.passcode) == (login, passcode)
    assert address.host == "broker"


@pytest.mark.parametrize("text, says", [
    ("", "empty broker address: expected HOST[:PORT]"),
    ("   ", "empty broker address"),
    ("stomp://", "no host in broker address: expected"),
    (":61613", "no host in broker address"),
    ("stomp://user:pw@:61613", "no host"),
    ("broker:", "port '' is not a number: expected HOST:PORT"),
    ("broker:http", "port 'http' is not a number"),
    ("broker:61613x", "port '61613x' is not a number"),
    ("broker:-1", "port '-1' is not a number"),
    ("broker:\u0661\u0662", "is not a number"),
    ("broker:0", "port 0 is out of range: expected PORT in 1..65535"),
    ("broker:65536", "port 65536 is out of range"),
    ("http://broker:80", "unknown scheme 'http' in broker address: expected"),
    ("stomps://broker", "unknown scheme 'stomps'"),
    ("::1", "an IPv6 address needs brackets, as in [::1]:61613"),
    ("fe80::1:61613", "needs brackets"),
    ("[::1", "'[::1' is not a host and optional port: expected"),
    ("[::1]61613", "is not a host and optional port"),
    ("[not-v6]:1", "'not-v6' in brackets is not an IPv6 address"),
    ("[127.0.0.1]:1", "in brackets is not an IPv6 address"),
    ("bro ker:1", "is not a host and optional port"),
    ("stomp://broker:1/queue", "unexpected '/queue' after the port: only ws:// and wss://"),
    ("wss://broker/ws#top", "a WebSocket address takes no fragment"),
])
def test_parse_broker_refuses(text: str, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_broker(text)
    assert says in one_line(caught.value)


SECRET = "Tr0ub4dor-3"


@pytest.mark.parametrize("text", [
    f"stomp://guest:{SECRET}@broker:61613",
    f"stomp+ssl://guest:{SECRET}@[::1]",
    f"guest:{SECRET}@broker",
    f"wss://guest:{SECRET}@broker/ws",
])
def test_passcode_never_shows(text: str) -> None:
    address = parse_broker(text)
    assert address.passcode == SECRET and address.login == "guest"
    for shown in (str(address), address.display, repr(address), f"{address}", f"{address!r}",
                  address.hostport):
        assert SECRET not in shown
        assert "guest" not in shown or shown == repr(address)
    assert "passcode=<hidden>" in repr(address)


@pytest.mark.parametrize("text", [
    f"stomp://guest:{SECRET}@broker:bad",
    f"stomp://guest:{SECRET}@:1",
    f"stomp://guest:{SECRET}@broker:1/x",
    f"guest:{SECRET}@::1",
    f"stomp://guest:{SECRET}@[zz]",
])
def test_passcode_never_in_errors(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_broker(text)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize("host, loopback", [
    ("localhost", True), ("LocalHost.", True), ("127.0.0.1", True), ("127.8.9.10", True),
    ("::1", True), ("::ffff:127.0.0.1", True),
    ("192.0.2.1", False), ("10.0.0.1", False), ("0.0.0.0", False), ("::", False),
    ("::2", False), ("2001:db8::1", False), ("::ffff:192.0.2.1", False),
    (UNRESOLVABLE, False),
])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(BrokerAddress(host)) is loopback


def test_is_loopback_resolves_names() -> None:
    names = [name for line in Path("/etc/hosts").read_text().splitlines()
             if line.split() and line.split()[0].startswith("127.")
             for name in line.split("#")[0].split()[1:] if name.lower() != "localhost"]
    if not names:
        pytest.skip("no name but localhost maps to 127.x in /etc/hosts to resolve offline")
    assert is_loopback(BrokerAddress(names[0]))


# -- plain TCP ----------------------------------------------------------------------------

@contextlib.asynccontextmanager
async def serve(handler: Handler, host: str = "127.0.0.1",
                context: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    """A server on loopback; yields its port. Every connection it accepted is closed on the
    way out (asyncio 3.11 leaves them open when the server closes)."""
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            await handler(reader, writer)
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, host, 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for writer in writers:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)
        await server.wait_closed()


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()


async def read_exactly(transport: Transport, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = await asyncio.wait_for(transport.receive(), 5)
        assert chunk, f"peer closed after {data!r}"
        data += chunk
    return data


def test_round_trip() -> None:
    async def main() -> None:
        async with serve(echo) as port:
            address = parse_broker(f"stomp://guest:{SECRET}@127.0.0.1:{port}")
            transport = await open_transport(address, timeout=5)
            assert isinstance(transport, TcpTransport)
            assert transport.peer == f"127.0.0.1:{port}" and not transport.closed
            sock = cast(socket.socket, transport.get_extra_info("socket"))
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            frame = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"
            await transport.send(frame)
            assert await read_exactly(transport, len(frame)) == frame
            big = bytes(range(256)) * 4096  # 1 MiB: send waits on flow control
            sending = asyncio.create_task(transport.send(big))
            assert await read_exactly(transport, len(big)) == big
            await sending
            await transport.close()
            assert transport.closed
            await transport.close()  # idempotent
            await transport.abort()
            with pytest.raises(TransportClosed, match="is closed"):
                await transport.send(b"x")
            with pytest.raises(TransportClosed, match="closed by this side"):
                await transport.receive()
    asyncio.run(main())


def test_round_trip_ipv6() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this Python")
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError as exc:
        pytest.skip(f"cannot listen on ::1: {exc}")

    async def main() -> None:
        async with serve(echo, "::1") as port:
            transport = await open_transport(parse_broker(f"[::1]:{port}"), timeout=5)
            assert transport.peer == f"[::1]:{port}"
            await transport.send(b"\n")
            assert await read_exactly(transport, 1) == b"\n"
            await transport.close()
    asyncio.run(main())


def test_byte_at_a_time_goes_out_promptly() -> None:
    async def main() -> None:
        async with serve(echo) as port:
            transport = await open_transport(BrokerAddress("127.0.0.1", port))
            for octet in b"SEND\ndestination:/queue/a\n\nhi\x00":
                await transport.send(bytes([octet]))
                # The echo comes back only once this very byte reached the peer.
                assert await asyncio.wait_for(transport.receive(), 1) == bytes([octet])
                await asyncio.sleep(0.005)
            await transport.close()
    asyncio.run(main())


def test_receive_returns_empty_on_clean_close() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"ERROR\nmessage:bye\n\n\x00")
        await writer.drain()
        writer.close()

    async def main() -> None:
        async with serve(hang_up) as port:
            transport = await open_transport(BrokerAddress("127.0.0.1", port))
            frame = b"ERROR\nmessage:bye\n\n\x00"
            assert await read_exactly(transport, len(frame)) == frame
            assert await transport.receive() == b""
            assert await transport.receive() == b""  # and stays at end of stream
            await transport.close()
    asyncio.run(main())


def test_peer_abort_reads_as_end_of_stream() -> None:
    """asyncio's transport.abort() closes the socket without lingering, but asyncio has read
    everything the client sent, so the kernel ends the connection with a FIN, not an RST:
    the client sees a clean end of stream (b""), never an error."""
    aborted = asyncio.Event()

    async def abort(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert await reader.readexactly(4) == b"ping"
        writer.write(b"pong")
        await writer.drain()
        writer.transport.abort()
        aborted.set()

    async def main() -> None:
        async with serve(abort) as port:
            transport = await open_transport(BrokerAddress("127.0.0.1", port))
            await transport.send(b"ping")
            await aborted.wait()
            await asyncio.sleep(0.1)
            assert await read_exactly(transport, 4) == b"pong"
            assert await transport.receive() == b""
            await transport.close()
    asyncio.run(main())


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST, as a crashed broker's kernel would."""
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
    writer.transport.abort()


def test_peer_reset_raises_after_the_bytes_before_it() -> None:
    done = asyncio.Event()

    async def error_then_reset(reader: asyncio.StreamReader,
                               writer: asyncio.StreamWriter) -> None:
        writer.write(b"ERROR\n\n\x00")
        await writer.drain()
        await asyncio.sleep(0.05)
        reset(writer)
        done.set()

    async def main() -> None:
        async with serve(error_then_reset) as port:
            transport = await open_transport(BrokerAddress("127.0.0.1", port))
            await done.wait()
            # Both the frame and the RST are in before the first read: the frame comes first.
            await asyncio.sleep(0.2)
            assert await transport.receive() == b"ERROR\n\n\x00"
            with pytest.raises(TransportClosed) as caught:
                await transport.receive()
            assert one_line(caught.value) == (f"connection to 127.0.0.1:{port} was reset by "
                                              "the peer")
            assert transport.closed
            with pytest.raises(TransportClosed, match="reset by the peer"):
                await transport.send(b"DISCONNECT\n\n\x00")
            await transport.close()  # never raises on a broken connection
            await transport.close()
            await transport.abort()
    asyncio.run(main())


def test_send_to_a_reset_peer_raises() -> None:
    async def reset_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reset(writer)

    async def main() -> None:
        async with serve(reset_at_once) as port:
            transport = await open_transport(BrokerAddress("127.0.0.1", port))
            await asyncio.sleep(0.1)
            with pytest.raises(TransportClosed) as caught:
                for _ in range(10):  # the first write may be taken before the RST is seen
                    await transport.send(b"SEND\n\n\x00")
                    await asyncio.sleep(0.02)
            assert f"connection to 127.0.0.1:{port} was" in one_line(caught.value)
            await transport.close()
    asyncio.run(main())


def test_abort_resets_the_connection() -> None:
    async def main() -> None:
        seen: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        async def watch(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                data = await reader.read(100)
                seen.set_result(f"data {data!r}")
            except ConnectionResetError:
                seen.set_result("reset")
            writer.close()

        async with serve(watch) as port:
            transport = await open_transport(BrokerAddress("127.0.0.1", port))
            await asyncio.sleep(0.05)
            await transport.abort()
            assert transport.closed
            assert await asyncio.wait_for(seen, 5) == "reset"
            await transport.abort()  # idempotent
            await transport.close()
            with pytest.raises(TransportClosed):
                await transport.send(b"x")
    asyncio.run(main())


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on: bound, then released."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
    return port


def test_connection_refused() -> None:
    port = free_port()
    address = parse_broker(f"stomp://guest:{SECRET}@127.0.0.1:{port}")
    with pytest.raises(ConnectionRefused) as caught:
        asyncio.run(open_transport(address, timeout=5))
    assert one_line(caught.value) == f"cannot connect to 127.0.0.1:{port}: connection refused"


def test_cannot_resolve() -> None:
    # Both names fail on this machine: the first in glibc, the second in Python's IDNA codec.
    for host, why in ((UNRESOLVABLE, ""), ("a" * 64 + ".invalid", "not a valid host name")):
        with pytest.raises(CannotResolve) as caught:
            asyncio.run(open_transport(BrokerAddress(host), timeout=5))
        assert one_line(caught.value).startswith(f"cannot resolve host {host!r}: {why}")


def test_receive_waits_for_a_silent_peer() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    async def main() -> None:
        async with serve(silent) as port:
            transport = await open_transport(BrokerAddress("127.0.0.1", port))
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(transport.receive(), 0.2)
            assert not transport.closed
            await transport.send(b"\n")  # still usable after a cancelled receive
            await transport.close()
    asyncio.run(main())


def test_connect_timeout() -> None:
    # A SYN sent to an address on loopback is answered at once (refused or unreachable);
    # no address of 127.0.0.0/8 drops it without a firewall rule or route this test must
    # not add, so try the likeliest and skip when it does not hang.
    address = BrokerAddress("127.255.255.255", 61613)
    try:
        asyncio.run(open_transport(address, timeout=0.3))
    except ConnectTimeout as exc:
        assert one_line(exc) == ("cannot connect to 127.255.255.255:61613: no answer within "
                                 "0.3 s")
        return
    except ConnectError as exc:
        pytest.skip(f"no loopback address leaves a connect unanswered here ({exc}); "
                    "the timeout path is covered by test_tls_handshake_timeout")
    pytest.fail("connected to 127.255.255.255")


def test_tls_handshake_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    async def main() -> None:
        async with serve(silent) as port:
            with pytest.raises(ConnectTimeout) as caught:
                await open_transport(BrokerAddress("127.0.0.1", port, "stomp+ssl"),
                                     tls=TlsOptions(verify=False), timeout=0.3)
            assert one_line(caught.value) == (f"TLS handshake with 127.0.0.1:{port}: no answer "
                                              "within 0.3 s")
    asyncio.run(main())


def test_websocket_addresses_are_reached_over_tcp_first() -> None:
    """ws:// and wss:// open TCP (and TLS) as stomp:// does, so they fail the same way;
    the WebSocket itself is tests/test_websocket.py's."""
    port = free_port()
    for text in (f"ws://127.0.0.1:{port}/ws", f"wss://guest:{SECRET}@127.0.0.1:{port}/ws"):
        with pytest.raises(ConnectionRefused) as caught:
            asyncio.run(open_transport(parse_broker(text)))
        message = one_line(caught.value)
        assert message == f"cannot connect to 127.0.0.1:{port}: connection refused"
        assert SECRET not in message


# -- TLS ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def server_context(ca: trustme.CA, client_cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1", "::1").configure_cert(context)
    if client_cert:
        ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


async def tls_round_trip(port: int, tls: TlsOptions | None, host: str = "127.0.0.1",
                         scheme: str = "stomp+ssl") -> None:
    transport = await open_transport(BrokerAddress(host, port, scheme), tls=tls, timeout=5)
    assert transport.peer == f"{host}:{port}"
    frame = b"STOMP\naccept-version:1.2\n\n\x00"
    await transport.send(frame)
    assert await read_exactly(transport, len(frame)) == frame
    assert isinstance(transport, TcpTransport) and transport.get_extra_info("cipher")
    await asyncio.wait_for(transport.close(), 5)
    assert transport.closed


def test_tls_verified_with_the_ca(ca: trustme.CA, ca_file: str) -> None:
    async def main() -> None:
        async with serve(echo, context=server_context(ca)) as port:
            await tls_round_trip(port, TlsOptions(ca_file=ca_file))
            await tls_round_trip(port, TlsOptions(ca_file=ca_file), host="localhost")
            # tls= on a stomp:// address turns TLS on too.
            await tls_round_trip(port, TlsOptions(ca_file=ca_file), scheme="stomp")
    asyncio.run(main())


def test_tls_without_the_ca_fails(ca: trustme.CA) -> None:
    async def main() -> None:
        async with serve(echo, context=server_context(ca)) as port:
            for tls in (None, TlsOptions()):  # the system's CAs do not know this one
                with pytest.raises(TlsHandshakeError) as caught:
                    await open_transport(BrokerAddress("127.0.0.1", port, "stomp+ssl"),
                                         tls=tls, timeout=5)
                assert one_line(caught.value) == (
                    f"TLS handshake with 127.0.0.1:{port} failed: certificate verify failed: "
                    "unable to get local issuer certificate")
    asyncio.run(main())


def test_tls_wrong_host_name_fails(ca: trustme.CA, ca_file: str) -> None:
    async def main() -> None:
        async with serve(echo, context=server_context(ca)) as port:
            with pytest.raises(TlsHandshakeError) as caught:
                await open_transport(BrokerAddress("127.0.0.1", port, "stomp+ssl"), timeout=5,
                                     tls=TlsOptions(ca_file=ca_file,
                                                    server_hostname="broker.example"))
            message = one_line(caught.value)
            assert message.startswith(f"TLS handshake with 127.0.0.1:{port} failed: ")
            assert "broker.example" in message
    asyncio.run(main())


def test_tls_without_verification(ca: trustme.CA) -> None:
    async def main() -> None:
        async with serve(echo, context=server_context(ca)) as port:
            await tls_round_trip(port, TlsOptions(verify=False))
            await tls_round_trip(port, TlsOptions(verify=False, server_hostname="other.name"))
    asyncio.run(main())


def test_tls_client_certificate(ca: trustme.CA, ca_file: str, tmp_path: Path) -> None:
    client = ca.issue_cert("client.example")
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    client.cert_chain_pems[0].write_to_path(str(cert))
    client.private_key_pem.write_to_path(str(key))

    async def main() -> None:
        async with serve(echo, context=server_context(ca, client_cert=True)) as port:
            await tls_round_trip(port, TlsOptions(ca_file=ca_file, cert_file=str(cert),
                                                  key_file=str(key)))
    asyncio.run(main())


def test_tls_to_a_plain_peer_fails() -> None:
    async def plain(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"ERROR\nmessage:not TLS\n\n\x00" * 20)
        await writer.drain()
        writer.close()

    async def main() -> None:
        async with serve(plain) as port:
            with pytest.raises(TlsHandshakeError) as caught:
                await open_transport(BrokerAddress("127.0.0.1", port, "stomp+ssl"),
                                     tls=TlsOptions(verify=False), timeout=5)
            assert one_line(caught.value).startswith(f"TLS handshake with 127.0.0.1:{port} "
                                                     "failed: ")
    asyncio.run(main())


def test_tls_peer_close_reads_as_end_of_stream(ca: trustme.CA, ca_file: str) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"ERROR\n\n\x00")
        await writer.drain()
        writer.close()

    async def main() -> None:
        async with serve(hang_up, context=server_context(ca)) as port:
            transport = await open_transport(BrokerAddress("127.0.0.1", port, "stomp+ssl"),
                                             tls=TlsOptions(ca_file=ca_file), timeout=5)
            assert await read_exactly(transport, 8) == b"ERROR\n\n\x00"
            assert await asyncio.wait_for(transport.receive(), 5) == b""
            await asyncio.wait_for(transport.close(), 5)
    asyncio.run(main())


def test_unreadable_tls_files(ca: trustme.CA, ca_file: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    cases = [
        (TlsOptions(ca_file=missing), f"cannot read CA file {missing!r}: no such file"),
        (TlsOptions(ca_file=str(tmp_path)), f"cannot read CA file {str(tmp_path)!r}: is a dir"),
        (TlsOptions(ca_file=str(garbage)), f"cannot load CA file {str(garbage)!r}: "),
        (TlsOptions(ca_file=ca_file, cert_file=missing),
         f"cannot read client certificate file {missing!r}"),
        (TlsOptions(cert_file=ca_file, key_file=missing), f"cannot read client key file "
         f"{missing!r}"),
        (TlsOptions(key_file=ca_file), f"client key file {ca_file!r} needs a certificate file"),
        (TlsOptions(cert_file=str(garbage)), f"cannot load client certificate {str(garbage)!r}: "
         "not a PEM certificate and key"),
    ]
    for options, says in cases:
        with pytest.raises(TransportError) as caught:
            ssl_context(options)
        assert one_line(caught.value).lower().startswith(says.lower()), caught.value
        # open_transport refuses the same way, before connecting anywhere.
        with pytest.raises(TransportError) as caught:
            asyncio.run(open_transport(BrokerAddress("127.0.0.1", free_port(), "stomp+ssl"),
                                       tls=options))
        assert not isinstance(caught.value, ConnectError)


def test_encrypted_client_key_is_refused(ca: trustme.CA, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    client = ca.issue_cert("client.example")
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), None)
    locked = tmp_path / "locked.key"
    locked.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret")))
    cert = tmp_path / "client.pem"
    client.cert_chain_pems[0].write_to_path(str(cert))
    with pytest.raises(TransportError) as caught:
        ssl_context(TlsOptions(cert_file=str(cert), key_file=str(locked)))
    assert one_line(caught.value) == (f"client key {str(locked)!r} is encrypted: give an "
                                      "unencrypted key file")
