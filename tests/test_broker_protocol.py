"""The reference broker's protocol rules in memory (broker/protocol.py): bytes in, actions
out, no socket, task or clock. Negotiation and CONNECT's refusals, virtual hosts and
logins, the choices the spec leaves to a server, queues and topics, ack modes and
redelivery, transactions, receipts, errors, and what the protocol answers with (Send,
Heartbeats, Close): the rules tests/test_broker.py once checked over TCP, which keeps what
needs the socket (I/O, timing, limits)."""

from __future__ import annotations

import dataclasses

import pytest
from helpers import bytewise

from conformance.broker import BrokerConfig
from conformance.broker.destinations import Message, Store, Subscription
from conformance.broker.faults import FAULTS, WEBSOCKET_FAULTS, Faults
from conformance.broker.protocol import Action, BrokerProtocol, Close, Heartbeats, Send
from conformance.codec import Frame, Parser, encode
from conformance.spec.grammar import Version

NOW = 1_700_000_000.25  # the clock the protocol reads for server headers


class Peer:
    """A client of one BrokerProtocol, and the Consumer of its subscriptions: what it sends
    goes in as bytes, what the protocol answers is carried out here (frames parsed back as
    a client reads them, the Close and the Heartbeats noted), and a Send after a Close is a
    failure."""

    def __init__(self, store: Store, name: str = "c", config: BrokerConfig | None = None,
                 faults: Faults | None = None) -> None:
        self.protocol = BrokerProtocol(config or BrokerConfig(), faults or Faults(), store,
                                       self, name, clock=lambda: NOW)
        self.parser = Parser(strict=False)
        self.received: list[Frame] = []
        self.wire = b""  # every octet sent to this peer
        self.closed = ""  # why the protocol closed the connection, once it has
        self.heartbeats: Heartbeats | None = None

    # -- the Consumer ---------------------------------------------------------------------------

    def has_room(self) -> bool:
        return not self.closed

    def deliver(self, subscription: Subscription, message: Message) -> None:
        self.carry(self.protocol.deliver(subscription, message))

    def slow(self, subscription: Subscription) -> None:
        self.carry(self.protocol.slow(subscription))

    # -- the client -----------------------------------------------------------------------------

    def carry(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                assert not self.closed, f"sent {action.frames!r} after closing"
                for data in action.frames:
                    self.wire += data
                    self.received += [e for e in self.parser.feed(data) if isinstance(e, Frame)]
            elif isinstance(action, Close):
                self.closed = action.why
            else:
                self.heartbeats = action

    def send(self, *frames: Frame | bytes, version: Version | None = None,
             chunks: int = 0) -> list[Frame]:
        """What the protocol sends back for `frames` (and delivers meanwhile), given to it
        at once, or `chunks` octets a time."""
        before = len(self.received)
        data = b"".join(f if isinstance(f, bytes) else
                        encode(f, version=version or self.parser.version) for f in frames)
        for piece in [data[i:i + chunks] for i in range(0, len(data), chunks)] if chunks \
                else [data]:
            self.carry(self.protocol.receive_data(piece))
        return self.received[before:]

    def connect(self, version: Version = "1.2", **headers: str) -> Frame:
        """CONNECT at `version` (the answer must be CONNECTED); later frames are read as
        that version's."""
        offer = {"accept-version": version, "host": "h"} if version != "1.0" else {}
        (connected,) = self.send(Frame("CONNECT", {**offer, **headers}), version="1.0")
        assert connected.command == "CONNECTED", connected
        self.parser.version = version
        return connected

    def error(self, *frames: Frame | bytes) -> Frame:
        """The ERROR the protocol answers `frames` with, having closed the connection."""
        answers = self.send(*frames)
        assert [f.command for f in answers][-1:] == ["ERROR"] and self.closed, answers
        return answers[-1]


def store(id_prefix: str = "m-") -> Store:
    return Store(max_bytes=1 << 20, id_prefix=id_prefix)


def frame(command: str, body: bytes = b"", **headers: str) -> Frame:
    return Frame(command, {k.replace("_", "-"): v for k, v in headers.items()}, body)


def subscribe(peer: Peer, sub: str, destination: str, ack: str = "auto") -> None:
    assert peer.send(frame("SUBSCRIBE", id=sub, destination=destination, ack=ack,
                           receipt=f"sub-{sub}"))[-1].get("receipt-id") == f"sub-{sub}"


def bodies(frames: list[Frame]) -> list[bytes]:
    return [f.body for f in frames if f.command == "MESSAGE"]


# -- the actions --------------------------------------------------------------------------------

def test_the_protocol_answers_with_actions_and_leaves_what_it_receives_as_it_came() -> None:
    shared, config = store(), BrokerConfig(server_headers=True)
    alice, bob = Peer(shared, "a1", config), Peer(shared, "b1", config)
    connected = alice.connect(**{"heart-beat": "500,2000"})
    assert (connected.get("session"), connected.get("heart-beat")) == ("a1", "1000,1000")
    # heart-beats every max(1000, 2000) ms; the client's every max(500, 1000) ms, counted
    # missed after the broker's tolerance of it
    assert alice.heartbeats == Heartbeats(2.0, 1.0 * BrokerConfig().heartbeat_tolerance)
    subscribe(alice, "s", "/queue/q", "client")
    bob.connect()
    send = frame("SEND", b"hi", destination="/queue/q", x="y", receipt="r")
    headers = send.headers
    assert [f.command for f in bob.send(send)] == ["RECEIPT"]
    assert send.headers is headers and send.get("receipt") == "r"  # the frame is unchanged
    (message,) = alice.received[-1:]
    assert (message.command, message.body, message.get("ack"), message.get("x"),
            message.get("timestamp")) == ("MESSAGE", b"hi", "a1-1", "y", "1700000000250")
    # DISCONNECT: the RECEIPT, then Close; nothing more is sent
    assert bob.send(frame("DISCONNECT", receipt="bye"))[0].get("receipt-id") == "bye"
    assert bob.closed == "DISCONNECT" and bob.protocol.closing
    assert bob.protocol.receive_data(encode(frame("SEND", destination="/queue/q"))) == []
    alice.protocol.end()  # the unacknowledged message goes back to its queue
    assert [m.redelivered for m in shared.destination("/queue/q").messages] == [True]


def test_frames_may_come_in_any_chunking_with_heart_beats_and_cr_lf_between() -> None:
    """One read holding several frames, a frame cut at every octet, EOLs between frames:
    the same answers."""
    wire = (b"CONNECT\r\naccept-version:1.2\r\nhost:h\r\n\r\n\x00\r\n\n"
            b"SUBSCRIBE\nid:s\ndestination:/queue/q\nreceipt:1\n\n\x00\n"
            b"SEND\r\ndestination:/queue/q\r\ncontent-length:3\r\n\r\na\x00b\x00\r\n"
            b"SEND\ndestination:/queue/q\nreceipt:2\n\n\xff\xfe\x00")
    answers = []
    for chunks in (0, 1, 7):
        peer = Peer(store())
        peer.send(wire, chunks=chunks)
        answers.append([(f.command, f.get("receipt-id"), f.body) for f in peer.received])
    assert answers[0] == answers[1] == answers[2] == [
        ("CONNECTED", None, b""), ("RECEIPT", "1", b""), ("MESSAGE", None, b"a\x00b"),
        ("MESSAGE", None, b"\xff\xfe"), ("RECEIPT", "2", b"")]


def test_refused_input_is_error_then_close_or_read_on_under_error_without_close() -> None:
    config = BrokerConfig(limits=dataclasses.replace(BrokerConfig().limits, max_headers=2))
    crowded = frame("CONNECT", accept_version="1.2", host="h", a="1", b="2")
    strict = Peer(store(), "x", config)
    assert strict.error(crowded).get("message", "").startswith("frame refused")
    assert strict.closed.startswith("frame refused")
    lenient = Peer(store(), "y", config, Faults(error_without_close=True))
    assert lenient.send(crowded)[-1].command == "ERROR" and not lenient.closed
    assert lenient.connect().command == "CONNECTED"  # a fresh parser reads on
    silent = Peer(store(), "z", config, Faults(limit_close_without_error=True))
    assert silent.send(crowded) == [] and silent.closed


def test_broken_connect_and_header_octets_are_refused_unless_a_fault_lets_them() -> None:
    """A malformed heart-beat is ERROR then close (closed silently under its fault); header
    octets that are not UTF-8 are ERROR then close (taken under invalid-utf8-accepted)."""
    beat = frame("CONNECT", accept_version="1.2", host="h", heart_beat="1,2,3")
    assert Peer(store()).error(beat).get("message", "").startswith("heart-beat")
    silent = Peer(store(), faults=Faults(bad_heart_beat_closed_silently=True))
    assert silent.send(beat) == [] and silent.closed.startswith("heart-beat")
    bad = b"SEND\ndestination:/queue/q\nreceipt:r\nx-bad:a\xed\xa0\x80\n\nhi\x00"
    strict = Peer(store())
    strict.connect()
    assert strict.error(bad).get("message", "").startswith("malformed frame")
    taking = Peer(store(), faults=Faults(invalid_utf8_accepted=True))
    taking.connect()
    assert [(f.command, f.get("receipt-id")) for f in taking.send(bad)] == [("RECEIPT", "r")]


def test_the_drivers_clock_gives_error_then_close() -> None:
    peer = Peer(store())
    peer.carry(peer.protocol.timed_out("no CONNECT frame in time"))
    assert peer.received[-1].get("message") == "no CONNECT frame in time"
    assert peer.closed == "no CONNECT frame in time"


def test_a_delivery_during_a_read_goes_out_in_its_turn() -> None:
    """A SEND to the connection's own subscription: the MESSAGE between the RECEIPT of the
    frame before and that of the SEND."""
    peer = Peer(store())
    peer.connect()
    peer.send(frame("SUBSCRIBE", id="s", destination="/queue/self"))
    answers = peer.send(frame("BEGIN", transaction="t", receipt="1"),
                        frame("SEND", b"m", destination="/queue/self", receipt="2"))
    assert [(f.command, f.get("receipt-id")) for f in answers] == [
        ("RECEIPT", "1"), ("MESSAGE", None), ("RECEIPT", "2")]


def test_a_topic_subscriber_without_room_is_closed_as_slow() -> None:
    shared = store()
    slow, sender = Peer(shared, "s", BrokerConfig(max_pending=1)), Peer(shared, "p")
    slow.connect()
    sender.connect()
    subscribe(slow, "t", "/topic/t", "client")
    sender.send(frame("SEND", b"1", destination="/topic/t"),
                frame("SEND", b"2", destination="/topic/t"))
    assert bodies(slow.received) == [b"1"]
    assert slow.received[-1].command == "ERROR" and slow.closed == "slow consumer"


# -- negotiation and CONNECT -------------------------------------------------------------------

@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_each_version_is_negotiated(version: Version) -> None:
    peer = Peer(store())
    connected = peer.connect(version)
    assert connected.get("version") == (None if version == "1.0" else version)
    assert peer.send(frame("DISCONNECT", receipt="d"))[0].get("receipt-id") == "d"
    assert peer.closed


def test_the_highest_common_version_or_error_naming_the_broker_s() -> None:
    peer = Peer(store())
    (connected,) = peer.send(frame("CONNECT", accept_version="1.0,1.1,2.0", host="h"))
    assert connected.get("version") == "1.1"
    assert connected.get("heart-beat") and connected.get("session")
    assert (connected.get("server") or "").startswith("stomp-conformance/")
    error = Peer(store()).error(frame("CONNECT", accept_version="2.0,3.1", host="h"))
    assert error.get("version") == "1.0,1.1,1.2"
    assert Peer(store()).send(frame("STOMP", accept_version="1.2", host="h"))[0].command \
        == "CONNECTED"


@pytest.mark.parametrize(("headers", "config", "words"), [
    ({"accept-version": "1.2"}, {}, "host header"),
    ({"accept-version": "1.2", "host": "h", "login": "a", "passcode": "wrong"},
     {"users": {"a": "b"}}, "access refused"),
    ({"accept-version": "1.2", "host": "nowhere"}, {"vhosts": ("vh",)},
     "unknown virtual host 'nowhere': this broker serves vh"),
    ({"accept-version": "1.2", "host": "h"}, {"users": {"a": "b"}, "v10_anonymous": True},
     "CONNECT without login"),
    ({"accept-version": "1.2", "host": "h", "heart-beat": "x,1"}, {}, "heart-beat"),
])
def test_connect_refused(headers: dict[str, str], config: dict[str, object],
                         words: str) -> None:
    peer = Peer(store(), config=BrokerConfig(**config))  # type: ignore[arg-type]
    assert words in (peer.error(Frame("CONNECT", headers)).get("message") or "")


def test_frames_before_connect_and_a_second_connect_are_errors() -> None:
    early = Peer(store())
    assert early.error(frame("SEND", destination="/queue/q", receipt="r")) \
        .get("receipt-id") == "r"
    twice = Peer(store())
    twice.connect()
    assert "second CONNECT" in (twice.error(frame("CONNECT", accept_version="1.2",
                                                  host="h")).get("message") or "")


def test_virtual_hosts_the_first_is_the_default() -> None:
    vhosts = BrokerConfig(vhosts=("/prod", "/test"))
    # 1.0 has no host header: a 1.0 CONNECT without one is served as the default host
    assert Peer(store(), config=vhosts).send(b"CONNECT\n\n\x00")[0].command == "CONNECTED"
    for version in ("1.0", "1.2"):
        Peer(store(), config=vhosts).connect(version, host="/test")  # type: ignore[arg-type]
        refused = Peer(store(), config=vhosts).error(frame(
            "CONNECT", accept_version=version, host="nowhere"))
        assert (refused.get("message") or "").endswith("'nowhere': this broker serves "
                                                       "/prod, /test")
        Peer(store(), config=BrokerConfig(vhosts=("/prod",), unknown_vhost="default")) \
            .connect(version, host="nowhere")  # type: ignore[arg-type]


@pytest.mark.parametrize("anonymous", [False, True])
def test_a_1_0_connect_without_login_is_refused_unless_anonymous_1_0_is_on(
        anonymous: bool) -> None:
    config = BrokerConfig(users={"u": "p"}, v10_anonymous=anonymous)
    answer = Peer(store(), config=config).send(b"CONNECT\n\n\x00")[0]
    assert answer.command == ("CONNECTED" if anonymous else "ERROR")
    wrong = Peer(store(), config=config).error(frame("CONNECT", login="u", passcode="x"))
    assert "wrong passcode" in (wrong.get("message") or "")
    Peer(store(), config=config).connect("1.0", login="u", passcode="p")
    later = Peer(store(), config=config).error(frame("CONNECT", accept_version="1.2",
                                                     host="h"))
    assert "without login" in (later.get("message") or "")


def test_minimal_connected_has_only_what_each_version_requires() -> None:
    def connected(version: Version, **config: object) -> dict[str, str]:
        peer = Peer(store(), config=BrokerConfig(minimal_connected=True,
                                                 **config))  # type: ignore[arg-type]
        return peer.connect(version).header_map

    for version in ("1.1", "1.2"):
        assert connected(version) == {"version": version, "heart-beat": "1000,1000"}
    assert connected("1.2", heartbeat=(0, 0)) == {"version": "1.2"}
    assert set(connected("1.0")) == {"session"}


# -- the choices the spec leaves to a server ---------------------------------------------------

@pytest.mark.parametrize("nack", ["redeliver", "discard"])
def test_a_nacked_message_is_redelivered_or_discarded(nack: str) -> None:
    shared = store()
    peer = Peer(shared, config=BrokerConfig(nack=nack))
    peer.connect()
    subscribe(peer, "a", "/queue/q", "client-individual")
    (first,) = peer.send(frame("SEND", b"m1", destination="/queue/q"))
    again = peer.send(frame("NACK", id=first.get("ack") or ""))
    assert [(m.body, m.get("redelivered")) for m in again] == \
        ([(b"m1", "true")] if nack == "redeliver" else [])
    assert bodies(peer.send(frame("SEND", b"m2", destination="/queue/q"))) == [b"m2"]


def test_unknown_commands_get_error_or_are_ignored() -> None:
    wire = b"SNED\ndestination:/queue/q\nreceipt:r\n\nhi\x00"
    strict = Peer(store())
    strict.connect()
    assert (strict.error(wire).get("message") or "").endswith("unknown command 'SNED'")
    lenient = Peer(store(), config=BrokerConfig(unknown_command="ignore"))
    lenient.connect()
    assert lenient.send(wire) == [] and not lenient.closed
    assert lenient.send(frame("SEND", destination="/queue/q", receipt="alive"))[0] \
        .get("receipt-id") == "alive"


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_colon_ids_are_escaped_and_acknowledged(version: Version) -> None:
    # as the broker's store names messages with colon ids: ID:reference:1:N
    peer = Peer(store("ID:reference:1:"), "reference", BrokerConfig(colon_ids=True))
    peer.connect(version)
    peer.send(frame("SUBSCRIBE", id="a", destination="/queue/colons",
                    ack="client" if version == "1.0" else "client-individual"))
    (message,) = peer.send(frame("SEND", b"m", destination="/queue/colons"))
    if version == "1.0":  # 1.0 has no escapes: the value is written as it is
        assert b"\nmessage-id:ID:reference:1:" in peer.wire
    else:
        assert b"\nmessage-id:ID\\creference\\c1\\c" in peer.wire, peer.wire
    if version == "1.2":
        assert b"\nack:ID\\cs" not in peer.wire and b"\nack:ID\\creference\\c1" in peer.wire
    acked = {"1.2": {"id": message.get("ack") or ""},
             "1.1": {"message-id": message.get("message-id") or "", "subscription": "a"},
             "1.0": {"message-id": message.get("message-id") or ""}}[version]
    assert peer.send(Frame("ACK", {**acked, "receipt": "r"}))[0].command == "RECEIPT"


def test_server_headers_are_added_to_messages_unless_the_sender_gave_them() -> None:
    peer = Peer(store(), config=BrokerConfig(server_headers=True))
    peer.connect()
    subscribe(peer, "a", "/queue/q")
    (message,) = peer.send(frame("SEND", b"m", destination="/queue/q", priority="9"))
    assert (message.get("priority"), message.get("expires"), message.get("timestamp")) == \
        ("9", "0", "1700000000250")


def test_limits_hold_back_messages_and_refuse_subscriptions_and_bodies() -> None:
    config = BrokerConfig().with_limits({"body": 100, "subscriptions": 1, "pending": 1})
    peer = Peer(store(), config=config)
    peer.connect()
    subscribe(peer, "a", "/queue/q", "client")
    (first,) = peer.send(frame("SEND", b"m1", destination="/queue/q"),
                         frame("SEND", b"m2", destination="/queue/q"))
    assert first.body == b"m1"  # one unacknowledged message at most
    assert bodies(peer.send(frame("ACK", id=first.get("ack") or ""))) == [b"m2"]
    assert "more than 1 subscriptions" in (peer.error(frame(
        "SUBSCRIBE", id="b", destination="/queue/other")).get("message") or "")
    big = Peer(store(), config=config)
    big.connect()
    big.error(frame("SEND", b"b" * 101, destination="/queue/q"))


# -- queues, topics, acks ------------------------------------------------------------------------

def test_queue_round_robin_topic_fan_out_and_user_headers() -> None:
    shared = store()
    a, b = Peer(shared, "a"), Peer(shared, "b")
    for peer in (a, b):
        peer.connect()
        subscribe(peer, "q", "/queue/q")
        subscribe(peer, "t", "/topic/t")
    a.send(frame("SEND", b"one", destination="/queue/q", x_a=" padded ", receipt="r"),
           Frame("SEND", [("destination", "/queue/q"), ("k:colon", "v\\n")], b"two"))
    (one,), (two,) = [m for m in a.received if m.command == "MESSAGE"], b.received[-1:]
    assert (one.body, one.get("subscription"), one.get("x-a"), one.get("destination")) == \
        (b"one", "q", " padded ", "/queue/q")
    assert "receipt" not in one  # the broker's business, not the message's
    assert (two.body, two.get("k:colon")) == (b"two", "v\\n")
    a.send(frame("SEND", b"all", destination="/topic/t"))
    for peer in (a, b):
        assert (peer.received[-1].body, peer.received[-1].get("subscription")) == (b"all", "t")


def test_client_ack_is_cumulative_within_one_subscription() -> None:
    shared = store()
    peer = Peer(shared)
    peer.connect()
    subscribe(peer, "a", "/queue/q", "client")
    subscribe(peer, "b", "/queue/q2", "client")
    peer.send(frame("SEND", b"other", destination="/queue/q2"))
    peer.send(frame("SEND", b"m1", destination="/queue/q"))
    (last,) = peer.send(frame("SEND", b"m2", destination="/queue/q"))
    assert peer.send(frame("ACK", id=last.get("ack") or "", receipt="r"))[0].command == \
        "RECEIPT"
    peer.protocol.end()
    again = Peer(shared, "again")
    again.connect()
    subscribe(again, "b", "/queue/q2")
    assert [(m.body, m.get("redelivered")) for m in again.received if m.command == "MESSAGE"] \
        == [(b"other", "true")]
    subscribe(again, "a", "/queue/q")  # m1 and m2 were both acknowledged
    assert bodies(again.received) == [b"other"]


def test_client_individual_ack_and_nack_redelivery() -> None:
    peer = Peer(store())
    peer.connect()
    subscribe(peer, "a", "/queue/q", "client-individual")
    (first,) = peer.send(frame("SEND", b"m1", destination="/queue/q"))
    (second,) = peer.send(frame("SEND", b"m2", destination="/queue/q"))
    peer.send(frame("ACK", id=second.get("ack") or ""))
    (again,) = peer.send(frame("NACK", id=first.get("ack") or ""))
    assert (again.body, again.get("redelivered")) == (b"m1", "true")
    assert peer.send(frame("ACK", id=again.get("ack") or "", receipt="r"))[0].command == \
        "RECEIPT"
    peer.error(frame("ACK", id=second.get("ack") or ""))  # already acknowledged


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_ack_headers_of_1_1_and_1_0(version: Version) -> None:
    peer = Peer(store())
    peer.connect(version)
    sub = {"1.1": {"id": "a"}, "1.0": {}}[version]
    peer.send(Frame("SUBSCRIBE", {**sub, "destination": "/queue/q", "ack": "client"}))
    (message,) = peer.send(frame("SEND", b"m1", destination="/queue/q"))
    assert "ack" not in message
    ack = {"message-id": message.get("message-id") or "", "receipt": "r",
           **({"subscription": "a"} if version == "1.1" else {})}
    assert peer.send(Frame("ACK", ack))[0].command == "RECEIPT"


# -- transactions --------------------------------------------------------------------------------

def test_transactions_commit_abort_and_implicit_abort() -> None:
    shared = store()
    peer = Peer(shared)
    peer.connect()
    subscribe(peer, "a", "/queue/q", "client-individual")
    assert peer.send(frame("BEGIN", transaction="t1"),
                     frame("SEND", b"held", destination="/queue/q", transaction="t1")) == []
    (held,) = peer.send(frame("COMMIT", transaction="t1"))
    assert held.body == b"held" and "transaction" not in held
    answers = peer.send(frame("BEGIN", transaction="t2"),
                        frame("SEND", b"dropped", destination="/queue/q", transaction="t2"),
                        frame("ACK", id=held.get("ack") or "", transaction="t2"),
                        frame("ABORT", transaction="t2", receipt="r"))
    assert [f.command for f in answers] == ["RECEIPT"]
    peer.send(frame("BEGIN", transaction="t3"),
              frame("SEND", b"never", destination="/queue/q2", transaction="t3"))
    peer.protocol.end()
    other = Peer(shared, "b")
    other.connect()
    subscribe(other, "a", "/queue/q")  # the ACK was aborted: held comes again
    assert [(m.body, m.get("redelivered")) for m in other.received if m.command == "MESSAGE"] \
        == [(b"held", "true")]
    subscribe(other, "c", "/queue/q2")  # t3 was aborted when its connection ended
    assert other.received[-1].command == "RECEIPT"
    assert "unknown transaction" in (other.error(frame("COMMIT", transaction="nope"))
                                     .get("message") or "")
    assert (list(shared.destinations), shared.held) == (["/queue/q", "/queue/q2"], 0)


# -- errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [
    b"SEND\ndestination:/queue/q\nk:\\t\nreceipt:r\n\n\x00",       # undefined escape
    b"SUBSCRIBE\nid:1\ndestination:/queue/q\nreceipt:r\n\nbody\x00",  # a body it must not have
    b"FOO\nreceipt:r\n\n\x00",                                       # unknown command
    b"SEND\nreceipt:r\n\n\x00",                                      # no destination
])
def test_every_error_is_error_then_close_with_receipt_id(bad: bytes) -> None:
    for chunks in (0, 1):
        peer = Peer(store())
        peer.connect()
        error = peer.error(*bytewise(bad)) if chunks else peer.error(bad)
        assert error.get("receipt-id") == "r" and error.get("message")


