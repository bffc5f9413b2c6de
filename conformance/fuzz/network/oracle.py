"""The oracle: one input sent to a broker on a fresh connection, and what came back judged
against what the spec requires (a Judgement); and the liveness check (`Oracle.alive`).

For an input of well-formed frames the spec requires a RECEIPT for its last frame, no
ERROR, and each message the session sends itself delivered with its body and user headers
unchanged (expected.py); for an input that breaks a rule, ERROR then close
(`error.close-after`); beyond a size limit, either. Anything else is an anomaly with a kind,
the statement it breaks and a grade (`grade`). Every frame the broker sends also goes
through the validator, and a frame it finds broken is an anomaly too. Reads have a
deadline and a bounded parser, and at most MAX_RESPONSE octets of what a broker sends are
kept, so no broker can hang the fuzzer or fill its memory.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from conformance.codec import (
    Frame,
    Limits,
    Parser,
    StompError,
    validate_server_frame,
)
from conformance.fuzz.inputs.expected import (
    Delivery,
    compare,
    deliveries,
    frames_of,
    subscription_of,
)
from conformance.fuzz.inputs.fuzz_input import Expect, FuzzInput
from conformance.fuzz.inputs.mutations import MUTATIONS
from conformance.runner.results import BROKEN, Outcome
from conformance.spec import Party, catalogue, rule_of, statement_id
from conformance.spec.grammar import COMMANDS, VERSIONS, Version, parse_accept_version
from conformance.wire.handshake import connect_frame
from conformance.wire.stream import Transport, TransportError
from conformance.wire.target import Target

#: What a broker may send per input: small frames, a bounded record of the bytes.
LIMITS = Limits(max_headers=1_000, max_header_line=64 * 1024, max_body=1 << 20,
                max_frame=2 << 20)
MAX_RESPONSE = 64 * 1024
MAX_DETAIL = 400
#: Sent after an ERROR that was not followed by a close: an answer proves the connection
#: outlived its ERROR at once, where waiting for a close would take the whole grace time.
AFTER_ERROR = b"DISCONNECT\nreceipt:fz-after-error\n\n\x00"
#: Seconds a close may come after its ERROR and still be "just after" it.
SETTLE = 0.05


class Kind(enum.StrEnum):
    """How a broker's answer to an input departs from what the spec requires."""

    REFUSED_VALID = "refused-valid"              #: ERROR for well-formed input
    CLOSED_VALID = "closed-valid"                #: closed, no RECEIPT, for well-formed input
    LOST_MESSAGE = "lost-message"                #: a message to the input's own subscription
    CHANGED_MESSAGE = "changed-message"          #: delivered with another body or header
    TIMEOUT = "timeout"                          #: nothing definite before the deadline
    #: well-formed input: no RECEIPT before the deadline, or before the close its DISCONNECT
    #: asked (the close is no part of what went wrong)
    NO_RECEIPT = "no-receipt"
    WRONG_RECEIPT = "wrong-receipt"              #: a RECEIPT for a receipt never asked
    ERROR_WITHOUT_CLOSE = "error-without-close"  #: ERROR, and the connection stayed open
    CLOSED_WITHOUT_ERROR = "closed-without-error"  #: broken input: closed, no ERROR
    ACCEPTED = "accepted-silently"               #: broken input: RECEIPT, no ERROR
    INVALID_RESPONSE = "invalid-response"        #: a frame the validator finds broken
    OVERSIZED_RESPONSE = "oversized-response"    #: beyond what the fuzzer reads
    CRASH = "crash"                              #: a new connection gets no CONNECTED
    #: the broker's process (launched by the campaign) lives but takes no connection
    HANG = "hang"
    #: the broker's process grew past a threshold for a whole window (process.py)
    LEAK = "leak"

    @property
    def outage(self) -> bool:
        """Whether it is about the broker as a whole, not an answer to one input."""
        return self in (Kind.CRASH, Kind.HANG, Kind.LEAK)


@dataclass(frozen=True, slots=True)
class Anomaly:
    kind: Kind
    statement: str
    detail: str
    #: what it is about when not the input's mutation: the command of a broken frame
    about: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return self.kind.value, self.statement


