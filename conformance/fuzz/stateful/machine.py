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

The machine is synchronous (Hypothesis); its connections live on an event loop in a thread
of its own (`Loop`)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import re
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from conformance.codec import Frame, encode, validate_server_frame
from conformance.runner.steps import brief
from conformance.spec import catalogue, statement_id
from conformance.spec.session import MODES, Message, Model, Problem
from conformance.wire.connection import Closed, Connection
from conformance.wire.handshake import connect_frame
from conformance.wire.target import Target
from conformance.wire.transcript import Transcript
from conformance.wire.transport import TransportError, open_transport

T = TypeVar("T")
SLOTS = ("a", "b")
QUEUES = ("${queue}", "${queue2}")
DRAIN = "drain"
#: The statement a refusal of a valid frame breaks, by command.
REFUSED = {
    "SUBSCRIBE": "subscribe-ack.valid-values", "UNSUBSCRIBE": "unsubscribe.id-matches",
    "SEND": "receipt-header.server-acknowledges", "BEGIN": "begin.transaction-required",
    "COMMIT": "commit.transaction-required", "ABORT": "abort.transaction-required",
    "DISCONNECT": "receipt-header.server-acknowledges",
}


@dataclass(frozen=True)
class StatefulOptions:
    #: seconds to wait after each step for deliveries the model forbids
    settle: float = 0.05
    #: seconds an answer, or a delivery the model requires, may take
    within: float = 2.0
    #: seconds the connection may stay open after an ERROR
    grace: float = 1.0
    #: unacknowledged messages of a connection that ended must be delivered again
    redelivery: bool = True
    #: rule steps per session
    steps: int = 25
    #: also send frames the broker must refuse or ignore (SEND before CONNECT, ACK of an
    #: id never sent or sent to another connection); off: only well-formed sessions, so
    #: that a broker's known answer to those does not hide everything else
    refusals: bool = True

    def __post_init__(self) -> None:
        for name in ("within", "grace"):
            if not getattr(self, name) > 0:
                raise ValueError(f"StatefulOptions.{name} must be a number of seconds above 0")
        if self.settle < 0:
            raise ValueError("StatefulOptions.settle must not be negative")
        if self.steps < 1:
            raise ValueError("StatefulOptions.steps must be at least 1")


#: For the reference broker in this process, which answers in well under a millisecond.
IN_PROCESS = StatefulOptions(settle=0.0005, within=0.5, steps=15)


class Violation(AssertionError):
    """The broker did what the model does not allow; `case` replays the session."""

    def __init__(self, problem: Problem, case: dict[str, Any], steps: int, version: str) -> None:
        super().__init__(f"{problem.kind}: {problem.detail}")
        self.problem, self.case, self.steps, self.version = problem, case, steps, version


class TimeUp(BaseException):
    """The run's time is up (a BaseException, so that Hypothesis stops at once rather
    than shrink it)."""


