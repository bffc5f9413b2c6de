"""The step interpreters: one coroutine per step kind of the case format. A step that is
not met raises `StepFailed` with what was expected and what the broker did."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conformance.codec import Frame, Heartbeat, encode_raw, escape, validate_server_frame
from conformance.runner.results import Outcome
from conformance.spec.grammar import (
    HEART_BEAT,
    UNESCAPED_COMMANDS,
    VERSIONS,
    parse_accept_version,
)
from conformance.wire.connection import Closed, Connection, Event
from conformance.wire.handshake import connect_headers

if TYPE_CHECKING:
    from conformance.runner.engine import CaseRun

#: How long an expectation waits when the case does not say.
DEFAULT_WITHIN = 5.0
VARIABLE = re.compile(r"\$\{([^}]*)\}")


class StepFailed(Exception):
    """An expectation not met: graded by the case's level (or the alternative's grade)."""

    def __init__(self, expected: str, observed: str, *, grade: Outcome | None = None) -> None:
        super().__init__(f"expected {expected}; observed {observed}")
        self.expected, self.observed, self.grade = expected, observed, grade


class CaseError(Exception):
    """The case itself cannot go on (a connection it names was never opened...)."""


class SetupRefused(CaseError):
    """A CONNECT the case needs only to get a session was not answered with CONNECTED:
    the broker's settings (credentials, virtual host) are the likely cause, not the
    statement the case checks."""

    def __init__(self, message: str, observed: str) -> None:
        super().__init__(message)
        self.observed = observed


def describe(event: Event | None, within: float) -> str:
    if event is None:
        return f"nothing within {within:g} s"
    if isinstance(event, Closed):
        return f"connection closed ({event.reason})"
    if isinstance(event, Heartbeat):
        return "a heart-beat EOL"
    headers = ", ".join(f"{k[:40]}:{v[:200]}" for k, v in event.headers[:8])
    body = event.body[:60].decode("utf-8", "replace")
    command = event.command if event.command.isalpha() else repr(event.command[:40])
    return f"{command[:40]} frame [{headers}]" + (f" body {body!r}" if event.body else "")


def brief(event: Event | None) -> str:
    """What arrived, in a few words: the command and any ERROR message, or the close."""
    if event is None:
        return "nothing"
    if isinstance(event, Closed):
        return f"a close ({event.reason})"
    if isinstance(event, Frame):
        message = event.get("message")
        return event.command + (f" ({' '.join(message.split())[:80]})" if message else "")
    return "a heart-beat"


# -- matching ------------------------------------------------------------------------------

def _matches(matcher: Any, value: str | None, run: CaseRun) -> bool:
    if not isinstance(matcher, dict):
        return value == run.substitute(str(matcher))
    if "absent" in matcher:
        return value is None
    if "present" in matcher:
        return (value is not None) == bool(matcher["present"])
    if value is None:
        return "if_present" in matcher
    if "if_present" in matcher:
        matcher = {"regex": matcher["if_present"]}
    if "equals" in matcher:
        return value == run.substitute(str(matcher["equals"]))
    if "regex" in matcher:  # captured values are matched literally
        pattern = run.substitute(matcher["regex"], quote=re.escape)
        return re.fullmatch(pattern, value, re.DOTALL) is not None
    low, high = matcher["range"]
    return value.isascii() and value.isdigit() and low <= int(value) <= high


def _show(matcher: Any) -> str:
    if not isinstance(matcher, dict):
        return repr(str(matcher))
    ((kind, value),) = matcher.items()
    return f"{kind} {value!r}" if kind not in ("absent",) else "absent"


def frame_mismatch(frame: Frame, args: dict[str, Any], run: CaseRun) -> str | None:
    """Why `frame` does not meet `args` (command, headers, body), or None if it does."""
    command = args.get("command")
    if command is not None and frame.command != command:
        return f"command {command}"
    for name, matcher in (args.get("headers") or {}).items():
        if not _matches(matcher, frame.get(name), run):
            return f"header {name} {_show(matcher)}"
    if "body" in args:  # an empty body counts as absent
        body = frame.body.decode("utf-8", "replace") if frame.body else None
        if not _matches(args["body"], body, run):
            return f"body {_show(args['body'])}"
    return None


def expectation(args: dict[str, Any], run: CaseRun) -> str:
    parts = [args.get("command", "any frame")]
    parts += [f"{n} {_show(m)}" for n, m in (args.get("headers") or {}).items()]
    if "body" in args:
        parts.append(f"body {_show(args['body'])}")
    return run.substitute(" ".join(parts))


def capture(frame: Frame, args: dict[str, Any], run: CaseRun) -> None:
    for variable, source in (args.get("capture") or {}).items():
        value = frame.body.decode("utf-8", "replace") if source == "body" else frame.get(source)
        if value is None:
            raise StepFailed(f"a {source!r} header to capture", describe(frame, 0))
        run.variables[variable] = value


# -- the steps -----------------------------------------------------------------------------

async def step_open(run: CaseRun, args: dict[str, Any]) -> None:
    await run.open(args.get("conn", "main"))


def heart_beat_pair(value: str | None) -> tuple[int, int] | None:
    """A heart-beat header's two intervals: a missing header means 0,0
    (heart-beating.missing-header); None when it is not two integers."""
    if value is None:
        return 0, 0
    match = HEART_BEAT.match(value)
    return (int(match.group(1)), int(match.group(2))) if match else None


def refusal(run: CaseRun, conn: Connection, event: Event | None) -> bool:
    """The broker turned the session down rather than broke a rule answering it: an
    ERROR, no answer at all, or a close before it sent anything."""
    if isinstance(event, Closed):
        return not any(r.conn == conn.name and r.direction == "in"
                       for r in run.transcript.records())
    return event is None or isinstance(event, Frame) and event.command == "ERROR"


async def step_connect(run: CaseRun, args: dict[str, Any]) -> None:
    name = args.get("conn", "main")
    conn = run.connections.get(name) or await run.open(name)
    headers = connect_headers(run.target, run.version, heart_beat=None,
                              given=run.headers(args.get("headers")))
    accept = next((v for k, v in headers if k == "accept-version"), None)
    conn.offered = list(parse_accept_version(accept))
    conn.heart_beat = heart_beat_pair(
        next((v for k, v in headers if k == "heart-beat"), None)) or (0, 0)
    await conn.send(encode_raw(args.get("command", "CONNECT"), headers))
    if args.get("expect", "CONNECTED") == "nothing":
        return
    event = await conn.next_event(DEFAULT_WITHIN)
    if not isinstance(event, Frame) or event.command != "CONNECTED":
        if "headers" not in args and "command" not in args and refusal(run, conn, event):
            observed = describe(event, DEFAULT_WITHIN)
            if event is None:
                raise SetupRefused("the broker accepted the connection but never answered "
                                   f"CONNECT within {DEFAULT_WITHIN:g} s", observed)
            raise SetupRefused(f"a CONNECT with the run's settings got {brief(event)}",
                               observed)
        raise StepFailed("CONNECTED", describe(event, DEFAULT_WITHIN))
    run.judge(conn, event)
    chosen = event.get("version") or "1.0"
    if chosen in VERSIONS:
        conn.set_version(chosen)


async def step_send(run: CaseRun, args: dict[str, Any]) -> None:
    conn = run.conn(args)
    command = args["command"]
    headers = run.headers(args.get("headers"))
    body = run.substitute(args.get("body", "")).encode()
    if command not in UNESCAPED_COMMANDS:  # valid or not, headers are escaped per version
        headers = [(escape(k, conn.version), escape(v, conn.version))  # type: ignore[arg-type]
                   for k, v in headers]
    length = len(body) if args.get("content_length", bool(body)) else None
    if command == "SUBSCRIBE":
        values = dict(reversed(headers))
        conn.ack_modes[values.get("id", "")] = values.get("ack", "auto")
    await conn.send(encode_raw(command, headers, body, content_length=length))


async def step_raw(run: CaseRun, args: dict[str, Any]) -> None:
    data = run.substitute(args.get("data", "")).encode()
    data += bytes.fromhex(args.get("hex", ""))
    data *= args.get("repeat", 1)
    delivery = args.get("delivery", "whole")
    chunk = 1 if delivery == "bytewise" else args.get("chunk", 1) if delivery == "chunked" else 0
    await run.conn(args).send(data, chunk=chunk, pause=args.get("pause", 0.0))


async def step_expect(run: CaseRun, args: dict[str, Any]) -> None:
    conn = run.conn(args)
    within = args.get("within", DEFAULT_WITHIN)
    event = await conn.next_event(within)
    if isinstance(event, Frame):
        run.judge(conn, event)
        if frame_mismatch(event, args, run) is None:
            capture(event, args, run)
            return
    raise StepFailed(expectation(args, run), describe(event, within))


async def step_expect_none(run: CaseRun, args: dict[str, Any]) -> None:
    conn = run.conn(args)
    within = args.get("within", 1.0)
    event = await conn.next_event(within)
    if event is not None:
        if isinstance(event, Frame):
            run.judge(conn, event)
        raise StepFailed(f"no frame for {within:g} s", describe(event, within))


async def step_expect_error_close(run: CaseRun, args: dict[str, Any]) -> None:
    """ERROR, then the connection closed with nothing but heart-beats after it."""
    conn = run.conn(args)
    within = args.get("within", DEFAULT_WITHIN)
    event = await conn.next_event(within)
    wanted = {**args, "command": "ERROR"}
    if not isinstance(event, Frame) or event.command != "ERROR":
        raise StepFailed(f"ERROR then close ({expectation(wanted, run)})",
                         describe(event, within))
    run.judge(conn, event)
    if frame_mismatch(event, wanted, run) is not None:
        raise StepFailed(expectation(wanted, run), describe(event, within))
    capture(event, args, run)
    after = await conn.next_event(within)
    if not isinstance(after, Closed):
        raise StepFailed(f"the connection closed within {within:g} s after ERROR",
                         describe(after, within) + " after the ERROR",
                         grade=run.grade_of("error.close-after"))


async def step_expect_close(run: CaseRun, args: dict[str, Any]) -> None:
    conn = run.conn(args)
    within = args.get("within", DEFAULT_WITHIN)
    event = await conn.next_event(within)
    if not isinstance(event, Closed):
        if isinstance(event, Frame):
            run.judge(conn, event)
        raise StepFailed(f"the connection closed within {within:g} s", describe(event, within))


async def step_expect_any(run: CaseRun, alternatives: list[dict[str, Any]]) -> None:
    """The first alternative the broker's behaviour meets decides the grade."""
    expectations = [a[k] or {} for a in alternatives for k in a if k.startswith("expect")]
    conn = run.conn(next((e for e in expectations if "conn" in e), {}))
    within = max(e.get("within", DEFAULT_WITHIN) for e in expectations)
    event = await conn.next_event(within)
    if isinstance(event, Frame):
        run.judge(conn, event)
    after: Event | None = None
    if isinstance(event, Frame) and event.command == "ERROR":
        after = await conn.next_event(within)
    for alternative in alternatives:
        if _alternative_met(alternative, event, after, run):
            run.grade(Outcome(alternative["grade"]), alternative.get("note", ""))
            if isinstance(event, Frame):
                for key in ("expect", "expect_error_close"):
                    if key in alternative:
                        capture(event, alternative[key], run)
            return
    if after is not None and not isinstance(after, Closed):
        conn.queue.appendleft(after)
    wanted = " | ".join(_describe_alternative(a, run) for a in alternatives)
    raise StepFailed(f"one of: {wanted}", describe(event, within))


