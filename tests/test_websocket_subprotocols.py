"""WebSocket subprotocol negotiation: the `open` step's offer and its `refused` grade, an
upgrade naming a subprotocol not offered, the reference broker bounding the STOMP version by
the offer, and the cases of cases/websocket/subprotocols.yaml under the faults that break
it (real sockets on loopback)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request

from conformance.broker import BrokerConfig, embedded
from conformance.broker.connect import answer
from conformance.broker.faults import Faults
from conformance.codec import Frame, Parser
from conformance.profiles import load_profile
from conformance.runner.engine import Engine
from conformance.runner.results import CaseResult, Outcome
from conformance.scenario import Case
from conformance.scenario.loader import load_file
from conformance.selftest import selftest
from conformance.wire.stream import SubprotocolNotOffered, WebSocketRefused
from conformance.wire.target import Target
from conformance.wire.transport import open_transport, parse_broker
from conformance.wire.websocket_server import choose, offered_versions

CASES = Path(__file__).parent.parent / "cases" / "websocket" / "subprotocols.yaml"
NEW_FAULTS = ("ws-version-outside-subprotocol", "ws-subprotocol-unoffered")
# `open` offering no subprotocol; what follows must never run once the case has ended
REFUSED = """
- id: t.refused
  title: an upgrade offering nothing
  statements: [connecting.connected-response]
  versions: ["1.2"]
  steps:
    - open: {ws: {subprotocols: []}REFUSED}
    - expect: {command: MESSAGE, within: 0.2}
