"""The reference broker over real sockets: negotiation, queues and topics, ack modes,
redelivery, transactions, receipts, errors, limits, heart-beats, abuse, faults, the CLI."""

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
from conformance.broker.destinations import Message, Store, Subscription
from conformance.broker.faults import Faults
from conformance.broker.outgoing import frame_bytes
from conformance.broker.protocol import BrokerProtocol
from conformance.codec import Frame, Limits, Parser, encode
from conformance.profiles import load_profile
from conformance.runner.engine import Engine
from conformance.runner.results import Outcome
from conformance.scenario import load_file
from conformance.spec import catalogue
from conformance.wire.target import Target
from conformance.wire.transport import parse_broker


@contextlib.contextmanager
def broker(**config: object) -> Iterator[int]:
    with serving(Broker(BrokerConfig(port=0, **config))._accept) as port:  # type: ignore[arg-type]
        yield port


def outcome(tmp_path: Path, port: int, steps: str, versions: str = '"1.2"') -> tuple[Outcome, str]:
    (result,) = run_cases(tmp_path, port, case(steps, versions=versions))
    return result.outcome, result.message


def passes(tmp_path: Path, steps: str, versions: str = '"1.2"', *,
           run: dict[str, str] | None = None, **config: object) -> None:
    """The case passes on a broker with `config`, run with the `run` settings (login,
    passcode, host) a user of that broker would give."""
    with broker(**config) as port:
        if run is None:
            results = run_cases(tmp_path, port, case(steps, versions=versions))
        else:
            path = tmp_path / "cases.yaml"
            path.write_text(case(steps, versions=versions))
            target = Target(parse_broker(f"127.0.0.1:{port}"), load_profile("reference"),
                            login=run.get("login"), passcode=run.get("passcode"),
                            host=run.get("host"))
            results = asyncio.run(Engine(target).run(load_file(path)))
    assert [(r.version, r.outcome, r.message) for r in results] == \
        [(r.version, Outcome.PASSED, "") for r in results]


# -- negotiation and CONNECT ---------------------------------------------------------------

def test_each_version_is_negotiated(tmp_path: Path) -> None:
    passes(tmp_path, """
        - connect: {}
        - send: {command: DISCONNECT, headers: {receipt: d}}
        - expect: {command: RECEIPT, headers: {receipt-id: d}}
        - expect_close: {}
    """, versions='"1.0", "1.1", "1.2"')
    passes(tmp_path, """
        - connect: {expect: nothing, headers: {accept-version: "1.0,1.1,2.0", host: h}}
        - expect: {command: CONNECTED, headers: {version: "1.1", heart-beat: {regex: "[0-9]+,[0-9]+"}, server: {regex: "stomp-conformance/.*"}, session: {present: true}}}
    """)
    passes(tmp_path, """
        - connect: {expect: nothing, headers: {accept-version: "2.0,3.1", host: h}}
        - expect_error_close: {headers: {version: "1.0,1.1,1.2"}}
    """)
    passes(tmp_path, """
        - connect: {command: STOMP}
    """)


USER = {"login": "u", "passcode": "p"}


@pytest.mark.parametrize(("headers", "config", "words"), [
    ("accept-version:1.2", {}, "host header"),
    ("accept-version:1.2\\nhost:h\\nlogin:a\\npasscode:wrong", {"users": {"a": "b"}},
     "access refused"),
    ("accept-version:1.2\\nhost:nowhere", {"vhosts": ("vh",)},
     "unknown virtual host 'nowhere': this broker serves vh"),
    ("accept-version:1.2\\nhost:h", {"users": {"a": "b"}, "v10_anonymous": True},
     "CONNECT without login"),
    ("accept-version:1.2\\nhost:h\\nheart-beat:x,1", {}, "heart-beat"),
])
def test_connect_refused(tmp_path: Path, headers: str, config: dict[str, object],
                         words: str) -> None:
    passes(tmp_path, f"""
        - open: {{}}
        - raw: {{data: "CONNECT\\n{headers}\\n\\n\\0"}}
        - expect_error_close: {{headers: {{message: {{regex: ".*{words}.*"}}}}}}
    """, run={"login": "a", "passcode": "b"} if "users" in config else
        {"host": "vh"} if "vhosts" in config else None, **config)


