"""One client case at one version as it runs: the scripted broker's listener and the client's
connection, the driver, the case's variables and what it found. The steps (steps.py) act
on a ClientRun; the engine (engine.py) makes one per case and grades it.

Over WebSocket (`transport="ws"`), the listener answers the client's upgrade at `WS_PATH` as
the reference broker does (wire/websocket_server.py): the case's version's subprotocol, or
a refusal when the client offers none of it, which fails the case at its accept.

Every frame the client sends is judged here, looked for by a step or not: the parser's
violations and the codec's client-frame validator, graded by each statement's level."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
from typing import Any

from conformance.clients.driver_process import Driver, DriverError
from conformance.codec import Frame, validate_client_frame
from conformance.runner.case_run import CaseError, RunningCase
from conformance.runner.judge import Judged, StepFailed, keep
from conformance.scenario import Case
from conformance.wire.connection import Connection, Received
from conformance.wire.stream import Transport, TransportError
from conformance.wire.transcript import Record
from conformance.wire.transport import listen_tcp
from conformance.wire.websocket import SUBPROTOCOL_VERSIONS
from conformance.wire.websocket_server import UpgradeRefused, accept_upgrade

#: The connection's name in transcripts, and the driver's.
CLIENT, DRIVER = "client", "driver"
#: How much of a driver line a transcript note keeps.
NOTE_CHARS = 400
#: Where the scripted broker serves STOMP over WebSocket, and how long a client that
#: connected has to ask for the upgrade.
WS_PATH = "/ws"
UPGRADE_WITHIN = 10.0


def passcode(run_id: str) -> str:
    """The passcode a run's cases give the driver (and its reports scrub)."""
    return f"pw-{run_id}"


class Unsupported(Exception):
    """The driver says its library cannot do what the case asks: graded unsupported."""


