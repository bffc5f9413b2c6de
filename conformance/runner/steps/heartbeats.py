"""The heart-beat steps: watch the broker's heart-beats, or send the client's and see the
connection kept, at an interval the case names or the one the CONNECT and CONNECTED
negotiated."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from conformance.codec import Heartbeat
from conformance.runner.case_run import CaseRun
from conformance.runner.judge import StepFailed, broken
from conformance.runner.results import Outcome
from conformance.wire.connection import Connection, Received
from conformance.wire.transcript import Transcript

#: The longest a heart-beat step watches or sends (seconds), whatever was negotiated.
MAX_HEARTBEAT_WINDOW = 15.0
#: How often (seconds) `watch` sees how late its own timer fires: data is stamped when the
#: harness reads it, so a harness running late (a loaded machine) lengthens the silences it
#: measures by as much, which no peer is blamed for.
TICK = 0.01


def negotiated(run: CaseRun, conn: Connection, sender: str) -> int | None:
    """The interval (ms) the spec's negotiation gives `sender`'s heart-beats: the broker's
    MAX(sx, cy), the client's MAX(cx, sy); 0 when there are none ("if <cx> is 0 ... or
    <sy> is 0 ... then there will be none"). Grades the case informational and gives None
    when there is nothing to check."""
    cx, cy = conn.heart_beat
    server = conn.server_heart_beat
    if server is None:
        raise StepFailed("a CONNECTED heart-beat header of two integers",
                         "a malformed heart-beat header")
    sx, sy = server
    mine, theirs, who = (sx, cy, "broker") if sender == "broker" else (cx, sy, "client")
    if not (mine and theirs):
        run.grade(Outcome.INFORMATIONAL, f"no {who} heart-beats to check: CONNECT offered "
                  f"heart-beat:{cx},{cy} and CONNECTED heart-beat:{sx},{sy}")
        return None
    return max(mine, theirs)


def interval(run: CaseRun, conn: Connection, args: dict[str, Any], sender: str) -> float | None:
    """A heart-beat step's `every`, in seconds (`negotiated`: `sender`'s interval); None,
    graded informational, when there are no heart-beats to check."""
    every_ms = negotiated(run, conn, sender) if args["every"] == "negotiated" else args["every"]
    return None if every_ms is None else every_ms / 1000


def heartbeat_window(run: CaseRun, args: dict[str, Any], every: float) -> float | None:
    """How long a heart-beat step runs: `within` seconds, or `intervals` of `every`
    seconds, at most MAX_HEARTBEAT_WINDOW; None (graded informational) when an interval
    is too long to see even one pass in that time."""
    window = args.get("within") or every * args.get("intervals", 3)
    if every * args.get("tolerance", 1.5) >= MAX_HEARTBEAT_WINDOW:
        run.grade(Outcome.INFORMATIONAL, f"heart-beats every {every * 1000:g} ms: too slow "
                  f"to check within {MAX_HEARTBEAT_WINDOW:g} s")
        return None
    return float(min(window, MAX_HEARTBEAT_WINDOW))


async def watch(conn: Connection, transcript: Transcript, clock: Callable[[], float],
                window: float) -> tuple[int, float, float]:
    """Watch `conn` for `window` seconds: the heart-beat EOLs that came (taken from its
    queue; frames stay there), the longest silence between arrivals of any data, from the
    transcript's timestamps (the whole window when nothing came), and the most the harness
    itself ran late meanwhile (its timer's worst lateness: a silence it measured may be
    that much longer than the peer's). EOLs queued before the window are dropped
    uncounted: they came before it, most often as the EOLs a peer may write after a
    frame's NUL (frame = ... NULL *( EOL ))."""
    _take_heartbeats(conn)
    start = clock()
    stop, late = time.monotonic() + window, 0.0
    while (left := stop - time.monotonic()) > 0:
        due = time.monotonic() + min(TICK, left)
        await asyncio.sleep(min(TICK, left))
        late = max(late, time.monotonic() - due)
    end = clock()
    arrivals = [r.t for r in transcript.records()
                if r.conn == conn.name and r.direction == "in" and start <= r.t <= end]
    beats = _take_heartbeats(conn)
    points = [start, *arrivals, end]
    return beats, max(b - a for a, b in zip(points, points[1:], strict=False)), late


def silence_seen(silence: float, late: float) -> str:
    """The longest silence, and what of it may be the harness's own lateness."""
    return f"the longest silence {silence * 1000:.0f} ms" + (
        f" (the harness itself up to {late * 1000:.0f} ms late)" if late >= 0.005 else "")


def _take_heartbeats(conn: Connection) -> int:
    """Take the heart-beat EOLs out of `conn`'s queue, leaving its frames in order; how many."""
    kept: list[Received] = []
    beats = 0
    while conn.queue:
        event = conn.queue.popleft()
        if isinstance(event, Heartbeat):
            beats += 1
        else:
            kept.append(event)
    conn.queue.extendleft(reversed(kept))
    return beats


async def step_expect_heartbeats(run: CaseRun, args: dict[str, Any]) -> None:
    """Watch the connection for a while and judge the gaps between the data that arrived
    (any data counts: "any new data received ... is an indication that the remote end is
    alive"), from the transcript's timestamps. `every: negotiated` takes the interval
    from the CONNECT and CONNECTED of the connection."""
    conn = run.conn(args)
    every = interval(run, conn, args, "broker")
    tolerance = args.get("tolerance", 1.5)
    window = None if every is None else heartbeat_window(run, args, every)
    if every is None or window is None:
        return
    beats, silence, late = await watch(conn, run.transcript, run.clock, window)
    if args.get("none"):
        if beats:
            raise StepFailed(f"no heart-beat for {window:g} s", f"{beats} heart-beat EOLs")
        return
    if not beats or silence - late > every * tolerance:
        raise StepFailed(f"data at least every {every * 1000:g} ms (x{tolerance:g} tolerance) "
                         f"for {window:g} s",
                         f"{beats} heart-beat EOLs, {silence_seen(silence, late)}"
                         + (f", {conn.closed.reason}" if conn.closed else ""))


async def step_send_heartbeats(run: CaseRun, args: dict[str, Any]) -> None:
    """Send an EOL every `every` ms (`negotiated`: the client's MAX(cx, sy)); the broker
    must keep the connection. A close after less silence than the interval breaks the
    negotiated window; a close after about one interval, the tolerance it SHOULD allow."""
    conn = run.conn(args)
    every = interval(run, conn, args, "client")
    window = None if every is None else heartbeat_window(run, {**args, "tolerance": 1}, every)
    if every is None or window is None:
        return
    every_ms = every * 1000
    eol = b"\r\n" if args.get("eol") == "CRLF" else b"\n"
    stop = time.monotonic() + window
    sent: list[float] = []
    while time.monotonic() < stop and conn.closed is None:
        sent.append(run.clock())
        await conn.send(eol)
        await asyncio.sleep(every)
    if conn.closed is None:
        return
    # what the broker had surely read before it closed: EOLs sent well before the close
    # was seen (one sent just before may have crossed it)
    before = [t for t in sent if t < conn.closed.at - 0.05]
    silence = (conn.closed.at - before[-1]) * 1000 if before else every_ms
    raise StepFailed(f"the connection kept while an EOL comes every {every_ms:g} ms",
                     f"the broker closed it {silence:.0f} ms after an EOL "
                     f"({conn.closed.reason})",
                     grade=broken("heart-beating.negotiated-interval")
                     if silence < every_ms * 0.9 else broken("heart-beating.tolerance"))
