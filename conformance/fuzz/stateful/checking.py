"""The stateful machine's wires and what comes back on them: each frame sent asking a
RECEIPT, every frame the broker sends validated and judged against the delivery model
(conformance/spec/session.py), the deliveries the model requires waited for, and the
session written down as a case as it goes (see machine.py). `Checking` is the base of
SessionMachine, which adds the rules and the steps."""

from __future__ import annotations

import asyncio
import copy
import itertools
import re
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine

from conformance.codec import Frame, encode, validate_server_frame
from conformance.fuzz.stateful.harness import Runner, TimeUp, Violation
from conformance.spec import catalogue, statement_id
from conformance.spec.session import Message, Model, Problem
from conformance.wire.connection import Closed, Connection
from conformance.wire.transcript import Transcript

#: The statement a refusal of a valid frame breaks, by command.
REFUSED = {
    "SUBSCRIBE": "subscribe-ack.valid-values", "UNSUBSCRIBE": "unsubscribe.id-matches",
    "SEND": "receipt-header.server-acknowledges", "BEGIN": "begin.transaction-required",
    "COMMIT": "commit.transaction-required", "ABORT": "abort.transaction-required",
    "DISCONNECT": "receipt-header.server-acknowledges",
}


@dataclass
class _Wire:
    conn: Connection
    #: the connection's name in the case (slot and incarnation: a1, a2, ...)
    name: str
    version: str


class Checking(RuleBasedStateMachine):
    """A session's connections and the case it writes, checked against the delivery model."""

    def __init__(self, runner: Runner) -> None:
        super().__init__()
        self.runner, self.options = runner, runner.options
        runner.sessions += 1
        tag = f"sf-{runner.run_id}-{runner.sessions}"
        profile = runner.target.profile
        self.queues = (profile.queue.format(name=tag), profile.queue.format(name=tag + "-2"))
        self.model = Model(queues=2, redelivery=self.options.redelivery)
        self.wires: dict[str, _Wire] = {}
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

    # -- connections that end -------------------------------------------------------------

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
        """The steps that catch deliveries that never came. When this step's own frame on
        that connection made them due, they go beside that frame's RECEIPT, which a correct
        broker may send before or after them (`unordered` lets them come in any order)."""
        name = self.wires[slot].name
        wanted = [{"expect": {"conn": name, "command": "MESSAGE", "body": m.body,
                              "within": self.options.within}} for m in messages]
        sends = [i for i in range(self.mark, len(self.trace))
                 if self.trace[i].get("send", {}).get("conn") == name]
        for index in range(sends[-1] + 1 if sends else len(self.trace), len(self.trace)):
            step = self.trace[index].get("expect", {})
            if step.get("conn") == name and step.get("command") == "RECEIPT":
                self.trace[index] = {"expect": {**step, "within": self.options.within}}
                self.trace[index + 1:index + 1] = wanted
                return []
        return wanted

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
            "steps": unordered([*self.trace, *self.fix]),
        }
        return Violation(problem, case, self.steps, version)


def unordered(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`steps` with each run of frames a connection received back to back (MESSAGEs, and at
    most one RECEIPT among them) expected in any order: the order they came in is one a
    broker chose, not one the spec sets (a queue's order once messages are given back, a
    delivery against the RECEIPT of the frame that made it due), and the case is replayed
    against other brokers, or the same one without its fault."""
    out: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []

    def flush() -> None:
        if len(run) > 1:
            out.extend({"expect_any": [{"grade": "passed", "expect": copy.deepcopy(w)}
                                       for w in run]} for _ in run)
        else:
            out.extend({"expect": w} for w in run)
        run.clear()

    for step in steps:
        expect = step.get("expect")
        if expect is None or expect.get("command") not in ("MESSAGE", "RECEIPT"):
            flush()
            out.append(step)
            continue
        if run and (expect.get("conn") != run[0].get("conn") or (
                expect["command"] == "RECEIPT" and any(w["command"] == "RECEIPT" for w in run))):
            flush()  # another connection's frame, or a second RECEIPT: a run of its own
        run.append(expect)
    flush()
    return out