class ClientRun(RunningCase):
    """The state of one client case at one version."""

    def __init__(self, case: Case, version: str, driver: str, run_id: str, *,
                 transport: str = "tcp") -> None:
        super().__init__(case, version, run_id)
        self.driver_command = driver
        self.transport = transport
        unique = self.unique
        self.variables = {
            "url": "", "version": version, "queue": f"/queue/{unique}", "id": unique,
            "host": "localhost", "login": "guest", "passcode": passcode(run_id),
        }
        self.server: asyncio.Server | None = None
        #: the client's connections, or why its WebSocket upgrade failed
        self.arrivals: asyncio.Queue[Transport | str] = asyncio.Queue()
        self._upgrading: set[asyncio.Task[Any]] = set()
        #: over WebSocket: the subprotocols the client offered and the one accepted
        self.upgrade: dict[str, Any] | None = None
        #: what the client's CONNECT broke that the scripted broker let pass, in a case
        #: that does not check that rule (its CONNECT served anyway; '' when none)
        self.lenient = ""
        self.conn: Connection | None = None
        self.driver: Driver | None = None
        #: the heart-beat headers of the CONNECT the client sent and the CONNECTED the
        #: case answered ((0, 0) until then, or when absent)
        self.client_heart_beat: tuple[int, int] = (0, 0)
        self.server_heart_beat: tuple[int, int] = (0, 0)
        #: the driver's events the steps have not taken, beyond the one being read
        self.pending: list[dict[str, Any]] = []

    def note(self, conn: str, text: str) -> None:
        self.transcript.add(Record(self.clock(), "note", conn, note=text[:NOTE_CHARS]))

    # -- the scripted broker's side ------------------------------------------------------

    async def listen(self) -> None:
        """Listen on a free loopback port: `${url}` is where the client connects."""
        self.server = await listen_tcp("127.0.0.1", self._arrived)
        port = self.server.sockets[0].getsockname()[1]
        self.variables["url"] = f"ws://127.0.0.1:{port}{WS_PATH}" if self.transport == "ws" \
            else f"tcp://127.0.0.1:{port}"

    async def _arrived(self, transport: Transport) -> None:
        if self.transport != "ws":
            await self.arrivals.put(transport)
            return
        task = asyncio.current_task()
        assert task is not None  # listen_tcp runs each connection's callback as a task
        self._upgrading.add(task)
        try:
            upgraded = await accept_upgrade(transport, WS_PATH, (self.version,),
                                            timeout=UPGRADE_WITHIN)
        except UpgradeRefused as refused:
            self.upgrade = {"offered": _shown(refused.offered), "accepted": None}
            await self.arrivals.put(str(refused))
        except TransportError as error:
            await self.arrivals.put(str(error))
        else:
            self.upgrade = {"offered": _shown(upgraded.offered),
                            "accepted": upgraded.subprotocol}
            await self.arrivals.put(upgraded)
        finally:
            self._upgrading.discard(task)

    async def accept(self, within: float) -> Connection:
        """The client's connection: the one accepted already, or the next to arrive."""
        if self.conn is not None:
            return self.conn
        deadline = time.monotonic() + within
        arriving = asyncio.ensure_future(self.arrivals.get())
        try:
            # the driver's events meanwhile: a connect it failed (or cannot do) ends the wait
            while not arriving.done() and (left := deadline - time.monotonic()) > 0:
                reporting = asyncio.ensure_future(self.next_event(left))
                await asyncio.wait({arriving, reporting}, return_when=asyncio.FIRST_COMPLETED)
                if not reporting.done():
                    reporting.cancel()
                    continue
                try:
                    event = reporting.result()  # raises for a failed command
                except StepFailed:
                    # a connect failed as its upgrade was refused: the refusal says why
                    await asyncio.wait({arriving}, timeout=0.5)
                    if arriving.done() and isinstance(arriving.result(), str):
                        break
                    if arriving.done():  # a connection after all: closed with the run
                        self.arrivals.put_nowait(arriving.result())
                    raise
                if event is not None:
                    self.pending.append(event)
        finally:
            if not arriving.done():
                arriving.cancel()
        if not arriving.done() or arriving.cancelled():
            raise StepFailed(f"the client to connect within {within:g} s", "no connection")
        transport = arriving.result()
        if isinstance(transport, str):  # its WebSocket upgrade failed
            self.note(CLIENT, transport)
            name = next(n for n, v in SUBPROTOCOL_VERSIONS.items() if v == self.version)
            raise StepFailed(f"a WebSocket upgrade of {WS_PATH} offering {name} (STOMP "
                             f"{self.version})", transport)
        self.note(CLIENT, f"accepted {transport.peer}")
        conn = Connection(CLIENT, transport, self.transcript, self.clock, peer="client")
        conn.set_version(self.version)
        self.conn = conn
        return conn

    def connection(self) -> Connection:
        if self.conn is None:
            raise CaseError("no client connection yet (add an accept or handshake step)")
        return self.conn

    def received(self, frame: Frame) -> None:
        """Every frame the client sends comes here: judged by the parser and the client
        validator at the case's version, up to MAX_FOUND violations."""
        found = list(frame.violations)
        found += validate_client_frame(frame, version=self.connection().version)  # type: ignore[arg-type]
        keep(self.found, (Judged(v.statement, f"{CLIENT}: {v}") for v in found))

    async def next_frame(self, within: float) -> Received | None:
        """The client's next frame (judged), a close, or None within `within` seconds."""
        event = await self.connection().next_event(within)
        if isinstance(event, Frame):
            self.received(event)
        return event

    # -- the driver ------------------------------------------------------------------------

    async def start_driver(self) -> None:
        self.driver = Driver(self.driver_command)
        ready = await self.driver.start()
        self.note(DRIVER, "<- " + json.dumps(ready))

    async def command(self, command: dict[str, Any]) -> None:
        if self.driver is None:
            raise CaseError("the driver is not started")
        shown = {k: ("***" if k == "passcode" else v) for k, v in command.items()}
        self.note(DRIVER, "-> " + json.dumps(shown))
        await self.driver.send(command)

    async def next_event(self, within: float, *, done: bool = False) -> dict[str, Any] | None:
        """The driver's next event within `within` seconds, or None. `done` and `failed`
        events are what a step waiting for a command reads (`done=True`); other steps pass
        over `done` and end at `failed`: unsupported when the driver says so, else the
        library refused what the case asked, a failure."""
        if self.driver is None:
            raise CaseError("the driver is not started")
        deadline = time.monotonic() + within
        while True:
            if self.pending:
                event: dict[str, Any] | None = self.pending.pop(0)
            else:
                left = max(0.0, deadline - time.monotonic())
                event = await self.driver.next_event(left)
                if event is not None:
                    self.note(DRIVER, "<- " + json.dumps(event))
            if event is None:
                return None
            kind = event["event"]
            if kind == "failed":
                error = str(event.get("error", ""))
                if error.startswith("unsupported"):
                    raise Unsupported(f"the driver cannot {event['op']}: {error}")
                if not done:
                    raise StepFailed(f"the library to do {event['op']!r}",
                                     f"it failed: {error[:200]}")
            if kind == "done" and not done:
                continue
            return event

    async def close(self) -> None:
        if self.driver is not None:
            await self.driver.stop()
            tail = self.driver.stderr_tail()
            if tail:
                self.note(DRIVER, f"stderr: {tail}")
        if self.conn is not None:
            await self.conn.close(abort=True)
        if self.server is not None:
            self.server.close()
        for task in list(self._upgrading):  # upgrades still being answered
            task.cancel()
        while not self.arrivals.empty():  # connections never taken
            if isinstance(arrival := self.arrivals.get_nowait(), Transport):
                await arrival.abort()


def _shown(offered: tuple[str, ...]) -> list[str]:
    """The subprotocols a client offered, as a report keeps them: a few, each cut short."""
    return [name[:60] for name in offered[:10]]


def event_headers(event: dict[str, Any]) -> dict[str, str]:
    """The headers an event reports, as the application sees each name: from a list of
    [name, value] entries the first of each name, or an object as it is."""
    given = event.get("headers") or {}
    out: dict[str, str] = {}
    if isinstance(given, dict):
        return {str(k): str(v) for k, v in given.items()}
    if not isinstance(given, list):
        raise DriverError("the driver reported headers that are neither an object nor a list")
    for entry in given:
        if not (isinstance(entry, list) and len(entry) == 2):
            raise DriverError("the driver reported a header entry that is not [name, value]")
        out.setdefault(str(entry[0]), str(entry[1]))
    return out


def event_body(event: dict[str, Any]) -> bytes:
    """An event's body: `body_b64` decoded, or `body` as UTF-8 text."""
    if "body_b64" in event:
        try:
            return base64.b64decode(str(event["body_b64"]), validate=True)
        except (binascii.Error, ValueError):
            raise DriverError("the driver reported a body_b64 that is not base64") from None
    return str(event.get("body", "")).encode()
