"""STOMP over WebSocket: the client transport against the reference broker's WebSocket port
(real sockets on loopback), a hand-written server for what the broker never does (pings,
refusals, no subprotocol), and the catalogue over WebSocket against the embedded broker."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import trustme
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Ping, Pong, Request, TextMessage

from conformance.broker import BrokerConfig, embedded
from conformance.cli.options import default_cases
from conformance.codec import Frame, Parser
from conformance.profiles import load_profile
from conformance.runner.engine import Engine
from conformance.runner.events import RunEvent, RunFinished
from conformance.scenario.loader import load_cases
from conformance.wire.stream import ConnectTimeout, TlsHandshakeError, Transport, WebSocketRefused
from conformance.wire.target import Target
from conformance.wire.transport import TlsOptions, open_transport, parse_broker
from conformance.wire.websocket import WebSocketTransport

CONNECT = b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00"
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def one_line(error: BaseException) -> str:
    text = str(error)
    assert text and "\n" not in text
    return text


async def frames(transport: Transport, count: int, within: float = 5.0) -> list[Frame]:
    """The next `count` frames the broker sends (heart-beats skipped)."""
    parser, got = Parser(version="1.2"), []
    async with asyncio.timeout(within):
        while len(got) < count:
            data = await transport.receive()
            assert data, f"closed after {got}"
            got += [e for e in parser.feed(data) if isinstance(e, Frame)]
    return got


@contextlib.asynccontextmanager
async def ws_broker() -> AsyncIterator[str]:
    """The reference broker serving WebSocket; yields its ws:// URL."""
    async with embedded(BrokerConfig(port=0, heartbeat=(0, 0)), websocket=True) as broker:
        yield broker.url(websocket=True)


@contextlib.asynccontextmanager
async def serve(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def upgraded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   subprotocol: str | None) -> WSConnection:
    """A hand-written server's side of the handshake, accepting with `subprotocol`."""
    ws = WSConnection(ConnectionType.SERVER)
    while True:
        ws.receive_data(await reader.read(65536))
        for event in ws.events():
            if isinstance(event, Request):
                writer.write(ws.send(AcceptConnection(subprotocol=subprotocol)))
                await writer.drain()
                return ws


# -- against the reference broker ------------------------------------------------------------

def test_the_newest_stomp_subprotocol_offered_is_negotiated() -> None:
    async def main() -> None:
        async with ws_broker() as url:
            transport = await open_transport(parse_broker(url))
            assert transport.subprotocol == "v12.stomp"
            assert transport.take_notes() == [
                "WebSocket upgrade of /ws offering v12.stomp, v11.stomp, v10.stomp accepted, "
                "subprotocol v12.stomp"]
            await transport.close()
            older = await open_transport(parse_broker(url), subprotocols=["v10.stomp",
                                                                          "v11.stomp"])
            assert older.subprotocol == "v11.stomp"
            await older.send(CONNECT.replace(b"1.2", b"1.0,1.1,1.2"))
            (connected,) = await frames(older, 1)
            # CONNECT chooses among the versions the subprotocols offered name
            assert connected.header_map["version"] == "1.1"
            await older.close()
    asyncio.run(main())


def test_a_frame_split_over_messages_text_and_binary() -> None:
    async def main() -> None:
        async with ws_broker() as url:
            transport = await open_transport(parse_broker(url))
            assert isinstance(transport, WebSocketTransport)
            transport.take_notes()
            for piece in (CONNECT[:10], CONNECT[10:30], CONNECT[30:]):
                await transport.send(piece)
            (connected,) = await frames(transport, 1)
            assert connected.command == "CONNECTED"
            # a body that is not UTF-8 goes as a binary message; the rest as text
            body = b"\xff\xfe\x00binary"
            send = (b"SEND\ndestination:/queue/ws\nreceipt:r1\ncontent-length:%d\n\n" %
                    len(body) + body + b"\x00")
            subscribe = b"SUBSCRIBE\ndestination:/queue/ws\nid:0\n\n\x00"
            await transport.send(send)
            await transport.send(subscribe)
            receipt, message = await frames(transport, 2)
            assert receipt.command == "RECEIPT" and message.command == "MESSAGE"
            assert message.body == body
            notes = transport.take_notes()
            assert notes[:3] == ["out text message, 10 B", "out text message, 20 B",
                                 f"out text message, {len(CONNECT) - 30} B"]
            assert f"out binary message, {len(send)} B" in notes
            assert f"out text message, {len(subscribe)} B" in notes
            # each frame the broker sends is one message: text unless it is not UTF-8
            assert [n.split(",")[0] for n in notes if n.startswith("in ")] == \
                ["in text message", "in text message", "in binary message"]
            await transport.close()
    asyncio.run(main())