def _binds_client(statement: str) -> bool:
    known = catalogue()
    return statement in known and known[statement].party is Party.CLIENT


def grade(anomaly: Anomaly, fuzz: FuzzInput) -> Outcome:
    """How bad an anomaly is, as the catalogue's cases grade the same behaviour: a broken
    MUST fails, a SHOULD is non-strict; accepting broken input is graded per mutation
    (failed only where refusing it is the server's duty); a close without ERROR is
    non-strict; a statement the session's version does not state is informational."""
    kind = anomaly.kind
    if kind in (Kind.CRASH, Kind.HANG):
        return Outcome.FAILED
    if kind is Kind.LEAK:  # no statement bounds a broker's memory: it ends in a crash
        return Outcome.NON_STRICT
    if kind is Kind.OVERSIZED_RESPONSE:
        return Outcome.INFORMATIONAL
    if kind is Kind.CLOSED_WITHOUT_ERROR:
        known = catalogue()
        # a rule the session's version does not state breaks nothing (1.0 sets no limits)
        return Outcome.INFORMATIONAL if anomaly.statement in known and \
            fuzz.version not in known[anomaly.statement].versions else Outcome.NON_STRICT
    mutation = MUTATIONS.get(fuzz.mutation)
    if mutation is not None and (kind is Kind.ACCEPTED or (
            kind is Kind.TIMEOUT and fuzz.expect is not Expect.VALID)):
        if fuzz.version == "1.0" and _binds_client(anomaly.statement) or \
                rule_of(anomaly.statement) in mutation.taken_open:
            # 1.0 binds the client alone; its server "may send ERROR frames if something
            # goes wrong" (as the catalogue's 1.0 cases grade a frame without its header);
            # and some broken inputs a broker may serve all the same
            return Outcome.INFORMATIONAL
        return mutation.accepted
    if fuzz.expect is Expect.VALID and kind in (Kind.REFUSED_VALID, Kind.CLOSED_VALID,
                                                 Kind.NO_RECEIPT, Kind.TIMEOUT):
        return Outcome.FAILED  # a broker must take well-formed frames and answer a receipt
    known = catalogue()
    if anomaly.statement not in known:
        return Outcome.INFORMATIONAL
    statement = known[anomaly.statement]
    if fuzz.version not in statement.versions:
        return Outcome.INFORMATIONAL
    return BROKEN[statement.level.strength]


@dataclass(slots=True)
class Judgement:
    """The oracle's answer for one input: what departs from the spec, and what came back."""

    anomalies: list[Anomaly] = field(default_factory=list)
    #: the first MAX_RESPONSE octets the broker sent
    response: bytes = b""
    #: how the exchange ended, in a few words
    ended: str = ""
    #: the commands of the first frames the broker sent
    commands: list[str] = field(default_factory=list)


class Unreachable(Exception):
    """No connection, or the harness's own handshake was not answered with CONNECTED:
    nothing to judge the input by (one line)."""


def handshake(target: Target, fuzz: FuzzInput) -> bytes:
    """The CONNECT (or STOMP) the harness writes before the input's chunks."""
    return connect_frame(target, fuzz.version, command=fuzz.connect or "CONNECT",
                         given=fuzz.connect_headers)


def _under_test(fuzz: FuzzInput) -> bool:
    """Whether the handshake is part of what the input tests."""
    return fuzz.connect != "CONNECT" or bool(fuzz.connect_headers)