def _alternative_met(alternative: dict[str, Any], event: Event | None, after: Event | None,
                     run: CaseRun) -> bool:
    if "expect" in alternative:
        return isinstance(event, Frame) and frame_mismatch(event, alternative["expect"], run) \
            is None
    if "expect_error_close" in alternative:
        wanted = {**alternative["expect_error_close"], "command": "ERROR"}
        return (isinstance(event, Frame) and frame_mismatch(event, wanted, run) is None
                and isinstance(after, Closed))
    if "expect_close" in alternative:
        return isinstance(event, Closed)
    return event is None  # expect_none


def _describe_alternative(alternative: dict[str, Any], run: CaseRun) -> str:
    if "expect" in alternative:
        return expectation(alternative["expect"], run)
    if "expect_error_close" in alternative:
        return expectation({**alternative["expect_error_close"], "command": "ERROR"}, run) + \
            " then close"
    return "close" if "expect_close" in alternative else "nothing"


#: The longest a heart-beat step watches or sends (seconds), whatever was negotiated.
MAX_HEARTBEAT_WINDOW = 15.0


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
    start = run.clock()
    await asyncio.sleep(window)
    end = run.clock()
    arrivals = [r.t for r in run.transcript.records()
                if r.conn == conn.name and r.direction == "in" and start <= r.t <= end]
    kept: list[Event] = []
    beats = 0
    while conn.queue:
        event = conn.queue.popleft()
        if isinstance(event, Heartbeat):
            beats += 1
        else:
            kept.append(event)
    conn.queue.extendleft(reversed(kept))
    if args.get("none"):
        if beats:
            raise StepFailed(f"no heart-beat for {window:g} s", f"{beats} heart-beat EOLs")
        return
    points = [start, *arrivals, end]
    silence = max(b - a for a, b in zip(points, points[1:], strict=False))
    if not beats or silence > every * tolerance:
        raise StepFailed(f"data at least every {every * 1000:g} ms (x{tolerance:g} tolerance) "
                         f"for {window:g} s",
                         f"{beats} heart-beat EOLs, the longest silence {silence * 1000:.0f} ms"
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
                     grade=run.grade_of("heart-beating.negotiated-interval")
                     if silence < every_ms * 0.9 else run.grade_of("heart-beating.tolerance"))