def test_a_forced_message_type() -> None:
    async def main() -> None:
        async with ws_broker() as url:
            transport = await open_transport(parse_broker(url), message_type="binary")
            await transport.send(CONNECT)
            assert (await frames(transport, 1))[0].command == "CONNECTED"
            assert "out binary message, 44 B" in transport.take_notes()
            await transport.close()
            # text that is not UTF-8, sent as asked: the broker closes with 1007
            transport = await open_transport(parse_broker(url), message_type="text")
            assert isinstance(transport, WebSocketTransport)
            await transport.send(b"CONNECT\naccept-version:1.2\nhost:\xff\n\n\x00")
            async with asyncio.timeout(5):
                assert await transport.receive() == b""
            assert transport.close_code == 1007
            await transport.close()
    asyncio.run(main())


def test_the_brokers_close_is_a_clean_end_with_its_code() -> None:
    async def main() -> None:
        async with ws_broker() as url:
            transport = await open_transport(parse_broker(url))
            assert isinstance(transport, WebSocketTransport)
            await transport.send(CONNECT + b"DISCONNECT\nreceipt:bye\n\n\x00")
            connected, receipt = await frames(transport, 2)
            assert receipt.command == "RECEIPT"
            async with asyncio.timeout(5):
                assert await transport.receive() == b""
            assert transport.close_code == 1000
            assert transport.take_notes()[-1] == "the broker closed the WebSocket: 1000"
            await transport.close()
    asyncio.run(main())


def test_an_upgrade_refused_with_an_http_status_is_one_line() -> None:
    async def main() -> None:
        async with ws_broker() as url:
            address = parse_broker(url.removesuffix("/ws") + "/elsewhere")
            with pytest.raises(WebSocketRefused) as caught:
                await open_transport(address)
            assert one_line(caught.value) == (
                f"WebSocket upgrade refused by {address.hostport}: HTTP 404: no STOMP "
                "endpoint at /elsewhere: it is at /ws")
            # offering no STOMP subprotocol: the broker refuses with 400
            with pytest.raises(WebSocketRefused) as caught:
                await open_transport(parse_broker(url), subprotocols=["mqtt"])
            assert "HTTP 400: no STOMP subprotocol offered" in one_line(caught.value)
    asyncio.run(main())


def test_the_stomp_port_is_not_a_websocket() -> None:
    async def main() -> None:
        async with embedded(BrokerConfig(port=0, connect_timeout=0.5)) as broker:
            address = parse_broker(f"ws://127.0.0.1:{broker.port}/ws")
            with pytest.raises(WebSocketRefused) as caught:
                await open_transport(address, timeout=5)
            # the STOMP port's ERROR for the request is no HTTP answer
            assert one_line(caught.value).startswith(
                f"WebSocket handshake with {address.hostport} failed: ")
            assert one_line(caught.value).endswith("(it said 'ERROR')")
    asyncio.run(main())


# -- what the reference broker never does ---------------------------------------------------