def test_frames_before_connect_and_a_second_connect_are_errors(tmp_path: Path) -> None:
    passes(tmp_path, """
        - open: {}
        - send: {command: SEND, headers: {destination: "${queue}", receipt: r}}
        - expect_error_close: {headers: {receipt-id: r}}
        - connect: {conn: b}
        - connect: {conn: b, expect: nothing}
        - expect_error_close: {conn: b}
    """)


# -- the choices the spec leaves to a server (BrokerConfig switches) -------------------------

def test_virtual_hosts_the_first_is_the_default(tmp_path: Path) -> None:
    # 1.0 has no host header: a 1.0 CONNECT without one is served as the default host
    passes(tmp_path, """
        - open: {}
        - raw: {data: "CONNECT\\n\\n\\0"}
        - expect: {command: CONNECTED, headers: {session: {present: true}}}
    """, versions='"1.0"', run={"host": "/prod"}, vhosts=("/prod", "/test"))
    passes(tmp_path, """
        - connect: {expect: nothing, headers: {host: /test}}
        - expect: {command: CONNECTED}
        - connect: {conn: b, expect: nothing, headers: {host: nowhere}}
        - expect_error_close: {conn: b, headers: {message: {regex: ".*'nowhere'.*serves /prod, /test"}}}
    """, versions='"1.0", "1.2"', run={"host": "/prod"}, vhosts=("/prod", "/test"))
    passes(tmp_path, """
        - connect: {expect: nothing, headers: {host: nowhere}}
        - expect: {command: CONNECTED}
    """, versions='"1.0", "1.2"', vhosts=("/prod",), unknown_vhost="default")


@pytest.mark.parametrize("anonymous", [False, True])
def test_a_1_0_connect_without_login_is_refused_unless_anonymous_1_0_is_on(
        tmp_path: Path, anonymous: bool) -> None:
    users = {"u": "p"}
    answer = "expect: {command: CONNECTED}" if anonymous else \
        'expect_error_close: {headers: {message: {regex: ".*without login.*"}}}'
    passes(tmp_path, f"""
        - open: {{}}
        - raw: {{data: "CONNECT\\n\\n\\0"}}
        - {answer}
        - open: {{conn: wrong}}
        - raw: {{conn: wrong, data: "CONNECT\\nlogin:u\\npasscode:x\\n\\n\\0"}}
        - expect_error_close: {{conn: wrong, headers: {{message: {{regex: ".*wrong passcode.*"}}}}}}
        - open: {{conn: right}}
        - raw: {{conn: right, data: "CONNECT\\nlogin:u\\npasscode:p\\n\\n\\0"}}
        - expect: {{conn: right, command: CONNECTED}}
    """, versions='"1.0"', run=USER, users=users, v10_anonymous=anonymous)
    passes(tmp_path, """
        - open: {}
        - raw: {data: "CONNECT\\naccept-version:${version}\\nhost:h\\n\\n\\0"}
        - expect_error_close: {headers: {message: {regex: ".*without login.*"}}}
    """, versions='"1.1", "1.2"', run=USER, users=users, v10_anonymous=anonymous)


@pytest.mark.parametrize(("nack", "then"), [
    ("redeliver", 'expect: {command: MESSAGE, headers: {redelivered: "true"}, body: m1}'),
    ("discard", "expect: {command: MESSAGE, body: m2}"),  # m1 is gone
])
def test_a_nacked_message_is_redelivered_or_discarded(tmp_path: Path, nack: str,
                                                       then: str) -> None:
    passes(tmp_path, f"""
        - connect: {{}}
        - send: {{command: SUBSCRIBE, headers: {{id: a, destination: "${{queue}}", ack: client-individual}}}}
        - send: {{command: SEND, headers: {{destination: "${{queue}}"}}, body: m1}}
        - expect: {{command: MESSAGE, body: m1, capture: {{first: ack}}}}
        - send: {{command: NACK, headers: {{id: "${{first}}"}}}}
        - send: {{command: SEND, headers: {{destination: "${{queue}}"}}, body: m2}}
        - {then}
    """, nack=nack)