class _Exchange:
    """One input on one connection."""

    def __init__(self, oracle: Oracle, fuzz: FuzzInput, transport: Transport) -> None:
        self.oracle, self.fuzz, self.transport = oracle, fuzz, transport
        self.parser = Parser(version="1.2", strict=False, limits=LIMITS)
        self.version: Version = fuzz.version
        self.offered: tuple[str, ...] | None = None
        self.ack_modes: dict[str, str] | None = None
        self.judgement = Judgement()
        self.response = bytearray()
        self.pending: list[Frame] = []
        self.closed = False
        #: the MESSAGEs a valid input must get, not yet seen
        self.due: list[Delivery] = []
        self._frames: list[Frame] | None = None  # the input's, parsed once when needed
        if fuzz.expect is Expect.VALID:
            self.due = deliveries(self.frames())

    def frames(self) -> list[Frame]:
        if self._frames is None:
            self._frames = frames_of(self.fuzz) or []
        return self._frames

    # -- reading --------------------------------------------------------------------------

    async def next_frame(self, deadline: float) -> Frame | None:
        """The next frame (validated), or None once the connection is closed or the
        deadline has passed (then `closed` tells which)."""
        while not self.pending:
            if self.closed:
                return None
            try:
                async with asyncio.timeout_at(deadline):
                    data = await self.transport.receive()
            except TimeoutError:
                return None
            except TransportError:
                data = b""
            if not data:
                self._closed()
                continue
            if len(self.response) < MAX_RESPONSE:
                self.response += data[:MAX_RESPONSE - len(self.response)]
            try:
                events = self.parser.feed(data)
            except StompError as error:  # only a limit: the observing parser records the rest
                events = getattr(error, "events", [])
                self.anomaly(Kind.OVERSIZED_RESPONSE, self.fuzz.statement,
                             f"the broker sent more than the fuzzer reads: {error.message}",
                             about="response")
                self.closed = True
            frames = [e for e in events if isinstance(e, Frame)]
            self.pending += frames
            commands = self.judgement.commands
            if len(commands) < 8:
                commands += [f.command[:16] for f in frames[:8 - len(commands)]]
        frame = self.pending.pop(0)
        self._judge(frame)
        return frame

    def _closed(self) -> None:
        self.closed = True
        try:
            self.parser.eof()
        except StompError as error:
            self.anomaly(Kind.INVALID_RESPONSE, error.statement or self.fuzz.statement,
                         "the broker closed the connection in the middle of a frame",
                         about="close")

    def _judge(self, frame: Frame) -> None:
        if frame.command == "CONNECTED":
            chosen = frame.get("version") or "1.0"
            for version in VERSIONS:
                if version == chosen:
                    self.version = self.parser.version = version
        elif frame.command == "MESSAGE" and self.ack_modes is None:
            self.ack_modes = _ack_modes(self.frames())
        found = list(frame.violations)
        found += validate_server_frame(frame, version=self.version, ack_modes=self.ack_modes,
                                       offered=self.offered)
        # What the finding is about is a command of the spec or "other": a broker that
        # makes up commands must not make up findings without end.
        about = frame.command if frame.command in COMMANDS else "other"
        for violation in found:
            self.anomaly(Kind.INVALID_RESPONSE, violation.statement,
                         f"{frame.command[:40]!r}: {violation.message}", about=about)

    def anomaly(self, kind: Kind, statement: str, detail: str, about: str = "") -> None:
        if all(a.key != (kind.value, statement) for a in self.judgement.anomalies):
            detail = " ".join(detail.split())  # one line, whatever the broker put in it
            self.judgement.anomalies.append(Anomaly(kind, statement, detail[:MAX_DETAIL], about))

    async def send(self, data: bytes) -> bool:
        try:
            await self.transport.send(data)
        except TransportError:
            return False  # closed or reset by the broker: what it said is read next
        return True

    # -- the exchange ---------------------------------------------------------------------

    async def run(self) -> Judgement:
        fuzz, oracle = self.fuzz, self.oracle
        loop = asyncio.get_running_loop()
        deadline = loop.time() + oracle.deadline
        if fuzz.connect is not None:
            data = handshake(oracle.target, fuzz)
            self.offered = parse_accept_version(dict(fuzz.connect_headers).get(
                "accept-version", None if fuzz.version == "1.0" else fuzz.version))
            await self.send(data)
            frame = await self.next_frame(deadline)
            if frame is None or frame.command != "CONNECTED":
                if not _under_test(fuzz):
                    raise Unreachable(_no_connected(frame, self.closed, oracle.deadline))
                if frame is not None:
                    self.pending.insert(0, frame)  # the answer to the input: judged below
                return await self._judged(deadline)
        for chunk in fuzz.chunks:
            if not await self.send(chunk):
                break
        return await self._judged(deadline)

    async def _judged(self, deadline: float) -> Judgement:
        if self.fuzz.expect is Expect.VALID:
            await self._valid(deadline)
        else:
            await self._refused(deadline)
        self.judgement.response = bytes(self.response)
        return self.judgement

    async def _valid(self, deadline: float) -> None:
        fuzz = self.fuzz
        receipt = False
        while (frame := await self.next_frame(deadline)) is not None:
            if frame.command == "MESSAGE":
                self._delivered(frame)
            elif frame.command == "RECEIPT":
                if frame.get("receipt-id") != fuzz.receipt:
                    self._wrong_receipt(frame)
                    return
                receipt = True
                self.judgement.ended = "RECEIPT"
            elif frame.command == "ERROR":
                self.judgement.ended = "ERROR"
                self.anomaly(Kind.REFUSED_VALID, fuzz.statement,
                             f"ERROR for well-formed input: {_message(frame)}")
                return
            if receipt and not self.due:
                return
        if receipt:  # the RECEIPT came, some messages did not
            for lost in self.due:
                self.anomaly(Kind.LOST_MESSAGE,
                             statement_id("subscribe.destination-required", self.version),
                             f"no MESSAGE on subscription {lost.key!r} for the SEND to "
                             f"{lost.destination!r} within {self.oracle.deadline:g} s")
        elif self.closed and self.frames() and self.frames()[-1].command == "DISCONNECT":
            # The close is what the DISCONNECT asked for: what broke is its RECEIPT, whatever
            # the frames before it exercised.
            self.judgement.ended = "closed"
            self.anomaly(Kind.NO_RECEIPT, statement_id("receipt-header.server-acknowledges",
                                                       self.version),
                         "no RECEIPT for DISCONNECT before the connection closed")
        elif self.closed:
            self.judgement.ended = "closed"
            self.anomaly(Kind.CLOSED_VALID, fuzz.statement,
                         "the connection closed with no RECEIPT for well-formed input")
        else:
            self.judgement.ended = "deadline"
            self.anomaly(Kind.NO_RECEIPT, statement_id("receipt-header.server-acknowledges",
                                                       self.version),
                         f"no RECEIPT for well-formed input within {self.oracle.deadline:g} s")

    def _delivered(self, message: Frame) -> None:
        """Match a MESSAGE with the first due delivery on its subscription (for one that
        names none, which the validator judges, on its destination) and compare."""
        key = subscription_of(message, self.version)
        named = "subscription" in message
        for i, due in enumerate(self.due):
            if due.key == key or (not named and due.destination == message.get("destination")):
                del self.due[i]
                for statement, detail in compare(due, message, self.version):
                    self.anomaly(Kind.CHANGED_MESSAGE, statement, detail)
                return

    async def _refused(self, deadline: float) -> None:
        fuzz = self.fuzz
        while (frame := await self.next_frame(deadline)) is not None:
            if frame.command == "ERROR":
                await self._after_error()
                return
            if frame.command == "RECEIPT":
                if frame.get("receipt-id") != fuzz.receipt:
                    self._wrong_receipt(frame)
                elif fuzz.expect is Expect.ERROR:
                    self.anomaly(Kind.ACCEPTED, fuzz.statement,
                                 f"RECEIPT, no ERROR, for input that breaks {fuzz.statement}")
                self.judgement.ended = "RECEIPT"
                return
        if self.closed:
            self.judgement.ended = "closed"
            self.anomaly(Kind.CLOSED_WITHOUT_ERROR, fuzz.statement,
                         f"the connection closed with no ERROR for input that breaks "
                         f"{fuzz.statement}")
        elif fuzz.expect is Expect.ERROR:  # beyond a limit, waiting for more is no fault
            self.judgement.ended = "deadline"
            self.anomaly(Kind.TIMEOUT, fuzz.statement,
                         f"no ERROR, close or RECEIPT within {self.oracle.deadline:g} s for "
                         f"input that breaks {fuzz.statement}")
        else:
            self.judgement.ended = "deadline"

    async def _after_error(self) -> None:
        """ERROR came: the connection must close just after it. A close within SETTLE
        seconds is "just after"; then a DISCONNECT asking a receipt is sent, so that a
        broker that goes on reading answers it at once instead of taking the whole grace."""
        loop = asyncio.get_running_loop()
        grace = loop.time() + self.oracle.grace
        frame = await self.next_frame(min(loop.time() + SETTLE, grace))
        if frame is None and not self.closed:
            await self.send(AFTER_ERROR)
            frame = await self.next_frame(grace)
        if self.closed and frame is None:
            self.judgement.ended = "ERROR, closed"
            return
        self.judgement.ended = "ERROR, open"
        after = f"then {frame.command}" if frame is not None else \
            f"open {self.oracle.grace:g} s later"
        self.anomaly(Kind.ERROR_WITHOUT_CLOSE, statement_id("error.close-after", self.version),
                     f"ERROR, and the connection stayed open ({after})")

    def _wrong_receipt(self, frame: Frame) -> None:
        self.judgement.ended = "RECEIPT"
        self.anomaly(Kind.WRONG_RECEIPT, statement_id("receipt.receipt-id-required",
                                                      self.version),
                     f"RECEIPT with receipt-id {str(frame.get('receipt-id'))[:60]!r}, "
                     f"not {self.fuzz.receipt!r}")