def test_a_ping_is_answered_and_messages_are_kept_in_order() -> None:
    pongs: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ws = await upgraded(reader, writer, "v12.stomp")
        writer.write(ws.send(TextMessage("CONNECTED\nversion:1.2\n\n\x00MESS")) +
                     ws.send(Ping(b"are you there")) +
                     ws.send(BytesMessage(b"AGE\ndestination:/q/a\nmessage-id:1\n"
                                          b"subscription:0\n\n\x00")))
        while not pongs:
            ws.receive_data(await reader.read(65536))
            pongs.extend(e.payload for e in ws.events() if isinstance(e, Pong))
        writer.close()

    async def main() -> None:
        async with serve(handler) as port:
            transport = await open_transport(parse_broker(f"ws://127.0.0.1:{port}/"))
            connected, message = await frames(transport, 2)
            assert (connected.command, message.command) == ("CONNECTED", "MESSAGE")
            assert "ping (13 B) answered" in transport.take_notes()
            async with asyncio.timeout(5):
                while not pongs:
                    await asyncio.sleep(0.01)
            assert pongs == [b"are you there"]
            await transport.abort()
    asyncio.run(main())


def test_no_subprotocol_accepted_is_refused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await upgraded(reader, writer, None)
        await reader.read()

    async def main() -> None:
        async with serve(handler) as port:
            with pytest.raises(WebSocketRefused) as caught:
                await open_transport(parse_broker(f"ws://127.0.0.1:{port}/ws"))
            assert one_line(caught.value) == (
                f"WebSocket handshake with 127.0.0.1:{port}: the broker accepted none of the "
                "subprotocols offered (v12.stomp, v11.stomp, v10.stomp)")
            # offering none, none is needed
            transport = await open_transport(parse_broker(f"ws://127.0.0.1:{port}/ws"),
                                             subprotocols=[])
            assert transport.subprotocol is None
            await transport.abort()
    asyncio.run(main())


def test_a_handshake_nobody_answers_times_out() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async def main() -> None:
        async with serve(handler) as port:
            with pytest.raises(ConnectTimeout) as caught:
                await open_transport(parse_broker(f"ws://u:secret@127.0.0.1:{port}/ws"),
                                     timeout=0.3)
            assert one_line(caught.value) == (f"WebSocket handshake with 127.0.0.1:{port}: "
                                              "no answer within 0.3 s")
    asyncio.run(main())


def test_wss_takes_the_tls_options_of_stomp_ssl(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await upgraded(reader, writer, "v12.stomp")
            await reader.read()

    async def main() -> None:
        async with serve(handler, context) as port:
            address = parse_broker(f"wss://127.0.0.1:{port}/ws")
            transport = await open_transport(address, tls=TlsOptions(ca_file=str(ca_file)))
            assert transport.subprotocol == "v12.stomp"
            await transport.abort()
            with pytest.raises(TlsHandshakeError):  # the system's CAs do not know this one
                await open_transport(address)
    asyncio.run(main())


# -- the catalogue ----------------------------------------------------------------------------

@pytest.mark.slow
def test_the_catalogue_over_websocket_grades_as_over_tcp() -> None:
    cases = load_cases([default_cases()])

    async def over(websocket: bool) -> tuple[Counter[str], str | None]:
        finished: list[RunFinished] = []

        def keep(event: RunEvent) -> None:
            if isinstance(event, RunFinished):
                finished.append(event)

        async with embedded(websocket=websocket) as broker:
            target = Target(parse_broker(broker.url(websocket=websocket)),
                            load_profile("reference"))
            results = await Engine(target, jobs=8).run(cases, [keep])
        return Counter(r.outcome.value for r in results), finished[0].subprotocol

    tcp, none = asyncio.run(over(False))
    ws, subprotocol = asyncio.run(over(True))
    # the cases that run over WebSocket only are left out over TCP, and pass over WebSocket
    only_ws = sum(len(c.versions) for c in cases if c.transports == ("ws",))
    assert only_ws and tcp == Counter(passed=sum(len(c.versions) for c in cases) - only_ws)
    assert ws == Counter(passed=tcp["passed"] + only_ws)
    assert (none, subprotocol) == (None, "v12.stomp")