def test_unknown_commands_get_error_or_are_ignored(tmp_path: Path) -> None:
    steps = """
        - connect: {}
        - raw: {data: "SNED\\ndestination:${queue}\\nreceipt:r\\n\\nhi\\0"}
        - %s
    """
    passes(tmp_path, steps % "expect_error_close: {headers: {message: {regex: \".*unknown command 'SNED'\"}}}")
    passes(tmp_path, steps % """expect_none: {within: 0.3}
        - send: {command: SEND, headers: {destination: "${queue}", receipt: alive}}
        - expect: {command: RECEIPT, headers: {receipt-id: alive}}""",
           unknown_command="ignore")


def test_minimal_connected_has_only_what_each_version_requires(tmp_path: Path) -> None:
    absent = "{absent: true}"
    passes(tmp_path, f"""
        - connect: {{expect: nothing}}
        - expect: {{command: CONNECTED, headers: {{version: {{present: true}}, heart-beat: "1000,1000", session: {absent}, server: {absent}}}}}
    """, versions='"1.1", "1.2"', minimal_connected=True)
    passes(tmp_path, f"""
        - connect: {{expect: nothing}}
        - expect: {{command: CONNECTED, headers: {{version: "1.2", heart-beat: {absent}, session: {absent}, server: {absent}}}}}
    """, minimal_connected=True, heartbeat=(0, 0))
    passes(tmp_path, f"""
        - connect: {{expect: nothing}}
        - expect: {{command: CONNECTED, headers: {{session: {{present: true}}, server: {absent}}}}}
    """, versions='"1.0"', minimal_connected=True)


