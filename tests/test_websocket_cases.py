"""The case format's WebSocket controls against the reference broker (real sockets on
loopback): `ws: {split, type}` cutting a step's bytes into messages, `transports` keeping a
case out of a run over another transport, and the WebSocket faults of the broker, each seen to
bend what a message carries."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from conformance.broker import BrokerConfig, embedded
from conformance.broker.faults import WEBSOCKET_FAULTS
from conformance.profiles import load_profile
from conformance.runner.engine import Engine, run_case
from conformance.runner.results import CaseResult, Outcome
from conformance.runner.steps.frames import frame_ends
from conformance.scenario.loader import CaseLoadError, load_cases, load_file
from conformance.selftest import selftest
from conformance.wire.target import Target
from conformance.wire.transport import parse_broker

CASES = Path(__file__).parent.parent / "cases" / "websocket"
CUT = """
- id: websocket.cut
  title: a SEND cut into messages
  statements: [frames.frame-grammar]
  versions: ["1.2"]
  steps:
    - connect: {}
    - raw:
        data: "SEND\\ndestination:${queue}\\nreceipt:r1\\n\\nhé\\0\\n\\
          SEND\\ndestination:${queue}\\nreceipt:r2\\n\\nb\\0"
        ws: {split: [2, -1], type: binary}
    - expect: {command: RECEIPT, headers: {receipt-id: r1}}
    - expect: {command: RECEIPT, headers: {receipt-id: r2}}
    - raw:
        data: "SEND\\ndestination:${queue}\\nreceipt:r3\\n\\nc\\0\\n\\
          SEND\\ndestination:${queue}\\nreceipt:r4\\n\\nd\\0"
        ws: {split: per-frame}
    - expect: {command: RECEIPT, headers: {receipt-id: r3}}
    - expect: {command: RECEIPT, headers: {receipt-id: r4}}
    - send: {command: SEND, headers: {destination: "${queue}", receipt: r5}, body: x,
             ws: {type: text}}
    - expect: {command: RECEIPT, headers: {receipt-id: r5}}
"""


def run(tmp_path: Path, text: str, *, websocket: bool,
        faults: frozenset[str] = frozenset()) -> list[CaseResult]:
    file = tmp_path / "case.yaml"
    file.write_text(text, encoding="utf-8")

    async def main() -> list[CaseResult]:
        async with embedded(BrokerConfig(port=0, faults=faults), websocket=websocket) as broker:
            target = Target(parse_broker(broker.url(websocket=websocket)),
                            load_profile("reference"))
            return await Engine(target, jobs=2).run(load_file(file))
    return asyncio.run(main())


def notes(result: CaseResult) -> list[str]:
    return [r.note for r in result.transcript if r.direction == "note"
            and r.note.startswith("out ")]


def test_frame_ends_reads_bodies_for_their_content_length() -> None:
    data = (b"\n\nSEND\ncontent-length:3\n\n\0\0\0\0\n\n"
            b"SEND\r\nx:y\r\n\r\nabc\0\r\nSEND\n\nunfinished")
    assert frame_ends(data) == [31, 50]
    assert frame_ends(b"") == [] and frame_ends(b"SEND\n\n") == []


def test_ws_controls_cut_the_messages_and_over_tcp_are_ignored(tmp_path: Path) -> None:
    [ws] = run(tmp_path, CUT, websocket=True)
    assert ws.outcome == Outcome.PASSED, ws.message
    sent = notes(ws)[1:]  # after the CONNECT
    assert [n.split(",")[0] for n in sent] == ["out binary message"] * 3 + \
        ["out text message"] * 3
    assert sent[0].endswith(", 2 B") and sent[2].endswith(", 1 B")
    [tcp] = run(tmp_path, CUT, websocket=False)
    assert tcp.outcome == Outcome.PASSED and notes(tcp) == []
    assert len([r for r in tcp.transcript if r.direction == "out"]) == 4  # one write a step


def test_a_case_for_other_transports_is_not_in_a_run_over_them(tmp_path: Path) -> None:
    text = CUT.replace('versions: ["1.2"]', 'versions: ["1.2"]\n  transports: [ws]')
    assert run(tmp_path, text, websocket=False) == []  # as a case not selected
    # run alone over TCP (as the pytest plugin runs an item), it is skipped with its reason
    [case] = load_file(tmp_path / "case.yaml")
    tcp, _ = asyncio.run(run_case(case, "1.2", Target(parse_broker("127.0.0.1:1"),
                                                      load_profile("reference")),
                                  timeout=5, run_id="t"))
    assert tcp.outcome == Outcome.SKIPPED
    assert tcp.message == "the case runs over WebSocket only, this run over TCP"
    [ws] = run(tmp_path, text, websocket=True)
    assert ws.outcome == Outcome.PASSED
    (tmp_path / "bad.yaml").write_text(text.replace("[ws]", "[http]"), encoding="utf-8")
    with pytest.raises(CaseLoadError, match="transports"):
        load_file(tmp_path / "bad.yaml")


@pytest.mark.slow
def test_the_websocket_cases_pass_and_each_websocket_fault_kills_one() -> None:
    cases = load_cases([CASES])
    result = asyncio.run(selftest(cases, websocket=True))
    assert result.not_passing == [] and result.survivors == []
    assert all(any(result.killed(c, o) for c, o in result.matrix[f].items())
               for f in WEBSOCKET_FAULTS)


def test_selftest_over_tcp_leaves_out_websocket_cases_and_faults() -> None:
    cases = load_cases([CASES])
    assert cases and all(c.transports == ("ws",) for c in cases)
    result = asyncio.run(selftest(cases, websocket=False))
    assert result.clean == [] and not set(result.matrix) & WEBSOCKET_FAULTS
    assert result.matrix  # the other faults are still listed
