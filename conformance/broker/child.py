"""The reference broker in a child process: what `fuzz` and `replay` target when no --broker
is given. The fuzzer and the broker then run on two cores (one process would hold both on
one), and a broker that hangs or dies cannot take the fuzzer's findings with it. The child
is told to stop when its standard input closes, so it ends with its parent even when the
parent is killed with SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import conformance

#: How long the child may take to listen (imports on a busy machine), and to stop.
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
_LISTENING = re.compile(rb"listening on 127\.0\.0\.1:(\d+)(?: and (ws://\S+))?")


class ChildBrokerError(Exception):
    """The child broker did not start (one line)."""


async def _discard(stream: asyncio.StreamReader) -> None:
    """Read the child's stderr to its end, so that it never blocks on a full pipe."""
    while await stream.read(65536):
        pass


@contextlib.asynccontextmanager
async def reference_process(faults: Sequence[str] = (), *,
                            websocket: bool = False) -> AsyncIterator[str]:
    """The reference broker (with `faults`) listening on a free 127.0.0.1 port, for the
    duration of the block; yields its address, 127.0.0.1:PORT, or with `websocket` the
    ws://127.0.0.1:PORT/ws of the WebSocket port it serves on a second free port."""
    # This process's package, not whatever `conformance` the working directory holds (-P).
    home = str(Path(conformance.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (home, os.environ.get("PYTHONPATH")) if p)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-P", "-m", "conformance", "broker", "--host", "127.0.0.1", "--port",
        "0", *(("--ws-port", "0") if websocket else ()), "--until-stdin-closes",
        *(arg for fault in faults for arg in ("--fault", fault)),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": path})
    assert process.stdin is not None and process.stderr is not None
    draining: asyncio.Task[None] | None = None
    try:
        try:
            line = await asyncio.wait_for(process.stderr.readline(), START_TIMEOUT)
        except TimeoutError:
            raise ChildBrokerError(f"the reference broker did not listen within "
                                   f"{START_TIMEOUT:g} s") from None
        found = _LISTENING.search(line)
        if found is not None and websocket and found.group(2) is None:  # up, and still running
            raise ChildBrokerError("the reference broker did not serve WebSocket: " +
                                   line.decode(errors="replace").strip())
        if found is None:
            said = (line + await process.stderr.read(2000)).decode(errors="replace").strip()
            raise ChildBrokerError("the reference broker did not start: " +
                                   (said.splitlines()[-1] if said else "no output"))
        draining = asyncio.create_task(_discard(process.stderr))
        yield (found.group(2) if websocket else b"127.0.0.1:" + found.group(1)).decode()
    finally:
        process.stdin.close()  # the child stops on its own; a signal if it does not
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGKILL)
            await process.wait()
        if draining is not None:
            await draining