def test_colon_ids_are_escaped_and_acknowledged() -> None:
    async def main(port: int, version: str) -> list[bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        connect = {"accept-version": version, "host": "h"} if version != "1.0" else {}
        ack = "client-individual" if version != "1.0" else "client"
        writer.write(encode(Frame("CONNECT", connect)) + encode(Frame(
            "SUBSCRIBE", {"id": "a", "destination": "/queue/colons", "ack": ack})) +
            encode(Frame("SEND", {"destination": "/queue/colons"}, b"m")))
        parser = Parser(version=version)  # type: ignore[arg-type]
        frames: list[Frame] = []
        seen = b""
        while len(frames) < 2:
            data = await asyncio.wait_for(reader.read(65536), 5)
            seen += data
            frames += [e for e in parser.feed(data) if isinstance(e, Frame)]
        message = frames[1]
        acked = {"1.2": {"id": message.get("ack") or ""},
                 "1.1": {"message-id": message.get("message-id") or "", "subscription": "a"},
                 "1.0": {"message-id": message.get("message-id") or ""}}[version]
        writer.write(encode(Frame("ACK", {**acked, "receipt": "r"}),
                            version=version))  # type: ignore[arg-type]
        while len(frames) < 3:
            data = await asyncio.wait_for(reader.read(65536), 5)
            frames += [e for e in parser.feed(data) if isinstance(e, Frame)]
        writer.close()
        return [seen, frames[2].command.encode()]

    with broker(colon_ids=True) as port:
        for version in ("1.0", "1.1", "1.2"):
            wire, answer = asyncio.run(main(port, version))
            assert answer == b"RECEIPT", version
            if version == "1.0":  # 1.0 has no escapes: the value is written as it is
                assert b"\nmessage-id:ID:reference:1:" in wire
            else:
                assert b"\nmessage-id:ID\\creference\\c1\\c" in wire, wire
            if version == "1.2":
                assert b"\nack:ID\\cs" in wire, wire


def test_server_headers_are_added_to_messages_unless_the_sender_gave_them(tmp_path: Path) -> None:
    passes(tmp_path, """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}"}}
        - send: {command: SEND, headers: {destination: "${queue}", priority: "9"}, body: m}
        - expect: {command: MESSAGE, headers: {priority: "9", expires: "0", timestamp: {regex: "[0-9]{13}"}}}
    """, server_headers=True)


def test_limits_are_set_by_name(tmp_path: Path) -> None:
    config = BrokerConfig().with_limits({"body": 100, "headers": 5, "subscriptions": 1,
                                         "pending": 1})
    assert (config.limits.max_body, config.limits.max_headers, config.max_subscriptions,
            config.max_pending) == (100, 5, 1, 1)
    for bad, words in (({"bodyy": 1}, "unknown limit 'bodyy'"), ({"body": 0}, "positive")):
        with pytest.raises(ValueError, match=words):
            BrokerConfig().with_limits(bad)
    passes(tmp_path, """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}", ack: client}}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: m1}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: m2}
        - expect: {command: MESSAGE, body: m1, capture: {first: ack}}
        - expect_none: {within: 0.3}
        - send: {command: ACK, headers: {id: "${first}"}}
        - expect: {command: MESSAGE, body: m2}
        - send: {command: SUBSCRIBE, headers: {id: b, destination: "${queue2}"}}
        - expect_error_close: {headers: {message: {regex: "more than 1 subscriptions"}}}
        - connect: {conn: big}
        - send: {conn: big, command: SEND, headers: {destination: "${queue}"}, body: "%s"}
        - expect_error_close: {conn: big}
    """ % ("b" * 101), limits=config.limits, max_subscriptions=1, max_pending=1)


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


# -- queues, topics, acks ------------------------------------------------------------------

def test_queue_round_robin_topic_fan_out_and_user_headers(tmp_path: Path) -> None:
    passes(tmp_path, """
        - connect: {}
        - connect: {conn: b}
        - send: {command: SUBSCRIBE, headers: {id: q, destination: "${queue}"}}
        - send: {conn: b, command: SUBSCRIBE, headers: {id: q, destination: "${queue}", receipt: s}}
        - expect: {conn: b, command: RECEIPT}
        - send: {command: SUBSCRIBE, headers: {id: t, destination: "${topic}"}}
        - send: {conn: b, command: SUBSCRIBE, headers: {id: t, destination: "${topic}", receipt: s2}}
        - expect: {conn: b, command: RECEIPT}
        - send: {command: SEND, headers: {destination: "${queue}", x-a: " padded ", "k:colon": "v\\\\n"}, body: one}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: two}
        - expect: {command: MESSAGE, headers: {subscription: q, x-a: " padded ", "k:colon": "v\\\\n", destination: "${queue}"}, body: one}
        - expect: {conn: b, command: MESSAGE, body: two}
        - send: {command: SEND, headers: {destination: "${topic}"}, body: all}
        - expect: {command: MESSAGE, headers: {subscription: t}, body: all}
        - expect: {conn: b, command: MESSAGE, headers: {subscription: t}, body: all}
    """)


def test_client_ack_is_cumulative_within_one_subscription(tmp_path: Path) -> None:
    passes(tmp_path, """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}", ack: client}}
        - send: {command: SUBSCRIBE, headers: {id: b, destination: "${queue2}", ack: client}}
        - send: {command: SEND, headers: {destination: "${queue2}"}, body: other}
        - expect: {command: MESSAGE, body: other}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: m1}
        - expect: {command: MESSAGE, body: m1}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: m2}
        - expect: {command: MESSAGE, body: m2, capture: {last: ack}}
        - send: {command: ACK, headers: {id: "${last}", receipt: r}}
        - expect: {command: RECEIPT}
        - close: {}
        - connect: {conn: again}
        - send: {conn: again, command: SUBSCRIBE, headers: {id: b, destination: "${queue2}"}}
        - expect: {conn: again, command: MESSAGE, headers: {redelivered: "true"}, body: other}
        - send: {conn: again, command: SUBSCRIBE, headers: {id: a, destination: "${queue}"}}
        - expect_none: {conn: again, within: 0.3}
    """)


def test_client_individual_ack_and_nack_redelivery(tmp_path: Path) -> None:
    passes(tmp_path, """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}", ack: client-individual}}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: m1}
        - expect: {command: MESSAGE, body: m1, capture: {first: ack}}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: m2}
        - expect: {command: MESSAGE, body: m2, capture: {second: ack}}
        - send: {command: ACK, headers: {id: "${second}"}}
        - send: {command: NACK, headers: {id: "${first}"}}
        - expect: {command: MESSAGE, headers: {redelivered: "true"}, body: m1, capture: {again: ack}}
        - send: {command: ACK, headers: {id: "${again}", receipt: r}}
        - expect: {command: RECEIPT}
        - send: {command: ACK, headers: {id: "${second}"}}
        - expect_error_close: {}
    """)


def test_ack_headers_of_1_1_and_1_0(tmp_path: Path) -> None:
    passes(tmp_path, """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}", ack: client}}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: m1}
        - expect: {command: MESSAGE, headers: {ack: {absent: true}}, capture: {mid: message-id}}
        - send: {command: ACK, headers: {message-id: "${mid}", subscription: a, receipt: r}}
        - expect: {command: RECEIPT}
    """, versions='"1.1"')
    passes(tmp_path, """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {destination: "${queue}", ack: client}}
        - send: {command: SEND, headers: {destination: "${queue}"}, body: m1}
        - expect: {command: MESSAGE, capture: {mid: message-id}}
        - send: {command: ACK, headers: {message-id: "${mid}", receipt: r}}
        - expect: {command: RECEIPT}
    """, versions='"1.0"')


# -- transactions ------------------------------------------------------------------------------

def test_transactions_commit_abort_and_implicit_abort(tmp_path: Path) -> None:
    passes(tmp_path, """
        - connect: {}
        - send: {command: SUBSCRIBE, headers: {id: a, destination: "${queue}", ack: client-individual}}
        - send: {command: BEGIN, headers: {transaction: t1}}
        - send: {command: SEND, headers: {destination: "${queue}", transaction: t1}, body: held}
        - expect_none: {within: 0.2}
        - send: {command: COMMIT, headers: {transaction: t1}}
        - expect: {command: MESSAGE, body: held, capture: {a1: ack}}
        - send: {command: BEGIN, headers: {transaction: t2}}
        - send: {command: SEND, headers: {destination: "${queue}", transaction: t2}, body: dropped}
        - send: {command: ACK, headers: {id: "${a1}", transaction: t2}}
        - send: {command: ABORT, headers: {transaction: t2, receipt: r}}
        - expect: {command: RECEIPT}
        - send: {command: BEGIN, headers: {transaction: t3}}
        - send: {command: SEND, headers: {destination: "${queue2}", transaction: t3}, body: never}
        - close: {}
        - connect: {conn: b}
        - send: {conn: b, command: SUBSCRIBE, headers: {id: a, destination: "${queue}"}}
        - expect: {conn: b, command: MESSAGE, headers: {redelivered: "true"}, body: held}
        - send: {conn: b, command: SUBSCRIBE, headers: {id: c, destination: "${queue2}"}}
        - expect_none: {conn: b, within: 0.3}
        - send: {conn: b, command: COMMIT, headers: {transaction: nope}}
        - expect_error_close: {conn: b, headers: {message: {regex: ".*unknown transaction.*"}}}
    """)


# -- errors and limits -----------------------------------------------------------------------

@pytest.mark.parametrize("bad", [
    "SEND\\ndestination:${queue}\\nk:\\\\t\\nreceipt:r\\n\\n\\0",       # undefined escape
    "SUBSCRIBE\\nid:1\\ndestination:${queue}\\nreceipt:r\\n\\nbody\\0",  # a body it must not have
    "FOO\\nreceipt:r\\n\\n\\0",                                        # unknown command
    "SEND\\nreceipt:r\\n\\n\\0",                                       # no destination
])
def test_every_error_is_error_then_close_with_receipt_id(tmp_path: Path, bad: str) -> None:
    passes(tmp_path, f"""
        - connect: {{}}
        - raw: {{data: "{bad}"}}
        - expect_error_close: {{headers: {{receipt-id: r, message: {{present: true}}}}}}
    """)


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
    switches = {f.name for f in dataclasses.fields(Faults)} - {"active"}
    assert switches == {name.replace("-", "_") for name in FAULTS}
    assert not Faults.of(()).active and not Faults().no_ack_header
    some = Faults.of(["no-ack-header", "no-1-0-fallback"])
    assert some.active and some.no_ack_header and some.no_1_0_fallback
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


# -- the protocol without I/O ----------------------------------------------------------------------

class Driver:
    """A connection's driver with no socket: always room, what is sent parsed back."""

    def __init__(self, store: Store, name: str, config: BrokerConfig | None = None,
                 faults: Faults | None = None) -> None:
        self.connection = BrokerProtocol(config or BrokerConfig(), faults or Faults(), store, self,
                                     name, clock=lambda: 1_700_000_000.25)
        self.parser = Parser()

    def has_room(self) -> bool:
        return not self.connection.closing

    def deliver(self, subscription: Subscription, message: Message) -> None:
        self.connection.deliver(subscription, message)

    def slow(self, subscription: Subscription) -> None:
        self.connection.slow(subscription)

    def feed(self, *frames: Frame) -> list[Frame]:
        """What the connection sends back for `frames` (and what it was given meanwhile)."""
        parsed = self.connection.receive_data(b"".join(encode(f) for f in frames))
        assert parsed
        return [e for e in self.parser.feed(self.connection.data_to_send())
                if isinstance(e, Frame)]


def test_the_protocol_runs_without_sockets_tasks_or_clock() -> None:
    store = Store(max_bytes=1 << 20)
    config = BrokerConfig(server_headers=True)
    alice, bob = Driver(store, "a1", config), Driver(store, "b1", config)
    connect = Frame("CONNECT", [("accept-version", "1.2"), ("host", "h"),
                                ("heart-beat", "500,2000")])
    (connected,) = alice.feed(connect)
    assert (connected.command, connected.get("session"), connected.get("heart-beat")) == \
        ("CONNECTED", "a1", "1000,1000")
    # the driver is told to send heart-beats every 2 s and to expect them every 1 s
    assert (alice.connection.beat, alice.connection.send_every,
            alice.connection.expect_every, alice.connection.heartbeat_deadline) == \
        (True, 2.0, 1.0, 2.0)
    replies = alice.feed(Frame("SUBSCRIBE", [("id", "s"), ("destination", "/queue/q"),
                                             ("ack", "client"), ("receipt", "r1")]))
    assert [(f.command, f.get("receipt-id")) for f in replies] == [("RECEIPT", "r1")]
    bob.feed(connect)
    assert bob.feed(Frame("SEND", [("destination", "/queue/q"), ("x", "y")], b"hi")) == []
    (message,) = [e for e in alice.parser.feed(alice.connection.data_to_send())
                  if isinstance(e, Frame)]
    assert (message.command, message.body, message.get("ack"), message.get("x"),
            message.get("timestamp")) == ("MESSAGE", b"hi", "a1-1", "y", "1700000000250")
    assert bob.feed(Frame("DISCONNECT", [("receipt", "bye")]))[0].get("receipt-id") == "bye"
    assert bob.connection.closing
    alice.connection.end()  # the unacknowledged message goes back to its queue
    assert [m.redelivered for m in store.destination("/queue/q").messages] == [True]


def test_the_protocol_reports_refused_input_and_reads_on_under_error_without_close() -> None:
    store = Store(max_bytes=1 << 20)
    config = BrokerConfig(limits=dataclasses.replace(BrokerConfig().limits, max_headers=2))
    strict = Driver(store, "x", config)
    crowded = encode(Frame("CONNECT", [("accept-version", "1.2"), ("host", "h"),
                                       ("a", "1"), ("b", "2")]))
    assert not strict.connection.receive_data(crowded)
    assert strict.connection.closing
    assert strict.connection.data_to_send().startswith(b"ERROR\nmessage:frame refused")
    lenient = Driver(store, "y", config, Faults(error_without_close=True))
    assert not lenient.connection.receive_data(crowded)
    assert not lenient.connection.closing  # a fresh parser reads on
    assert lenient.feed(Frame("CONNECT", [("accept-version", "1.2"), ("host", "h")]))[-1] \
        .command == "CONNECTED"