def test_a_destination_is_dropped_once_it_holds_nothing() -> None:
    shared = store()
    peer = Peer(shared)
    peer.connect()
    for n in range(20):
        peer.send(frame("SEND", destination=f"/topic/t{n}"),
                  frame("SUBSCRIBE", id=f"s{n}", destination=f"/queue/q{n}"),
                  frame("UNSUBSCRIBE", id=f"s{n}"))
    assert list(shared.destinations) == []
    subscribe(peer, "a", "/queue/q", "client")
    peer.send(frame("BEGIN", transaction="t"),
              frame("SEND", b"held", destination="/queue/q", transaction="t"))
    (held,) = peer.send(frame("COMMIT", transaction="t"))
    peer.send(frame("ACK", id=held.get("ack") or ""),
              frame("BEGIN", transaction="never"),
              frame("SEND", b"dropped", destination="/queue/q2", transaction="never"))
    assert shared.held > 0
    peer.protocol.end()
    assert (list(shared.destinations), shared.held) == ([], 0)


#: the faults that change what the exchange below delivers: the MESSAGE frame's own
#: faults, those that read SEND otherwise, those that negotiate another version, and those
#: that answer the CONNECT otherwise (a frame after CONNECTED, a 1.0 CONNECT refused)
BENDS_THE_EXCHANGE = {
    "no-ack-header", "no-message-id", "no-subscription-header", "no-destination-header",
    "drop-user-headers", "no-escaping", "escape-v10", "no-content-length",
    "trim-headers", "last-header-wins", "no-unescaping", "ignore-content-length",
    "ignore-accept-version", "no-1-0-fallback", "unsolicited-server-frame",
    "v10-connect-needs-host", "body-eols-trimmed", "body-as-text",
    "content-length-counts-characters", "content-type-not-mime", "no-content-type"}