class Oracle:
    """Sends inputs to one broker and judges the answers. `deadline`: seconds an input may
    take; `grace`: seconds the connection may stay open after an ERROR."""

    def __init__(self, target: Target, *, deadline: float = 2.0, grace: float = 1.0) -> None:
        self.target, self.deadline = target, deadline
        self.grace = min(grace, deadline)
        #: CONNECTED's server header, as the last good liveness check saw it
        self.server: str | None = None

    async def _open(self) -> Transport:
        try:
            return await self.target.open(timeout=self.deadline)
        except TransportError as error:  # a refused connect, a TLS file: the same every time
            raise Unreachable(str(error)) from None

    async def run(self, fuzz: FuzzInput) -> Judgement:
        """Send `fuzz` on a fresh connection and judge the answer. Raises Unreachable when
        there is no connection or the harness's own handshake fails."""
        transport = await self._open()
        exchange = _Exchange(self, fuzz, transport)
        try:
            # The exchange keeps its own deadlines; this bounds the writes too.
            async with asyncio.timeout(self.deadline * 2 + self.grace):
                return await exchange.run()
        except TimeoutError:
            exchange.judgement.ended = "deadline"
            exchange.anomaly(Kind.TIMEOUT, fuzz.statement,
                             f"the broker took no more of the input for {self.deadline:g} s")
            exchange.judgement.response = bytes(exchange.response)
            return exchange.judgement
        finally:
            await transport.abort()  # RST: no TIME_WAIT left behind per input

    async def alive(self) -> str | None:
        """None when a new connection gets CONNECTED, else why not (one line)."""
        version = self.target.versions[-1]
        hello = FuzzInput(version=version, chunks=(), expect=Expect.VALID, statement="",
                          mutation="liveness", receipt="")
        try:
            transport = await self._open()
        except Unreachable as error:
            return str(error)
        exchange = _Exchange(self, hello, transport)
        try:
            await exchange.send(handshake(self.target, hello))
            deadline = asyncio.get_running_loop().time() + max(self.deadline, 5.0)
            frame = await exchange.next_frame(deadline)
            if frame is not None and frame.command == "CONNECTED":
                self.server = frame.get("server")
                return None
            return _no_connected(frame, exchange.closed, max(self.deadline, 5.0))
        finally:
            await transport.abort()


def _no_connected(frame: Frame | None, closed: bool, within: float) -> str:
    if frame is not None:
        return f"the broker answered CONNECT with {frame.command}" + (
            f": {_message(frame)}" if frame.command == "ERROR" else "")
    if closed:
        return "the broker closed the connection without answering CONNECT"
    return f"no CONNECTED within {within:g} s"


def _message(frame: Frame) -> str:
    text = frame.get("message") or frame.body.decode("utf-8", "replace")
    return " ".join(text.split())[:120] or "(no message)"


def _ack_modes(frames: list[Frame]) -> dict[str, str]:
    """Subscription id -> ack mode, from the input's own SUBSCRIBE frames."""
    modes: dict[str, str] = {}
    for frame in frames:
        if frame.command == "SUBSCRIBE":
            key = frame.get("id") or frame.get("destination") or ""
            modes.setdefault(key, frame.get("ack") or "auto")
    return modes