class Loop:
    """An event loop in a daemon thread; `call` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="stateful-fuzz",
                                       daemon=True)
        self.thread.start()

    def call(self, work: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


@dataclass
class Runner:
    """What every session of one run shares."""

    target: Target
    options: StatefulOptions
    loop: Loop
    deadline: float
    seed: int
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    sessions: int = 0
    best: Violation | None = None

    def spent(self) -> bool:
        return time.monotonic() >= self.deadline

    def record(self, violation: Violation) -> None:
        size = (violation.steps, len(violation.case["steps"]))
        if self.best is None or size < (self.best.steps, len(self.best.case["steps"])):
            self.best = violation


@dataclass
class _Wire:
    conn: Connection
    #: the connection's name in the case (slot and incarnation: a1, a2, ...)
    name: str
    version: str


def _pick(candidates: list[T], pick: int) -> T:
    return candidates[pick % len(candidates)]


class SessionMachine(RuleBasedStateMachine):
    """STOMP sessions on two connection slots, checked against the delivery model."""

    def __init__(self, runner: Runner) -> None:
        super().__init__()
        self.runner, self.options = runner, runner.options
        runner.sessions += 1
        tag = f"sf-{runner.run_id}-{runner.sessions}"
        profile = runner.target.profile
        self.queues = (profile.queue.format(name=tag), profile.queue.format(name=tag + "-2"))
        self.model = Model(queues=2, redelivery=self.options.redelivery)
        self.wires: dict[str, _Wire] = {}
        self.opened = dict.fromkeys(SLOTS, 0)
        self.versions: dict[str, str] = {}
        self.trace: list[dict[str, Any]] = []
        self.fix: list[dict[str, Any]] = []
        self.problem: Problem | None = None
        self.mark = 0
        self.numbers = itertools.count(1)
        self.steps = 0
        self.failed = False
        self.started = time.monotonic()
        self.transcript = Transcript(head=192 << 10, tail=64 << 10)

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

    # -- running a step ------------------------------------------------------------------------

    def _step(self, work: Callable[[], Coroutine[Any, Any, None]], *, steps: int = 1) -> None:
        """Run one step on the loop; raise Violation if the broker broke the model."""
        if self.runner.spent():
            raise TimeUp  # not an Exception: Hypothesis lets it through at once
        self.steps += steps
        self.mark = len(self.trace)  # where this step's part of the case starts
        options = self.options
        limit = options.within * 6 + options.grace + options.settle + 10
        try:
            self.runner.loop.call(self._then_settle(work), limit)
        except TimeoutError:
            self._problem(Problem("timeout", ("receipt-header.server-acknowledges",),
                                  f"a step took longer than {limit:g} s"))
        if self.problem is not None:
            self.failed = True
            violation = self._violation(self.problem)
            self.runner.record(violation)
            raise violation

    async def _then_settle(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        await work()
        if self.problem is None:
            await asyncio.sleep(self.options.settle)
            await self._drain()
        if self.problem is None:
            await self._due()

    def _problem(self, problem: Problem, *fix: dict[str, Any]) -> None:
        """Keep the first problem, and the steps that catch it in the replay."""
        if self.problem is None:
            self.problem = problem
            self.fix = list(fix)

    def _note(self, kind: str, **args: Any) -> None:
        self.trace.append({kind: args})

    def _clock(self) -> float:
        return time.monotonic() - self.started

    # -- connections -------------------------------------------------------------------------

    async def _open(self, slot: str) -> tuple[str, Connection] | None:
        self.opened[slot] = self.opened.get(slot, 0) + 1
        name = f"{slot}{self.opened[slot]}" if slot != DRAIN else DRAIN
        target = self.runner.target
        try:
            transport = await open_transport(target.address, tls=target.tls,
                                             timeout=self.options.within * 2)
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

    async def _lost(self, slot: str) -> None:
        """The connection is over (the broker closed it, or refused a frame)."""
        wire = self.wires.pop(slot, None)
        if wire is not None:
            await wire.conn.close(abort=True)
        self.model.end(slot)

    async def _close_all(self) -> None:
        for slot in list(self.wires):
            await self.wires.pop(slot).conn.close(abort=True)

    # -- frames and answers ------------------------------------------------------------------

    async def _frame(self, slot: str, command: str, headers: list[tuple[str, str]],
                     shown: dict[str, str], body: str = "", *, refusable: bool = False,
                     explain: tuple[str, ...] = ()) -> bool:
        """Send a frame asking for a receipt; True once its RECEIPT came. A refusable
        frame may instead get ERROR then close (or a close): then the slot is over."""
        wire = self.wires[slot]
        receipt = f"r{next(self.numbers)}"
        args: dict[str, Any] = {"conn": wire.name, "command": command,
                                "headers": {**shown, "receipt": receipt}}
        if body:
            args["body"] = body
        self.trace.append({"send": args})
        frame = Frame(command, [*headers, ("receipt", receipt)], body.encode())
        await wire.conn.send(encode(frame, version=wire.version))  # type: ignore[arg-type]
        answer = await self._answer(slot, receipt)
        if answer == "receipt":
            return True
        expect_receipt = {"expect": {"conn": wire.name, "command": "RECEIPT",
                                     "headers": {"receipt-id": receipt}}}
        rules = explain or (REFUSED.get(command, "receipt-header.server-acknowledges"),)
        if isinstance(answer, Frame):  # ERROR
            message = " ".join((answer.get("message") or "").split())[:100]
            if not refusable:
                self._problem(Problem("refused-valid", rules, f"ERROR for a valid {command} "
                                      f"({message or 'no message'})", slot), expect_receipt)
            elif await self._closes(wire):
                self._note("expect_error_close", conn=wire.name)
            else:
                self._problem(Problem("error-not-closed", ("error.close-after",),
                                      f"ERROR for {command} ({message}), and the connection "
                                      f"stayed open {self.options.grace:g} s",
                                      slot), {"expect_error_close": {"conn": wire.name}})
            await self._lost(slot)
        elif isinstance(answer, Closed):
            if refusable:
                self._note("expect_close", conn=wire.name)
            else:
                self._problem(Problem("closed-valid", rules, f"the connection closed with no "
                                      f"RECEIPT for a valid {command} ({answer.reason})",
                                      slot), expect_receipt)
            await self._lost(slot)
        else:
            self._problem(Problem("no-receipt", ("receipt-header.server-acknowledges",),
                                  f"no RECEIPT for {command} within "
                                  f"{self.options.within:g} s", slot), expect_receipt)
        return False

    async def _answer(self, slot: str, receipt: str) -> str | Frame | Closed | None:
        """Frames on `slot` until the RECEIPT `receipt` ('receipt'), an ERROR (the frame),
        a close, or nothing in time (None); the frames before are observed."""
        wire = self.wires[slot]
        stop = time.monotonic() + self.options.within
        while True:
            event = await wire.conn.next_event(max(stop - time.monotonic(), 0))
            if event is None or isinstance(event, Closed):
                return event
            if not isinstance(event, Frame):
                continue  # a heart-beat: next_event leaves them out
            self._judge(slot, wire, event)
            if event.command == "RECEIPT" and event.get("receipt-id") == receipt:
                self._note("expect", conn=wire.name, command="RECEIPT",
                           headers={"receipt-id": receipt})
                return "receipt"
            if event.command == "ERROR":
                return event
            self._observe(slot, wire, event)

    async def _closes(self, wire: _Wire) -> bool:
        """After an ERROR: True when the connection closes within the grace time, with no
        frame before."""
        return isinstance(await wire.conn.next_event(self.options.grace), Closed)

    def _judge(self, slot: str, wire: _Wire, frame: Frame) -> None:
        """MUST-level violations the validator finds in any frame the broker sent."""
        found = list(frame.violations) + validate_server_frame(
            frame, version=wire.conn.version,  # type: ignore[arg-type]
            ack_modes=wire.conn.ack_modes, offered=wire.conn.offered)
        known = catalogue()
        for violation in found:
            statement = known[violation.statement] if violation.statement in known else None
            if statement is not None and statement.level.strength == "must":
                self._problem(Problem("invalid-frame", (violation.statement,),
                                      f"{frame.command}: {violation.message}", slot))

    def _observe(self, slot: str, wire: _Wire, frame: Frame) -> None:
        """A frame other than the awaited answer: a MESSAGE the model judges, or a stray."""
        quiet = {"expect_none": {"conn": wire.name, "within": 1.0}}
        if frame.command != "MESSAGE":
            what = f"a RECEIPT for receipt {frame.get('receipt-id')!r}, never asked" if \
                frame.command == "RECEIPT" else f"an unexpected {frame.command}"
            rule_ = "receipt.receipt-id-required" if frame.command == "RECEIPT" \
                else "server-frames.kinds"
            self._problem(Problem("unexpected-frame", (rule_,), what, slot), quiet)
            return
        body = frame.body.decode("utf-8", "replace")
        sub = frame.get("subscription")
        ack, message_id = frame.get("ack"), frame.get("message-id")
        problem = self.model.delivered(slot, sub, body, ack=ack, message_id=message_id)
        if problem is not None:
            self._problem(problem, quiet)
            return
        expect: dict[str, Any] = {"conn": wire.name, "command": "MESSAGE",
                                  "headers": {"subscription": sub}, "body": body}
        message = self.model.messages[body]
        captured = "ack" if wire.version == "1.2" else "message-id"
        if frame.get(captured) is not None and \
                self.model.sessions[slot].subs[sub or ""].mode != "auto":
            message.var = f"k{next(self.numbers)}"
            expect["capture"] = {message.var: captured}
        self.trace.append({"expect": expect})

    async def _drain(self) -> None:
        """Everything that already arrived on every connection."""
        for slot in list(self.wires):
            wire = self.wires[slot]
            while self.problem is None and slot in self.wires:
                event = await wire.conn.next_event(0)
                if event is None:
                    break
                if not isinstance(event, (Frame, Closed)):
                    continue
                if isinstance(event, Closed) or event.command == "ERROR":
                    what = event.reason if isinstance(event, Closed) else \
                        f"ERROR {event.get('message')!r}"
                    self._problem(Problem("dropped-connection", ("error.may-send",),
                                          f"the broker ended a valid session: {what}", slot),
                                  {"expect_none": {"conn": wire.name, "within": 1.0}})
                    await self._lost(slot)
                    break
                self._judge(slot, wire, event)
                self._observe(slot, wire, event)

    async def _due(self) -> None:
        """Wait for the deliveries the model requires: queued messages with a subscriber."""
        stop = time.monotonic() + self.options.within
        while self.problem is None and (due := self.model.due()):
            if time.monotonic() >= stop:
                message, takers = due[0]
                slot = takers[0][0]
                late = [m for m, t in due if any(s == slot for s, _ in t)]
                why = message.why or ("subscribe-ack.may-redeliver",)
                self._problem(Problem("missing-delivery", why,
                                      f"{message.body!r} was not delivered within "
                                      f"{self.options.within:g} s to any of "
                                      f"{', '.join(s for _, s in takers)}: {message.reason}",
                                      slot), *self._expect_late(slot, late))
                return
            await asyncio.sleep(0.002)
            await self._drain()

    def _expect_late(self, slot: str, messages: list[Message]) -> list[dict[str, Any]]:
        """The steps that catch deliveries that never came, in any order (a broker need not
        keep a queue's order when it gives messages back). When this step's own frame on
        that connection made them due, a correct broker may send them before or after that
        frame's RECEIPT: its expectation joins the unordered set."""
        name = self.wires[slot].name
        wanted = [{"conn": name, "command": "MESSAGE", "body": m.body,
                   "within": self.options.within} for m in messages]
        sends = [i for i in range(self.mark, len(self.trace))
                 if self.trace[i].get("send", {}).get("conn") == name]
        at = len(self.trace)
        for index in range(sends[-1] + 1 if sends else len(self.trace), len(self.trace)):
            step = self.trace[index].get("expect", {})
            if step.get("conn") == name and step.get("command") == "RECEIPT":
                wanted.append({**step, "within": self.options.within})
                at = index
                break
        either = [{"expect_any": [{"grade": "passed", "expect": copy.deepcopy(w)}
                                  for w in wanted]}
                  for _ in wanted] if len(wanted) > 1 else [{"expect": wanted[0]}]
        if at == len(self.trace):
            return either
        self.trace[at:at + 1] = either
        return []

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

    # -- the case ------------------------------------------------------------------------------

    def _violation(self, problem: Problem) -> Violation:
        version = self.versions.get(problem.slot, "1.2")
        known = catalogue()
        statements = [statement_id(rule_, version) for rule_ in problem.statements]
        statements = [s for s in dict.fromkeys(statements)
                      if s in known and version in known[s].versions]
        if not statements:
            statements = [statement_id("receipt-header.server-acknowledges", version)]
        slug = re.sub(r"[^a-z0-9]+", "-", problem.kind.lower()).strip("-") or "problem"
        case = {
            "id": f"stateful.{slug}-{self.runner.seed}-{self.runner.run_id}",
            "title": f"stateful fuzzer: {problem.detail}"[:200],
            "statements": statements,
            "versions": [version],
            "tags": ["stateful", f"problem:{slug}"],
            "timeout": 60,
            "steps": [*self.trace, *self.fix],
        }
        return Violation(problem, case, self.steps, version)





__all__ = ["IN_PROCESS", "Loop", "Runner", "SessionMachine", "StatefulOptions", "TimeUp",
           "Violation"]