"""


def run(tmp_path: Path, text: str, *, websocket: bool = True,
        config: BrokerConfig | None = None) -> list[CaseResult]:
    file = tmp_path / "case.yaml"
    file.write_text(text, encoding="utf-8")
    return run_cases(load_file(file), websocket=websocket, config=config)


def run_cases(cases: list[Case], *, websocket: bool = True,
              config: BrokerConfig | None = None) -> list[CaseResult]:
    async def main() -> list[CaseResult]:
        async with embedded(config or BrokerConfig(port=0), websocket=websocket) as broker:
            target = Target(parse_broker(broker.url(websocket=websocket)),
                            load_profile("reference"))
            return await Engine(target, jobs=3).run(cases)
    return asyncio.run(main())


def notes(result: CaseResult) -> list[str]:
    return [r.note for r in result.transcript if r.direction == "note"]


# -- the case format ---------------------------------------------------------------------------

def test_open_with_refused_ends_the_case_with_its_grade(tmp_path: Path) -> None:
    text = REFUSED.replace("REFUSED", ", refused: {grade: non-strict, note: refused}")
    [result] = run(tmp_path, text)
    # the expect after it never ran: it would have failed the case
    assert result.outcome == Outcome.NON_STRICT
    assert result.message.startswith("refused: WebSocket upgrade refused by ")
    assert "HTTP 400" in result.message and result.expected == ""
    assert any(n.startswith("WebSocket upgrade offering no subprotocol: WebSocket upgrade "
                            "refused") for n in notes(result))
    [passed] = run(tmp_path, text.replace("non-strict", "passed"))
    assert passed.outcome == Outcome.PASSED
    # without `refused`, a refusal is the case's error, as before
    [error] = run(tmp_path, REFUSED.replace("REFUSED", ""))
    assert error.outcome == Outcome.ERROR and "HTTP 400" in error.message


def test_open_offering_a_subprotocol_notes_it_and_over_tcp_ignores_it(tmp_path: Path) -> None:
    text = REFUSED.replace("[]}REFUSED", "[v10.stomp]}").replace(
        "- expect: {command: MESSAGE, within: 0.2}",
        "- connect: {expect: nothing, headers: {accept-version: \"1.0,1.2\"}}\n"
        "    - expect: {command: CONNECTED, headers: {version: {absent: true}}}")
    [ws] = run(tmp_path, text)
    assert ws.outcome == Outcome.PASSED, ws.message  # 1.2 is not among the offer's versions
    assert "WebSocket upgrade of /ws offering v10.stomp accepted, subprotocol v10.stomp" \
        in notes(ws)
    [tcp] = run(tmp_path, text.replace("{absent: true}", '"1.2"'), websocket=False)
    assert tcp.outcome == Outcome.PASSED, tcp.message


def test_a_subprotocol_not_offered_fails_the_case_refused_or_not(tmp_path: Path) -> None:
    unoffered = BrokerConfig(port=0, faults=frozenset({"ws-subprotocol-unoffered"}))
    for refused in ("", ", refused: {grade: passed}"):
        [result] = run(tmp_path, REFUSED.replace("REFUSED", refused), config=unoffered)
        assert result.outcome == Outcome.FAILED
        assert "accepted the upgrade naming subprotocol 'v12.stomp', which was not offered " \
               "(offered: none)" in result.observed
        assert any(n.startswith("WebSocket upgrade offering no subprotocol: ")
                   for n in notes(result))


# -- the transport and the broker ----------------------------------------------------------

def test_an_unoffered_subprotocol_is_told_apart_from_a_refusal() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        ws.receive_data(await reader.read(65536))
        for event in ws.events():
            if isinstance(event, Request):  # wsproto would not name one not offered
                writer.write(ws.send(AcceptConnection(extra_headers=[
                    (b"Sec-WebSocket-Protocol", b"mqtt")])))
        with contextlib.suppress(ConnectionError):
            await reader.read()

    async def main() -> None:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(SubprotocolNotOffered) as caught:
                await open_transport(parse_broker(f"ws://127.0.0.1:{port}/ws"),
                                     subprotocols=["v12.stomp"])
            assert not isinstance(caught.value, WebSocketRefused)
            assert str(caught.value) == (
                f"WebSocket handshake with 127.0.0.1:{port}: the broker accepted the upgrade "
                "naming subprotocol 'mqtt', which was not offered (offered: v12.stomp)")
        finally:
            server.close()
    asyncio.run(main())


def test_the_offer_bounds_the_version_the_broker_negotiates() -> None:
    assert choose(["v10.stomp", "v11.stomp"]) == "v11.stomp"
    assert choose(["v12.stomp", "v11.stomp"], ("1.0", "1.1")) == "v11.stomp"
    assert choose(["v12.stomp"], ("1.0", "1.1")) is None and choose(["mqtt"]) is None
    assert offered_versions(["v12.stomp", "mqtt", "v10.stomp"]) == ("1.0", "1.2")
    assert offered_versions(["mqtt"]) is None and offered_versions([]) is None

    def connect(accept: str | None, bound: tuple[str, ...] | None) -> Frame:
        headers = [("host", "h")] + ([("accept-version", accept)] if accept else [])
        return answer(BrokerConfig(), Faults(), Frame("CONNECT", headers), "s1",
                      bound).frames[0]

    assert connect("1.0,1.1,1.2", ("1.1",)).header_map["version"] == "1.1"
    assert connect("1.0,1.1,1.2", ("1.0", "1.1")).header_map["version"] == "1.1"
    assert connect("1.0,1.1,1.2", None).header_map["version"] == "1.2"
    assert "version" not in connect(None, ("1.0", "1.2")).header_map  # absent: 1.0
    error = connect("1.2", ("1.1",))
    assert (error.command, error.header_map["version"]) == ("ERROR", "1.1")
    assert error.body == b"Supported protocol versions on this connection (its WebSocket " \
                         b"subprotocols) are 1.1"
    assert connect(None, ("1.1",)).command == "ERROR"


def test_the_broker_over_websocket_answers_within_the_offer() -> None:
    async def first_frame(url: str, offer: list[str], accept: str) -> Frame:
        transport = await open_transport(parse_broker(url), subprotocols=offer)
        await transport.send(f"CONNECT\naccept-version:{accept}\nhost:h\n\n\0".encode())
        parser = Parser(version="1.2")
        async with asyncio.timeout(5):
            while not (got := [e for e in parser.feed(await transport.receive())
                               if isinstance(e, Frame)]):
                pass
        await transport.abort()
        return got[0]

    async def main() -> None:
        async with embedded(BrokerConfig(port=0, heartbeat=(0, 0)), websocket=True) as broker:
            url = broker.url(websocket=True)
            everything = await first_frame(url, ["v12.stomp", "v11.stomp", "v10.stomp"],
                                           "1.0,1.1,1.2")
            assert everything.header_map["version"] == "1.2"  # the harness's default offer
            older = await first_frame(url, ["v11.stomp"], "1.0,1.1,1.2")
            assert older.header_map["version"] == "1.1"
            assert (await first_frame(url, ["v11.stomp"], "1.2")).command == "ERROR"
        # a broker speaking 1.2 alone refuses an offer of older subprotocols at the upgrade
        async with embedded(BrokerConfig(port=0, versions=("1.2",)), websocket=True) as broker:
            with pytest.raises(WebSocketRefused, match="of a version this broker speaks"):
                await open_transport(parse_broker(broker.url(websocket=True)),
                                     subprotocols=["v11.stomp", "v10.stomp"])
    asyncio.run(main())


# -- the cases -------------------------------------------------------------------------------

def test_the_subprotocol_cases_pass_and_each_new_fault_kills_its_cases() -> None:
    cases = load_file(CASES)
    result = asyncio.run(selftest(cases, websocket=True))
    assert result.not_passing == [] and result.survivors == []
    assert {r.id: r.outcome for r in result.clean} == {c.id: Outcome.PASSED for c in cases}
    tagged = {c.id: {t.removeprefix("fault:") for t in c.tags if t.startswith("fault:")}
              for c in cases}
    for fault in NEW_FAULTS:
        named = {c for c, faults in tagged.items() if fault in faults}
        assert named and {c for c in named if result.killed(c, result.matrix[fault][c])} \
            == named, fault
    row = result.matrix["ws-subprotocol-unoffered"]
    assert set(row.values()) == {Outcome.FAILED}  # RFC 6455's MUST: failed, not informational
    assert set(result.matrix["ws-version-outside-subprotocol"].values()) == \
        {Outcome.INFORMATIONAL}  # convention only
    # over TCP the cases are left out, and neither fault is tried
    over_tcp = asyncio.run(selftest(cases, websocket=False))
    assert over_tcp.clean == [] and not set(over_tcp.matrix) & set(NEW_FAULTS)


def test_a_broker_serving_a_client_that_offers_no_subprotocol_passes_too() -> None:
    [case] = [c for c in load_file(CASES) if c.id == "websocket.no-subprotocol-offered"]
    [result] = run_cases([case], config=BrokerConfig(port=0, ws_accept_unnegotiated=True))
    assert result.outcome == Outcome.PASSED and result.message == ""
    assert "WebSocket upgrade of /ws offering no subprotocol accepted, subprotocol none" \
        in notes(result)
    assert [r for r in result.transcript if r.direction == "in"]  # served: CONNECTED, RECEIPT