@pytest.mark.parametrize("version", ["1.0", "1.2"])
def test_a_fault_switch_changes_only_the_behaviour_its_statement_names(version: Version) -> None:
    """Every other fault leaves a MESSAGE's octets as they are without faults, the 1.0
    subscriber's header that 1.0 cannot carry (a line break) left out as before."""
    def delivered(faults: Faults) -> bytes:
        shared = store()
        sub, pub = Peer(shared, "s", faults=faults), Peer(shared, "p", faults=faults)
        sub.connect(version)
        sub.send(frame("SUBSCRIBE", id="s1", destination="/queue/q", ack="client"))
        pub.connect()
        pub.send(Frame("SEND", [("destination", "/queue/q"), ("x-note", "two\nlines"),
                                ("x-k", " v "), ("x-k", "second")], b"a\0b\r\n"))
        return sub.wire[sub.wire.index(b"MESSAGE"):]

    clean = delivered(Faults())
    assert (b"x-note" in clean) == (version != "1.0") and b"x-k: v \n" in clean
    bent = [name for name in sorted(set(FAULTS) - WEBSOCKET_FAULTS - BENDS_THE_EXCHANGE)
            if delivered(Faults.of([name])) != clean]
    assert not bent, f"faults that change a MESSAGE their statement says nothing of: {bent}"


def test_a_topic_only_fault_bends_topic_messages_alone() -> None:
    """topic-message-without-subscription: a MESSAGE from a topic lacks its subscription
    header, one from a queue keeps its octets as without faults."""
    def delivered(destination: str, faults: Faults) -> Frame:
        shared = store()
        sub, pub = Peer(shared, "s", faults=faults), Peer(shared, "p", faults=faults)
        sub.connect("1.2")
        sub.send(frame("SUBSCRIBE", id="s1", destination=destination, ack="client"))
        pub.connect()
        pub.send(frame("SEND", destination=destination))
        return next(f for f in sub.received if f.command == "MESSAGE")

    fault = Faults.of(["topic-message-without-subscription"])
    assert delivered("/queue/q", fault) == delivered("/queue/q", Faults())
    assert delivered("/topic/t", Faults()).get("subscription") == "s1"
    bent = delivered("/topic/t", fault)
    assert bent.get("subscription") is None and bent.get("ack") is not None
