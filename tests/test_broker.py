"""The reference broker over real sockets, for what needs them: limits, heart-beats and
timeouts, abuse (slow and many connections, slow consumers), sessions that end, the faults
through the engine, the CLI. Its protocol rules are tested in memory:
tests/test_broker_protocol.py."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import case, run_cases
from peers import serving

from conformance.broker import FAULTS, Broker, BrokerConfig
from conformance.broker.faults import Faults
from conformance.broker.outgoing import frame_bytes
from conformance.codec import Frame, Limits, Parser, encode
from conformance.runner.results import Outcome
from conformance.spec import catalogue


@contextlib.contextmanager
def broker(**config: object) -> Iterator[int]:
    with serving(Broker(BrokerConfig(port=0, **config))._accept) as port:  # type: ignore[arg-type]
        yield port


def outcome(tmp_path: Path, port: int, steps: str, versions: str = '"1.2"') -> tuple[Outcome, str]:
    (result,) = run_cases(tmp_path, port, case(steps, versions=versions))
    return result.outcome, result.message


def passes(tmp_path: Path, steps: str, versions: str = '"1.2"', **config: object) -> None:
    """The case passes on a broker with `config`."""
    with broker(**config) as port:
        results = run_cases(tmp_path, port, case(steps, versions=versions))
    assert [(r.version, r.outcome, r.message) for r in results] == \
        [(r.version, Outcome.PASSED, "") for r in results]


# -- the choices the spec leaves to a server (BrokerConfig switches) -------------------------

def test_limits_are_set_by_name() -> None:
    config = BrokerConfig().with_limits({"body": 100, "headers": 5, "subscriptions": 1,
                                         "pending": 1})
    assert (config.limits.max_body, config.limits.max_headers, config.max_subscriptions,
            config.max_pending) == (100, 5, 1, 1)
    for bad, words in (({"bodyy": 1}, "unknown limit 'bodyy'"), ({"body": 0}, "positive")):
        with pytest.raises(ValueError, match=words):
            BrokerConfig().with_limits(bad)


@pytest.mark.parametrize(("config", "words"), [
    ({"nack": "drop"}, "nack 'drop': choose from redeliver, discard"),
    ({"unknown_vhost": "guess"}, "choose from reject, default"),
    ({"unknown_command": "x"}, "choose from error, ignore"),
    ({"vhosts": ()}, "at least one virtual host"),
    ({"heartbeat": (-1, 0)}, "0 or more"),
])
def test_switches_refuse_values_the_spec_does_not_allow(config: dict[str, object],
                                                         words: str) -> None:
    with pytest.raises(ValueError, match=words):
        BrokerConfig(**config)  # type: ignore[arg-type]


# -- errors and limits -----------------------------------------------------------------------

def test_a_fault_the_encoder_refuses_still_escapes_headers() -> None:
    """error-without-content-headers makes an ERROR whose body holds a NUL unencodable: it
    is written as it is, but its headers stay escaped (the fault breaks its statement only)."""
    error = Frame("ERROR", [("message", "bad: \\x00")], b"a \x00 b")
    wire = frame_bytes(error, "1.2", Faults.of(["error-without-content-headers"]))
    assert wire == b"ERROR\nmessage:bad\\c \\\\x00\n\na \x00 b\x00"
    assert frame_bytes(error, "1.2", Faults.of(["error-without-content-headers",
                                                 "no-escaping"])).startswith(
        b"ERROR\nmessage:bad: \\x00\n")


@pytest.mark.parametrize("flood", [
    "SEND\\ndestination:/queue/x\\n{h}\\n\\0",
    "SEND\\ndestination:/queue/x\\nk:{v}\\n\\n\\0",
    "SEND\\ndestination:/queue/x\\ncontent-length:99999\\n\\n{b}\\0",
])
def test_limits_are_answered_with_error_then_close(tmp_path: Path, flood: str) -> None:
    data = flood.format(h="h:v\\n" * 20, v="v" * 300, b="b" * 99999)
    passes(tmp_path, f"""
        - connect: {{}}
        - raw: {{data: "{data}"}}
        - expect_error_close: {{}}
    """, limits=Limits(max_headers=10, max_header_line=200, max_body=5000, max_frame=6000))


# -- heart-beats -------------------------------------------------------------------------------

@pytest.mark.timing
def test_heartbeats_are_sent_at_the_negotiated_interval_and_a_silent_client_dropped() -> None:
    async def main(port: int) -> tuple[list[float], float]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(encode(Frame("CONNECT", {"accept-version": "1.2", "host": "h",
                                              "heart-beat": "100,200"})))
        parser, beats, started = Parser(), [], time.monotonic()
        while True:
            data = await asyncio.wait_for(reader.read(65536), 5)
            if not data:
                return beats, time.monotonic() - started
            for event in parser.feed(data):
                if not isinstance(event, Frame):
                    beats.append(time.monotonic() - started)

    with broker(heartbeat=(150, 100), heartbeat_tolerance=2.0) as port:
        beats, closed_after = asyncio.run(main(port))
    # we send nothing: the broker expects us every max(100, 100) ms, so drops us after 0.2 s;
    # it sends every max(150, 200) = 200 ms
    assert 0.15 < closed_after < 1.0
    gaps = [b - a for a, b in zip(beats, beats[1:], strict=False)]
    assert all(0.15 < g < 0.3 for g in gaps), gaps


# -- abuse -------------------------------------------------------------------------------------

@pytest.mark.timing
def test_slow_loris_and_a_flood_of_connections(tmp_path: Path) -> None:
    passes(tmp_path, """
        - connect: {}
        - raw: {data: "SEND\\ndestination:${queue}\\n", delivery: bytewise, pause: 0.05}
        - expect_error_close: {headers: {message: {regex: ".*took longer.*"}}, within: 3}
    """, frame_timeout=0.5)
    with broker(max_connections=5) as port:
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
        time.sleep(0.2)
        closed = 0
        for sock in socks:
            sock.settimeout(1)
            try:
                closed += sock.recv(10) == b""
            except TimeoutError:
                pass
            sock.close()
        assert closed == 3


def test_a_slow_topic_consumer_does_not_make_the_broker_buffer(tmp_path: Path) -> None:
    async def main(port: int) -> bytes:
        slow_r, slow_w = await asyncio.open_connection("127.0.0.1", port)
        slow_w.write(encode(Frame("CONNECT", {"accept-version": "1.2", "host": "h"})) +
                     encode(Frame("SUBSCRIBE", {"id": "t", "destination": "/topic/flood",
                                                "receipt": "s"})))
        await asyncio.sleep(0.2)
        _, fast_w = await asyncio.open_connection("127.0.0.1", port)
        fast_w.write(encode(Frame("CONNECT", {"accept-version": "1.2", "host": "h"})))
        body = b"x" * 65536
        for _ in range(400):  # 26 MB at a consumer that reads nothing
            fast_w.write(encode(Frame("SEND", {"destination": "/topic/flood"}, body)))
            await fast_w.drain()
        await asyncio.sleep(0.5)
        data = b""
        with contextlib.suppress(ConnectionError, TimeoutError):
            while chunk := await asyncio.wait_for(slow_r.read(1 << 20), 5):
                data += chunk
        return data

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with broker(write_high_water=1 << 20) as port:
        data = asyncio.run(main(port))
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert b"slow consumer" in data
    assert grown_mb < 100, f"{grown_mb:.0f} MB"


def test_messages_held_in_queues_and_transactions_share_one_bound(tmp_path: Path) -> None:
    # Each SEND below is about 160 octets: two fit in 400, whatever their queues.
    body = "b" * 100
    passes(tmp_path, f"""
        - connect: {{}}
        - send: {{command: BEGIN, headers: {{transaction: t1}}}}
        - send: {{command: SEND, headers: {{destination: "${{queue}}", transaction: t1}}, body: {body}}}
        - send: {{command: SEND, headers: {{destination: "${{queue}}", transaction: t1}}, body: {body}}}
        - send: {{command: ABORT, headers: {{transaction: t1}}}}
        - send: {{command: SEND, headers: {{destination: "${{queue}}", receipt: a}}, body: {body}}}
        - expect: {{command: RECEIPT, headers: {{receipt-id: a}}}}
        - send: {{command: SEND, headers: {{destination: "${{queue2}}", receipt: b}}, body: {body}}}
        - expect: {{command: RECEIPT, headers: {{receipt-id: b}}}}
        - send: {{command: BEGIN, headers: {{transaction: t2}}}}
        - send: {{command: SEND, headers: {{destination: "${{queue2}}", transaction: t2}}, body: {body}}}
        - expect_error_close: {{headers: {{message: {{regex: ".*holds 3[0-9][0-9] octets of messages, its limit is 400.*"}}}}}}
    """, max_held_bytes=400)


@pytest.mark.parametrize(("config", "frames"), [
    ({"max_transactions": 2}, "BEGIN\\ntransaction:x\\n\\n\\0"),
    ({"max_transaction_frames": 2},
     "SEND\\ndestination:${queue}\\ntransaction:t2\\n\\n\\0" * 2),
])
def test_open_transactions_are_bounded(tmp_path: Path, config: dict[str, object],
                                       frames: str) -> None:
    passes(tmp_path, f"""
        - connect: {{}}
        - send: {{command: BEGIN, headers: {{transaction: t1}}}}
        - send: {{command: BEGIN, headers: {{transaction: t2}}}}
        - send: {{command: SEND, headers: {{destination: "${{queue}}", transaction: t1}}}}
        - raw: {{data: "{frames}"}}
        - expect_error_close: {{headers: {{message: {{regex: "more than 2 .*"}}}}}}
    """, **config)


def test_a_destination_is_dropped_once_it_holds_nothing(tmp_path: Path) -> None:
    steps = "\n            ".join(
        f"""- send: {{command: SEND, headers: {{destination: "/topic/t{n}"}}}}
            - send: {{command: SUBSCRIBE, headers: {{id: s{n}, destination: "/queue/q{n}"}}}}
            - send: {{command: UNSUBSCRIBE, headers: {{id: s{n}}}}}""" for n in range(20))
    the_broker = Broker(BrokerConfig(port=0))
    with serving(the_broker._accept) as port:  # type: ignore[arg-type]
        assert outcome(tmp_path, port, f"""
            - connect: {{}}
            {steps}
            - send: {{command: SUBSCRIBE, headers: {{id: a, destination: "${{queue}}", ack: client}}}}
            - send: {{command: BEGIN, headers: {{transaction: t}}}}
            - send: {{command: SEND, headers: {{destination: "${{queue}}", transaction: t}}, body: held}}
            - send: {{command: COMMIT, headers: {{transaction: t, receipt: c}}}}
            - expect: {{command: MESSAGE, body: held, capture: {{a1: ack}}}}
            - send: {{command: ACK, headers: {{id: "${{a1}}"}}}}
            - send: {{command: BEGIN, headers: {{transaction: never}}}}
            - send: {{command: SEND, headers: {{destination: "${{queue2}}", transaction: never, receipt: r}}, body: dropped}}
            - expect: {{command: RECEIPT}}
        """)[0] == Outcome.PASSED
        store = the_broker.store
        deadline = time.monotonic() + 5
        while (store.destinations or the_broker.sessions) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (list(store.destinations), store.held) == ([], 0)


# -- faults --------------------------------------------------------------------------------------

def test_every_fault_names_a_statement_of_the_catalogue() -> None:
    assert len(FAULTS) >= 25
    for name, (statement, does) in FAULTS.items():
        assert statement in catalogue() and does, name
    with pytest.raises(ValueError, match="unknown fault nope"):
        BrokerConfig(faults=frozenset({"nope"}))


def test_the_faults_value_has_one_switch_per_fault_name() -> None:
    switches = {f.name for f in dataclasses.fields(Faults) if f.init}
    assert switches == {name.replace("-", "_") for name in FAULTS}
    assert not Faults.of(()).bends_messages and not Faults().no_ack_header
    some = Faults.of(["no-ack-header", "no-1-0-fallback"])
    assert some.bends_messages and some.no_ack_header and some.no_1_0_fallback
    assert not some.bends_incoming and not some.bends_ws_messages
    assert not some.drop_receipts
    with pytest.raises(ValueError, match="unknown fault nope"):
        Faults.of(["no-ack-header", "nope"])
    assert Broker(BrokerConfig(faults=frozenset({"drop-receipts"}))).faults == \
        Faults(drop_receipts=True)


@pytest.mark.parametrize(("fault", "steps"), [
    ("no-ack-header", """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}", ack: client}}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: m}
        - expect: {command: MESSAGE}
    """),
    ("error-without-close", """
        - connect: {}
        - send: {command: FOO}
        - expect_error_close: {within: 0.5}
    """),
    ("wrong-version", """
        - connect: {expect: nothing, headers: {accept-version: "1.1,1.2", host: h}}
        - expect: {command: CONNECTED, headers: {version: "1.2"}}
    """),
    ("cumulative-ack-crosses-subscriptions", """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}", ack: client}}
        - send: {command: SUBSCRIBE, headers: {id: b, destination: "${queue2}", ack: client}}
        - send: {command: SEND, headers: {destination: "${queue2}"}, body: other}
        - expect: {command: MESSAGE, body: other}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: m}
        - expect: {command: MESSAGE, body: m, capture: {a: ack}}
        - send: {command: ACK, headers: {id: "${a}"}}
        - close: {}
        - connect: {conn: b}
        - send: {conn: b, command: SUBSCRIBE, headers: {id: b, destination: "${queue2}"}}
        - expect: {conn: b, command: MESSAGE, body: other, within: 0.5}
    """),
    ("ignore-transactions", """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}"}}
        - send: {command: BEGIN, headers: {transaction: t}}
        - send: {command: SEND, headers: {destination: "${queue}", transaction: t}, body: m}
        - expect_none: {within: 0.3}
    """),
    ("ignore-content-length", """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}"}}
        - raw: {data: "SEND\\ndestination:${queue}\\ncontent-length:3\\n\\na\\0b\\0"}
        - expect: {command: MESSAGE, body: "a\\0b"}
    """),
])
def test_a_fault_makes_its_case_fail(tmp_path: Path, fault: str, steps: str) -> None:
    passes(tmp_path, steps)
    with broker(faults=frozenset({fault})) as port:
        (result,) = run_cases(tmp_path, port, case(steps))
    assert result.outcome in (Outcome.FAILED, Outcome.NON_STRICT), fault


# -- the command line -------------------------------------------------------------------------

def test_the_broker_verb_serves_until_interrupted_and_stops_cleanly() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = subprocess.Popen([sys.executable, "-m", "conformance", "broker", "--port",
                              str(port), "--fault", "drop-receipts"], stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert child.stderr is not None
        line = child.stderr.readline()
        assert f"listening on 127.0.0.1:{port} with faults drop-receipts" in line
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(encode(Frame("CONNECT", {"accept-version": "1.2", "host": "h"})))
            assert sock.recv(1000).startswith(b"CONNECTED\n")
        child.send_signal(signal.SIGINT)
        assert child.wait(10) == 0
        assert "stopped" in child.stderr.read() and "Traceback" not in line
    finally:
        child.kill()
    bad = subprocess.run([sys.executable, "-m", "conformance", "broker", "--fault", "nope"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "unknown fault nope" in bad.stderr


def test_the_broker_verb_sets_the_switches() -> None:
    """--vhost /prod: a 1.0 CONNECT without host is served as /prod (never 'None'); with
    --login and --v10-anonymous, without login too; --minimal-connected; a bad value or
    limit is one line and exit 2."""
    child = subprocess.Popen([sys.executable, "-m", "conformance", "broker", "--port", "0",
                              "--vhost", "/prod", "--login", "u", "--passcode", "p",
                              "--v10-anonymous", "--minimal-connected", "--nack", "discard",
                              "--limit", "body=10", "--limit", "headers=8"],
                             stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert child.stderr is not None
        port = int(child.stderr.readline().split(":")[-1])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(encode(Frame("CONNECT", {})))
            assert sock.recv(1000).startswith(b"CONNECTED\nsession:")
            sock.sendall(encode(Frame("SEND", {"destination": "/queue/a"}, b"x" * 11)))
            assert b"ERROR" in sock.recv(1000)
        child.send_signal(signal.SIGINT)
        assert child.wait(10) == 0
    finally:
        child.kill()
    for flags, words in ((["--limit", "bodyy=3"], "unknown limit 'bodyy'"),
                         (["--limit", "body"], "expected NAME=NUMBER"),
                         (["--limit", "body=-1"], "expected NAME=NUMBER"),
                         (["--nack", "drop"], "choose from redeliver, discard")):
        bad = subprocess.run([sys.executable, "-m", "conformance", "broker", *flags],
                             capture_output=True, text=True, timeout=30)
        assert bad.returncode == 2 and words in bad.stderr, flags
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


@pytest.mark.timing
def test_heartbeat_steps_see_the_interval_and_keep_a_connection_alive(tmp_path: Path) -> None:
    steps = """
        - connect: {headers: {heart-beat: "0,200"}}
        - expect_heartbeats: {every: 200, within: 1}
        - connect: {conn: beating, headers: {heart-beat: "100,0"}}
        - send_heartbeats: {conn: beating, every: 50, within: 0.6, eol: CRLF}
        - send: {conn: beating, command: SEND, headers: {destination: "${queue}", receipt: alive}}
        - expect: {conn: beating, command: RECEIPT, headers: {receipt-id: alive}}
        - expect_error_close: {conn: beating, within: 2, headers: {message: {regex: ".*heart-beat.*"}}}
        - connect: {conn: quiet, headers: {heart-beat: "0,0"}}
        - expect_heartbeats: {conn: quiet, every: 200, within: 0.6, none: true}
    """
    passes(tmp_path, steps, heartbeat=(100, 100))
    with broker(heartbeat=(100, 100), faults=frozenset({"no-heartbeats"})) as port:
        (result,) = run_cases(tmp_path, port, case(steps))
    assert result.outcome == Outcome.FAILED and "0 heart-beat EOLs" in result.observed


TWO_UNACKED = """
    - connect: {}
    - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}", ack: client}}
    - send: {command: SEND, headers: {destination: "${queue}"}, body: m1}
    - send: {command: SEND, headers: {destination: "${queue}"}, body: m2}
    - expect: {command: MESSAGE, body: m1}
    - expect: {command: MESSAGE, body: m2}
