"""The state machine of the stateful fuzzer: STOMP sessions on two connection slots and
two queues (connect, subscribe in each ack mode, send, ack, nack, begin, commit, abort,
unsubscribe, disconnect, reconnect, and frames the broker must refuse), every frame the
broker sends checked against the delivery model (conformance/spec/session.py).

Every frame asks for a RECEIPT, so each step ends at a definite point; then the machine
waits `settle` seconds for deliveries the model forbids and up to `within` seconds for the
ones it requires. At the end of a session every slot is closed and a fresh connection
subscribes to both queues: what the model says is waiting must arrive, nothing else may.

As it goes the machine writes the session as a case of the catalogue's format: its frames
as `send` steps, each frame the broker sent that the model allowed as an `expect` step (ack
ids captured into variables); when the broker breaks the model, the expectation it broke
ends the case, which a Violation carries.

This module holds the rules and the steps they take; checking.py the frames on the wire,
the answers judged and the case written; harness.py what a run's sessions share (the
options, the event loop in a thread of its own the connections live on)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from conformance.codec import Frame, encode
from conformance.fuzz.stateful.checking import Checking, _Wire
from conformance.fuzz.stateful.harness import Runner
from conformance.spec.session import MODES, Message, Problem
from conformance.wire.connection import Closed, Connection, brief
from conformance.wire.handshake import connect_frame
from conformance.wire.stream import TransportError

T = TypeVar("T")
SLOTS = ("a", "b")
QUEUES = ("${queue}", "${queue2}")
DRAIN = "drain"


def _pick(candidates: list[T], pick: int) -> T:
    return candidates[pick % len(candidates)]


class SessionMachine(Checking):
    """STOMP sessions on two connection slots, checked against the delivery model."""

    def __init__(self, runner: Runner) -> None:
        super().__init__(runner)
        self.opened = dict.fromkeys(SLOTS, 0)

    # -- candidates (preconditions and picks) ------------------------------------------------

    def _free(self) -> list[str]:
        return [s for s in SLOTS if s not in self.wires]

    def _live(self) -> list[str]:
        return [s for s in SLOTS if s in self.wires]

    def _subscribable(self) -> list[str]:
        return [s for s in self._live() if len(self.model.sessions[s].subs) < 3]

    def _subscriptions(self) -> list[tuple[str, str]]:
        return [(s, sub.id) for s in self._live() for sub in self.model.sessions[s].subs.values()
                if not sub.closing]

    def _ackable(self) -> list[tuple[str, Message]]:
        return [(s, m) for s in self._live() for m in self.model.ackable(s)
                if self._ids(s, m) is not None]

    def _beginnable(self) -> list[str]:
        return [s for s in self._live() if len(self.model.sessions[s].txs) < 2]

    def _transactions(self) -> list[tuple[str, str]]:
        return [(s, tx) for s in self._live() for tx in self.model.sessions[s].txs]

    def _foreign(self) -> list[tuple[str, Message]]:
        return [(s, m) for s in self._live() for o in self._live() if o != s
                for m in self.model.ackable(o) if (m.ack or m.message_id) is not None]

    # -- rules ---------------------------------------------------------------------------------

    @initialize(version=st.sampled_from(("1.2", "1.1")))
    def start(self, version: str) -> None:
        """Every session starts connected on slot a (rules are switched off at random per
        session, swarm fashion: a session must not depend on `connect` to do anything)."""
        self._step(lambda: self._connect(SLOTS[0], version))

    @precondition(lambda self: self._free())
    @rule(pick=st.integers(0, 1), version=st.sampled_from(("1.2", "1.1")),
          early=st.sampled_from((False,) * 5 + (True,)), queue=st.integers(0, 1))
    def connect(self, pick: int, version: str, early: bool, queue: int) -> None:
        """CONNECT; now and then a SEND before CONNECT instead (rare: it ends there)."""
        slot = _pick(self._free(), pick)
        if early and self.options.refusals:
            self._step(lambda: self._before_connect(slot, queue))
        else:
            self._step(lambda: self._connect(slot, version))

    @precondition(lambda self: self._subscribable())
    @rule(pick=st.integers(0, 1), queue=st.integers(0, 1), mode=st.sampled_from(MODES + MODES[1:]))
    def subscribe(self, pick: int, queue: int, mode: str) -> None:
        self._step(lambda: self._subscribe(_pick(self._subscribable(), pick), queue, mode))

    @precondition(lambda self: self._subscriptions())
    @rule(pick=st.integers(0, 5))
    def unsubscribe(self, pick: int) -> None:
        self._step(lambda: self._unsubscribe(*_pick(self._subscriptions(), pick)))

    @precondition(lambda self: self._live())
    @rule(pick=st.integers(0, 1), queue=st.integers(0, 1), tx=st.none() | st.integers(0, 1))
    def send(self, pick: int, queue: int, tx: int | None) -> None:
        self._step(lambda: self._send(_pick(self._live(), pick), queue, tx))

    @precondition(lambda self: self._ackable())
    @rule(pick=st.integers(0, 7), tx=st.none() | st.integers(0, 1),
          what=st.sampled_from(("ACK",) * 4 + ("NACK",) * 2 + ("foreign", "unknown")))
    def ack(self, pick: int, tx: int | None, what: str) -> None:
        """ACK or NACK a message this connection holds (in a transaction or not); now and
        then (rare: a broker may end the connection for it) an ACK of another connection's
        id, or of an id never sent."""
        own, foreign = self._ackable(), self._foreign()
        if not self.options.refusals and what in ("unknown", "foreign"):
            what = "ACK"
        if what == "foreign" and foreign:
            self._step(lambda: self._ack_other(*_pick(foreign, pick)))
        elif what in ("unknown", "foreign"):
            self._step(lambda: self._ack_other(_pick(own, pick)[0], None))
        else:
            self._step(lambda: self._ack(*_pick(own, pick), tx, nack=what == "NACK"))

    @precondition(lambda self: self._ackable())
    @rule(pick=st.integers(0, 7))
    def ack_plain(self, pick: int) -> None:
        """A plain ACK: the same as `ack`, and a rule of its own so that a session with
        messages in flight seldom goes without ACKs."""
        self._step(lambda: self._ack(*_pick(self._ackable(), pick), None, nack=False))

    @precondition(lambda self: self._live())
    @rule(pick=st.integers(0, 1), queue=st.integers(0, 1))
    def publish(self, pick: int, queue: int) -> None:
        """A SEND outside transactions: the same as `send`, and a rule of its own so that a
        session seldom goes without SENDs."""
        self._step(lambda: self._send(_pick(self._live(), pick), queue, None))

    @precondition(lambda self: self._live())
    @rule(pick=st.integers(0, 3), what=st.sampled_from(("BEGIN", "COMMIT", "ABORT")))
    def transaction(self, pick: int, what: str) -> None:
        """BEGIN (when the slot has no open transaction, or asked), COMMIT or ABORT."""
        open_ = self._transactions()
        if what == "BEGIN" and self._beginnable() or not open_:
            self._step(lambda: self._begin(_pick(self._beginnable(), pick)))
        else:
            self._step(lambda: self._finish(*_pick(open_, pick), commit=what == "COMMIT"))

    @precondition(lambda self: self._live())
    @rule(pick=st.integers(0, 1), how=st.sampled_from(("DISCONNECT", "close", "abort")))
    def disconnect(self, pick: int, how: str) -> None:
        self._step(lambda: self._disconnect(_pick(self._live(), pick), how))

    def teardown(self) -> None:
        try:
            if not self.failed and not self.runner.spent():
                self._step(self._final, steps=0)
        finally:
            with contextlib.suppress(Exception):
                self.runner.loop.call(self._close_all(), 30)

    # -- connections -------------------------------------------------------------------------

    async def _open(self, slot: str) -> tuple[str, Connection] | None:
        self.opened[slot] = self.opened.get(slot, 0) + 1
        name = f"{slot}{self.opened[slot]}" if slot != DRAIN else DRAIN
        target = self.runner.target
        try:
            transport = await target.open(timeout=self.options.within * 2)
        except TransportError as error:
            self._problem(Problem("unreachable", ("connecting.connected-response",),
                                  f"a new connection failed: {error}", slot))
            return None
        return name, Connection(name, transport, self.transcript, self._clock)

    async def _connect(self, slot: str, version: str) -> None:
        opened = await self._open(slot)
        if opened is None:
            return
        name, conn = opened
        self._note("connect", conn=name, headers={"accept-version": version,
                                                  "heart-beat": "0,0"})
        conn.offered = [version]
        await conn.send(connect_frame(self.runner.target, version))
        event = await conn.next_event(self.options.within)
        if not isinstance(event, Frame) or event.command != "CONNECTED":
            self._problem(Problem("connect-refused", ("connecting.connected-response",),
                                  f"CONNECT answered with {brief(event)}", slot))
            await conn.close(abort=True)
            return
        wire = _Wire(conn, name, version)
        self._judge(slot, wire, event)
        chosen = event.get("version") or "1.0"
        conn.set_version(chosen if chosen in ("1.0", "1.1", "1.2") else version)
        self.wires[slot] = wire
        self.versions[slot] = version
        self.model.connect(slot, version)

    # -- the steps -----------------------------------------------------------------------------

    async def _subscribe(self, slot: str, queue: int, mode: str) -> None:
        sub = f"s{next(self.numbers)}"
        self.model.subscribe(slot, sub, queue, mode)
        self.wires[slot].conn.ack_modes[sub] = mode
        await self._frame(slot, "SUBSCRIBE", [("id", sub), ("destination", self.queues[queue]),
                                              ("ack", mode)],
                          {"id": sub, "destination": QUEUES[queue], "ack": mode})

    async def _unsubscribe(self, slot: str, sub: str) -> None:
        self.model.unsubscribe(slot, sub)
        if await self._frame(slot, "UNSUBSCRIBE", [("id", sub)], {"id": sub}):
            self.model.unsubscribed(slot, sub)

    async def _send(self, slot: str, queue: int, tx_pick: int | None) -> None:
        txs = sorted(self.model.sessions[slot].txs)
        tx = _pick(txs, tx_pick) if tx_pick is not None and txs else None
        body = f"m{next(self.numbers)}"
        self.model.send(slot, body, queue, tx)
        headers = [("destination", self.queues[queue])]
        shown = {"destination": QUEUES[queue]}
        if tx is not None:
            headers.append(("transaction", tx))
            shown["transaction"] = tx
        await self._frame(slot, "SEND", headers, shown, body)

    def _ids(self, slot: str, message: Message) -> tuple[list[tuple[str, str]],
                                                         dict[str, str]] | None:
        """The headers that name `message` in an ACK or NACK on `slot`, as sent and as
        shown in the case."""
        if message.var is None or message.holder is None:
            return None
        if self.wires[slot].version == "1.2":
            value = message.ack or message.message_id
            return None if value is None else ([("id", value)], {"id": f"${{{message.var}}}"})
        value = message.message_id or message.ack
        sub = message.holder.sub
        return None if value is None else (
            [("message-id", value), ("subscription", sub)],
            {"message-id": f"${{{message.var}}}", "subscription": sub})

    async def _ack(self, slot: str, message: Message, tx_pick: int | None, *,
                   nack: bool) -> None:
        ids = self._ids(slot, message)
        assert ids is not None
        headers, shown = ids
        txs = sorted(self.model.sessions[slot].txs)
        tx = _pick(txs, tx_pick) if tx_pick is not None and txs else None
        if tx is not None:
            headers = [*headers, ("transaction", tx)]
            shown = {**shown, "transaction": tx}
        explain = self.model.explain_refusal(slot, message, nack=nack)
        self.model.ack(slot, message.body, tx, nack=nack)
        await self._frame(slot, "NACK" if nack else "ACK", headers, shown, explain=explain)

    async def _ack_other(self, slot: str, message: Message | None) -> None:
        """An ACK of an id this connection never received: another connection's (foreign)
        or none at all (unknown). The broker may refuse it (ERROR then close) or ignore it;
        it must not settle anything."""
        version = self.wires[slot].version
        value = "no-such-id" if message is None else (message.ack or message.message_id or "")
        shown = value if message is None else f"${{{message.var}}}"
        if version == "1.2":
            headers, view = [("id", value)], {"id": shown}
        else:
            subs = sorted(self.model.sessions[slot].subs)
            sub = message.holder.sub if message is not None and message.holder else \
                (subs[0] if subs else "s0")
            headers = [("message-id", value), ("subscription", sub)]
            view = {"message-id": shown, "subscription": sub}
        await self._frame(slot, "ACK", headers, view, refusable=True)

    async def _begin(self, slot: str) -> None:
        tx = f"t{next(self.numbers)}"
        self.model.begin(slot, tx)
        await self._frame(slot, "BEGIN", [("transaction", tx)], {"transaction": tx})

    async def _finish(self, slot: str, tx: str, *, commit: bool) -> None:
        if commit:
            self.model.commit(slot, tx)
        else:
            self.model.abort(slot, tx)
        await self._frame(slot, "COMMIT" if commit else "ABORT", [("transaction", tx)],
                          {"transaction": tx})

    async def _disconnect(self, slot: str, how: str) -> None:
        wire = self.wires[slot]
        if how == "DISCONNECT":
            if not await self._frame(slot, "DISCONNECT", [], {}):
                return
            self._note("close", conn=wire.name)
        else:
            self._note("close", **({"conn": wire.name, "abort": True} if how == "abort"
                                   else {"conn": wire.name}))
        self.wires.pop(slot)
        await wire.conn.close(abort=how == "abort")
        self.model.end(slot)

    async def _before_connect(self, slot: str, queue: int) -> None:
        """A SEND before CONNECT: refused (ERROR then close, or a close) or ignored, never
        taken: its message must never be delivered."""
        opened = await self._open(slot)
        if opened is None:
            return
        name, conn = opened
        body = f"m{next(self.numbers)}"
        receipt = f"r{next(self.numbers)}"
        self.model.refused_send(body, queue)
        self._note("open", conn=name)
        self._note("send", conn=name, command="SEND",
                   headers={"destination": QUEUES[queue], "receipt": receipt}, body=body)
        await conn.send(encode(Frame("SEND", [("destination", self.queues[queue]),
                                              ("receipt", receipt)], body.encode())))
        event = await conn.next_event(self.options.within)
        either = {"expect_any": [{"grade": "passed", "expect_error_close": {"conn": name}},
                                 {"grade": "passed", "expect_close": {"conn": name}}]}
        if isinstance(event, Closed):
            self._note("expect_close", conn=name)
        elif isinstance(event, Frame) and event.command == "ERROR":
            if isinstance(await conn.next_event(self.options.grace), Closed):
                self._note("expect_error_close", conn=name)
            else:
                self._problem(Problem("error-not-closed", ("error.close-after",),
                                      "ERROR for a SEND before CONNECT, and the connection "
                                      f"stayed open {self.options.grace:g} s", slot),
                              {"expect_error_close": {"conn": name}})
        elif event is not None:
            self._problem(Problem("accepted-before-connect", ("connecting.connected-response",),
                                  f"a SEND before CONNECT was answered with "
                                  f"{brief(event)}", slot), either)
        if self.problem is None:  # else the case ends with the expectation that catches it
            self._note("close", conn=name)
        await conn.close(abort=True)

    async def _final(self) -> None:
        """Close every slot, then a fresh connection subscribes to both queues: what the
        model says is waiting must arrive, and nothing else."""
        for slot in list(self.wires):
            # One at a time, as a step: what the closed one held goes to the others first.
            wire = self.wires.pop(slot)
            self._note("close", conn=wire.name)
            await wire.conn.close()
            self.model.end(slot)
            await asyncio.sleep(self.options.settle)
            await self._drain()
            await self._due()
            if self.problem is not None:
                return
        await self._connect(DRAIN, "1.2")
        if DRAIN not in self.wires:
            return
        for queue in (0, 1):
            if self.problem is None and DRAIN in self.wires:
                self.mark = len(self.trace)
                await self._subscribe(DRAIN, queue, "auto")
                if self.problem is None:
                    await self._due()
        # Late frames: a transaction committed at disconnect, a message given back late.
        await asyncio.sleep(self.options.settle * 5)
        if self.problem is None:
            await self._drain()

