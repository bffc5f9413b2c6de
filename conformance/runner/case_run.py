"""One case at one version as it runs: its connections, its variables and what it found,
and the ways a step ends it. The steps act on a CaseRun; the engine makes one per case and
grades it when the steps are done."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from conformance.codec import Frame
from conformance.profiles import Profile
from conformance.runner.judge import (
    MAX_FOUND,
    Broken,
    Judged,
    StepFailed,
    graded_first,
    judge,
    outcome,
)
from conformance.runner.results import CaseResult, Outcome, Refusal
from conformance.scenario import Case, Step
from conformance.spec.grammar import HEART_BEAT
from conformance.wire.connection import Connection
from conformance.wire.stream import SubprotocolNotOffered, TransportError, WebSocketRefused
from conformance.wire.target import Target
from conformance.wire.transcript import Record, Transcript

VARIABLE = re.compile(r"\$\{([^}]*)\}")
#: At a case's end, how long a connection is read for frames still on their way (each
#: frame restarts the wait), and at most for how long: a peer that keeps talking (a flood)
#: cannot hold the case.
DRAIN_QUIET, DRAIN_MOST = 0.05, 0.25


class CaseError(Exception):
    """The case itself cannot go on (a connection it names was never opened...)."""


class UpgradeRefused(CaseError):
    """The broker refused the WebSocket upgrade: an error of the case, unless the step that
    opened the connection grades the refusal (`open` with `refused`)."""


class CaseDecided(Exception):
    """A step graded the case (CaseRun.grade) and left the steps after it nothing to
    check: the case ends there, with the grades it has."""


class SetupRefused(CaseError):
    """A CONNECT the case needs only to get a session was not answered with CONNECTED:
    the broker's settings (credentials, virtual host) are the likely cause, not the
    statement the case checks."""

    def __init__(self, message: str, observed: str, how: Refusal = Refusal.ANSWERED) -> None:
        super().__init__(message)
        self.observed, self.how = observed, how


def heart_beat_pair(value: str | None) -> tuple[int, int] | None:
    """A heart-beat header's two intervals: a missing header means 0,0
    (heart-beating.missing-header); None when it is not two integers."""
    if value is None:
        return 0, 0
    match = HEART_BEAT.match(value)
    return (int(match.group(1)), int(match.group(2))) if match else None


class RunningCase:
    """What every case has as it runs, a broker's or a client's: its clock, transcript and
    variables, the grades its steps gave and what the validator found."""

    def __init__(self, case: Case, version: str, run_id: str) -> None:
        self.case, self.version = case, version
        self.started = time.monotonic()
        self.transcript = Transcript()
        self.grades: list[Broken] = []
        self.found: list[Judged] = []  # from the validator
        self.step: Step | None = None
        slug = re.sub(r"[^a-z0-9]+", "-", case.id)
        #: a name no other case run shares: its destinations' and ids'
        self.unique = f"sc-{slug}-{version.replace('.', '')}-{run_id}"
        self.variables: dict[str, str] = {}

    def clock(self) -> float:
        return time.monotonic() - self.started

    def substitute(self, text: str, quote: Callable[[str], str] = str) -> str:
        return VARIABLE.sub(lambda m: quote(self.variables.get(m.group(1), m.group(0))), text)

    def headers(self, given: Any) -> list[tuple[str, str]]:
        pairs = given.items() if isinstance(given, dict) else (given or [])
        return [(self.substitute(str(k)), self.substitute(str(v))) for k, v in pairs]

    @property
    def named(self) -> tuple[str, ...]:
        """The statements the running step names (none: the case's)."""
        return self.step.statements if self.step else ()

    def grade(self, outcome: Outcome, note: str, statements: Sequence[str] = ()) -> None:
        """The running step grades the case: for the statements it checks (`statements`:
        those of the alternative that decided, where it names fewer)."""
        stake = graded_first(self.case.at_stake(self.version, statements or self.named),
                             outcome)
        self.grades.append(Broken(stake, outcome, note))

    def judged(self, failure: StepFailed | None, profile: Profile | None, *,
               strict: bool = False) -> tuple[Outcome, dict[str, Any]]:
        """The run's outcome once its steps are done (see judge.outcome)."""
        step_line = self.step.line if self.step else 0
        return outcome(self.case, self.version, self.named, self.grades, self.found,
                       failure, step_line, profile, strict=strict)

    async def drain(self, connections: Iterable[Connection],
                    received: Callable[[Connection, Frame], None]) -> None:
        """Give `received` (which judges them) the frames no step read: those left on
        `connections` and those arriving until one is quiet for DRAIN_QUIET seconds."""
        async def read(conn: Connection) -> None:
            stop = time.monotonic() + DRAIN_MOST
            while (left := stop - time.monotonic()) > 0 and len(self.found) < MAX_FOUND:
                event = await conn.next_event(min(DRAIN_QUIET, left))
                if not isinstance(event, Frame):
                    return
                received(conn, event)

        await asyncio.gather(*map(read, connections))

    def result(self, outcome: Outcome, **extra: Any) -> CaseResult:
        """The case run's result: `outcome`, with the fields that explain it."""
        case = self.case
        return CaseResult(
            id=case.id, title=case.title, version=self.version, outcome=outcome,
            level=case.level_at(self.version), levels=case.levels_at(self.version),
            statements=case.statements, versions=case.versions,
            area=case.area, file=case.file, line=case.line,
            duration_ms=(time.monotonic() - self.started) * 1000,
            transcript=self.transcript.finish(), **extra)


class CaseRun(RunningCase):
    """The state of one case at one version against a broker: connections, variables,
    grades."""

    def __init__(self, case: Case, version: str, target: Target, run_id: str) -> None:
        super().__init__(case, version, run_id)
        self.target = target
        self.connections: dict[str, Connection] = {}
        self.server: dict[str, str] = {}
        login, passcode = target.credentials
        unique = self.unique
        # a case's topic run (scenario.model.DESTINATION_KINDS) names topics by ${queue}
        queues = target.profile.topic if case.destination == "topic" else target.profile.queue
        self.variables = {
            "queue": queues.format(name=unique),
            "queue2": queues.format(name=unique + "-2"),
            "topic": target.profile.topic.format(name=unique),
            "topic2": target.profile.topic.format(name=unique + "-2"),
            "id": unique, "host": target.virtual_host, "version": version,
            "login": login or "", "passcode": passcode or "",
        }

    async def open(self, name: str, subprotocols: Sequence[str] | None = None) -> Connection:
        """Connection `name`, offering `subprotocols` over WebSocket (None: the target's
        offer). A broker naming a subprotocol not offered fails the case (RFC 6455: the
        client MUST fail that connection, so no STOMP session legitimately starts)."""
        if name in self.connections:
            raise CaseError(f"connection {name!r} is already open")
        try:
            transport = await self.target.open(subprotocols=subprotocols)
        except TransportError as error:
            if self.target.address.websocket:  # the offer, which no transport can tell now
                offer = ", ".join(self.target.offer(subprotocols)) or "no subprotocol"
                self.transcript.add(Record(self.clock(), "note", name,
                                           note=f"WebSocket upgrade offering {offer}: {error}"))
            if isinstance(error, SubprotocolNotOffered):
                raise StepFailed("the upgrade refused, or accepted naming a subprotocol "
                                 "offered (or none)", str(error),
                                 grade=Outcome.FAILED) from None
            if isinstance(error, WebSocketRefused):
                raise UpgradeRefused(str(error)) from None
            raise CaseError(str(error)) from None
        self.transcript.add(Record(self.clock(), "note", name, note=f"open {transport.peer}"))
        conn = Connection(name, transport, self.transcript, self.clock)
        conn.set_version(self.version)
        self.connections[name] = conn
        return conn

    def conn(self, args: dict[str, Any]) -> Connection:
        name = args.get("conn", "main")
        if name not in self.connections:
            raise CaseError(f"connection {name!r} is not open (add an open or connect step)")
        return self.connections[name]

    def received(self, conn: Connection, frame: Frame) -> None:
        """Every frame a step receives comes here, looked for or not: a CONNECTED's
        heart-beat offer and server headers are kept, and the frame is judged."""
        if frame.command == "CONNECTED":
            conn.server_heart_beat = heart_beat_pair(frame.get("heart-beat"))
            if not self.server:
                self.server = frame.header_map
        judge(self.found, conn, frame)

    async def close(self) -> None:
        for conn in self.connections.values():
            try:
                await conn.close()
            except TransportError:
                pass