def _probe_frame(what: str, size: int, destination: str, receipt: str) -> bytes:
    headers: list[tuple[str, str] | bytes] = [("destination", destination), ("receipt", receipt)]
    body = b""
    if what == "headers":
        headers += [(f"x-{i}", "v") for i in range(size)]
    elif what == "header-line":
        headers.append(("x-long", "v" * size))
    else:
        body = b"b" * size
    return encode_raw("SEND", headers, body, content_length=len(body) if body else None)


async def step_probe_limit(run: CaseRun, args: dict[str, Any]) -> None:
    """Grow one dimension of a SEND until the broker refuses it, then bisect to within a
    tenth: ERROR then close is the expected refusal ("If these limits are exceeded the
    server SHOULD send the client an ERROR frame and then close the connection")."""
    what, within = args["what"], args.get("within", DEFAULT_WITHIN)
    size, top = args.get("start", 64), args.get("max", 4 << 20)
    unit = "headers" if what == "headers" else "octets"
    accepted, refused, how = 0, 0, ""  # the largest accepted, the smallest refused
    for probe in itertools.count(1):
        # to a topic nobody subscribes to: accepted probes are dropped, not left queued
        refusal = await _probe(run, f"probe-{what}-{probe}", _probe_frame(
            what, size, run.variables["topic"], f"p{probe}"), f"{size} {unit}", within)
        if refusal is None:
            accepted = size
        else:
            refused, how = size, refusal
        if not refused:
            if size >= top:
                run.grade(Outcome.INFORMATIONAL, f"{what}: accepted up to {size} {unit}, "
                          "no limit found")
                return
            size = min(size * 2, top)
        elif refused - accepted <= max(accepted // 10, 1):
            break
        else:
            size = (accepted + refused) // 2
    grade = Outcome.PASSED if how == "ERROR then close" else Outcome.NON_STRICT
    run.grade(grade, f"{what} limit: {accepted} {unit} accepted, {refused} refused with {how}")


async def _probe(run: CaseRun, name: str, data: bytes, what: str, within: float) -> str | None:
    """Send one probe on a fresh connection: None if accepted, else how it was refused."""
    conn = await run.open(name)
    await step_connect(run, {"conn": name})
    try:  # a broker that reads megabytes slowly must not hold the case past its timeout
        async with asyncio.timeout(within):
            await conn.send(data)
    except TimeoutError:
        await conn.close(abort=True)
        raise StepFailed(f"a RECEIPT, or ERROR then close, for a SEND with {what}",
                         f"the broker had not read the frame within {within:g} s") from None
    event = await conn.next_event(within)
    after = await conn.next_event(within) if isinstance(event, Frame) and \
        event.command == "ERROR" else None
    if isinstance(event, Frame):
        run.judge(conn, event)
    await conn.close()
    if isinstance(event, Frame) and event.command == "RECEIPT":
        return None
    if isinstance(event, Frame) and event.command == "ERROR":
        return "ERROR then close" if isinstance(after, Closed) else \
            "ERROR, the connection left open"
    if isinstance(event, Closed):
        return f"a close without ERROR ({event.reason})"
    raise StepFailed(f"a RECEIPT, or ERROR then close, for a SEND with {what}",
                     describe(event, within))


async def step_close(run: CaseRun, args: dict[str, Any]) -> None:
    name = args.get("conn", "main")
    conn = run.connections.get(name)
    if conn is not None:
        await conn.close(abort=args.get("abort", False))


async def step_sleep(run: CaseRun, seconds: float) -> None:
    await asyncio.sleep(seconds)


STEPS: dict[str, Callable[[CaseRun, Any], Awaitable[None]]] = {
    "open": step_open, "connect": step_connect, "send": step_send, "raw": step_raw,
    "expect": step_expect, "expect_any": step_expect_any, "expect_none": step_expect_none,
    "expect_error_close": step_expect_error_close, "expect_close": step_expect_close,
    "expect_heartbeats": step_expect_heartbeats, "send_heartbeats": step_send_heartbeats,
    "probe_limit": step_probe_limit,
    "close": step_close, "sleep": step_sleep,
}


@dataclass
class Judged:
    """What the validator found in a frame the case received."""

    statement: str
    text: str


def violations(conn: Connection, frame: Frame) -> list[Judged]:
    found = list(frame.violations)
    found += validate_server_frame(frame, version=conn.version,  # type: ignore[arg-type]
                                   ack_modes=conn.ack_modes, offered=conn.offered)
    return [Judged(v.statement, f"{conn.name}: {v}") for v in found]