"""


def test_a_capability_the_profile_leaves_open_is_found_out_from_the_broker(
        tmp_path: Path) -> None:
    """A broker with a prefetch of one lacks several-unacked legally: the case needing it
    is unsupported, saying so; the same case passes where the broker has it, and where the
    profile declares it the broker is held to it."""
    needs = case(TWO_UNACKED, extra="  requires: [several-unacked]\n")
    with broker() as port:
        (result,) = run_cases(tmp_path, port, needs)
    assert result.outcome == Outcome.PASSED, result.message
    with broker(max_pending=1) as port:
        (result,) = run_cases(tmp_path, port, needs)
        assert result.outcome == Outcome.UNSUPPORTED
        assert result.message.startswith("several-unacked absent, as the broker showed at "
                                         "STOMP 1.2: a second message held back"), result.message
        declares = tmp_path / "declares.yaml"
        declares.write_text("name: declares\ncapabilities: {several-unacked: true}\n")
        (declared,) = run_cases(tmp_path, port, needs, profile=str(declares))
    assert declared.outcome == Outcome.FAILED, declared.message


def test_a_session_refused_after_it_was_served_is_an_error_of_the_setup(
        tmp_path: Path) -> None:
    """At a limit of connections, a case's CONNECT closed without a word is no failure of
    the case's statement: it errs, saying the broker served the same CONNECT before."""
    steps = """
        - connect: {}
        - connect: {conn: other}
        - expect_none: {within: 0.5}
    """
    with broker(max_connections=2) as port:
        results = run_cases(tmp_path, port, *(case(steps, id=f"t.c{i}") for i in range(4)),
                            jobs=4)
    errors = [r for r in results if r.outcome == Outcome.ERROR]
    assert errors and {r.outcome for r in results} <= {Outcome.PASSED, Outcome.ERROR}
    assert all(r.setup_refused and "served the same CONNECT before the cases: at a limit "
               "of connections? try fewer --jobs" in r.message for r in errors), errors

