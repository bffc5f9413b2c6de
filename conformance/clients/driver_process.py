"""The client under test, through its driver: a child process that takes commands as JSON
lines on its standard input and reports events as JSON lines on its standard output (the
contract in cases/clients/README.md). The harness never trusts it: every wait has a
timeout, a line is read only up to MAX_LINE octets, at most MAX_EVENTS events wait unread
(a driver that floods is stopped by its own pipe), its standard error keeps only its last
MAX_STDERR octets, and whatever it does wrong (exits, hangs, prints garbage) becomes a
`DriverError` of one line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import sys
from collections import deque
from collections.abc import Sequence
from typing import Any

#: The longest event line read (a message's headers and base64 body fit many times over).
MAX_LINE = 4 << 20
#: Events read but not yet taken by a step.
MAX_EVENTS = 1000
#: The tail of the driver's standard error kept for the case's message and transcript.
MAX_STDERR = 8 << 10
#: Seconds a driver has to say `ready`, and to exit once told to.
READY_WITHIN = 15.0
EXIT_WITHIN = 3.0

#: The events a driver may report, and the fields each must carry.
EVENTS: dict[str, tuple[str, ...]] = {
    "ready": (), "done": ("op",), "failed": ("op",), "connected": (),
    "message": ("n",), "receipt": ("id",), "error": (), "disconnected": (),
}

#: The driver a run uses when none is given: the reference driver, in this Python.
REFERENCE_DRIVER = f"{shlex.quote(sys.executable)} -m conformance.clients.driver"


class DriverError(Exception):
    """The driver did not keep the contract: the one line says how."""


class Driver:
    """One driver process, for one case run. `start` it, `send` commands, take its
    `next_event`s, and `stop` it (always)."""

    def __init__(self, command: str | Sequence[str], *, env: dict[str, str] | None = None) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise DriverError("the driver command is empty")
        self.env = env
        self.process: asyncio.subprocess.Process | None = None
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue(MAX_EVENTS)
        #: an event taken from the queue by a wait that was then cancelled: the next wait's
        self._unread: deque[dict[str, Any]] = deque()
        self.stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.problem: str | None = None  # why the event stream ended
        self._ended = asyncio.Event()
        #: the `ready` event: library and version
        self.ready: dict[str, Any] = {}

    @property
    def name(self) -> str:
        return os.path.basename(self.argv[0])

    async def start(self, within: float | None = None) -> dict[str, Any]:
        """Start the process and wait for its `ready` event (READY_WITHIN seconds)."""
        within = READY_WITHIN if within is None else within
        try:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, limit=MAX_LINE, env=self.env)
        except (OSError, ValueError) as error:
            raise DriverError(f"cannot start the driver {self.argv[0]!r}: "
                              f"{error.strerror if isinstance(error, OSError) else error}"
                              ) from None
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read_events()), loop.create_task(self._drain())]
        event = await self.next_event(within)
        if event is None:
            raise DriverError(f"the driver said nothing within {within:g} s of starting "
                              "(expected a 'ready' event)")
        if event["event"] != "ready":
            raise DriverError(f"the driver's first event is {event['event']!r}, not 'ready'")
        self.ready = event
        return event

    async def send(self, command: dict[str, Any]) -> None:
        """Write one command line; a driver that is gone raises DriverError."""
        process = self.process
        if process is None or process.stdin is None:
            raise DriverError("the driver is not started")
        if process.returncode is not None or self.problem is not None:
            raise DriverError(self.problem or f"the driver exited ({process.returncode})")
        try:
            process.stdin.write(json.dumps(command).encode() + b"\n")
            await asyncio.wait_for(process.stdin.drain(), 5.0)
        except (OSError, TimeoutError) as error:
            reason = "does not read its input" if isinstance(error, TimeoutError) else \
                "closed its input"
            raise DriverError(f"the driver {reason} (command {command.get('op')!r})"
                              ) from None

    async def next_event(self, within: float) -> dict[str, Any] | None:
        """The next event, or None when none came within `within` seconds; DriverError once
        the driver has exited or broken the contract and every event before is taken."""
        if self._unread:
            return self._unread.popleft()
        if self.events.empty() and self.problem is not None:
            raise DriverError(self.problem)
        getting = asyncio.ensure_future(self.events.get())
        ended = asyncio.ensure_future(self._ended.wait())
        try:
            await asyncio.wait({getting, ended}, timeout=within,
                               return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # cancelled (a step waiting for a connection and an event at once) just as the
            # event came: keep it for the next wait rather than lose it
            if getting.done() and not getting.cancelled():
                self._unread.append(getting.result())
            raise
        finally:
            ended.cancel()
            if not getting.done():
                getting.cancel()
        if getting.done() and not getting.cancelled():
            return getting.result()
        if self._ended.is_set() and self.events.empty():
            raise DriverError(self.problem or "the driver stopped")
        return None

    def stderr_tail(self) -> str:
        text = b"".join(self.stderr).decode("utf-8", "replace").strip()
        return " | ".join(line for line in text.splitlines()[-3:] if line.strip())[-300:]

    async def _read_events(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        out = self.process.stdout
        try:
            while True:
                try:
                    line = await out.readline()
                except ValueError:  # asyncio's LimitOverrunError, as readline raises it
                    self._end(f"the driver printed a line over {MAX_LINE} octets")
                    return
                if not line:
                    code = await self.process.wait()
                    tail = self.stderr_tail()
                    self._end(f"the driver exited ({code})" + (f": {tail}" if tail else ""))
                    return
                if not line.strip():
                    continue
                event = _event(line)
                if isinstance(event, str):
                    self._end(event)
                    return
                await self.events.put(event)  # a full queue: the driver waits on its pipe
        except asyncio.CancelledError:
            raise

    def _end(self, problem: str) -> None:
        if self.problem is None:
            self.problem = problem
        self._ended.set()

    async def _drain(self) -> None:
        """Keep the tail of standard error: a chatty driver never fills memory, and never
        blocks on a full pipe."""
        assert self.process is not None and self.process.stderr is not None
        while chunk := await self.process.stderr.read(4096):
            self.stderr.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size > MAX_STDERR and len(self.stderr) > 1:
                self._stderr_size -= len(self.stderr.popleft())

    async def stop(self) -> None:
        """Ask the driver to exit, then kill it if it does not: it never outlives its case."""
        process = self.process
        if process is None:
            return
        if process.returncode is None and process.stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):
                process.stdin.write(b'{"op": "exit"}\n')
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), EXIT_WITHIN)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _event(line: bytes) -> dict[str, Any] | str:
    """The event a line holds, or why it is not one."""
    shown = line.strip()[:60].decode("utf-8", "replace")
    try:
        event = json.loads(line)
    except ValueError:
        return f"the driver printed a line that is not JSON: {shown!r}"
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        return f"the driver printed JSON that is not an event object: {shown!r}"
    fields = EVENTS.get(event["event"])
    if fields is None:
        return f"the driver reported an unknown event {event['event'][:40]!r}"
    missing = [f for f in fields if f not in event]
    if missing:
        return f"the driver's {event['event']!r} event lacks {', '.join(missing)}"
    return event
