"""The client case's steps: one coroutine per step kind of client-case.schema.json. The
case plays the broker: it commands the driver, accepts the client's connection, answers
its CONNECT as the reference broker does, expects its frames, writes frames and octets to
it, and reads what the library reported through the driver. A step not met raises
StepFailed with what was expected and what the client did."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable, Callable
from typing import Any

from conformance.broker.config import BrokerConfig
from conformance.broker.connect import answer, mend
from conformance.broker.faults import Faults
from conformance.broker.outgoing import error_frame, frame_bytes
from conformance.clients.run import ClientRun, event_body, event_headers
from conformance.codec import Frame, LocalProtocolError, encode
from conformance.runner.case_run import CaseDecided, CaseError, heart_beat_pair
from conformance.runner.judge import StepFailed, broken
from conformance.runner.results import Outcome
from conformance.runner.steps.expectations import (
    DEFAULT_WITHIN,
    capture,
    expectation,
    frame_mismatch,
    matches,
    show_matcher,
)
from conformance.runner.steps.heartbeats import silence_seen, watch
from conformance.spec import rule_of
from conformance.wire.connection import Closed, Received, describe
from conformance.wire.websocket import WebSocketTransport

#: How long a driver command may take when a step waits for it.
COMMAND_WITHIN = 10.0
#: The longest a heart-beat step watches (seconds), whatever was negotiated.
MAX_HEARTBEAT_WINDOW = 10.0
NO_FAULTS = Faults()


async def step_driver(run: ClientRun, args: dict[str, Any]) -> None:
    """A command to the driver, its strings substituted; with `wait`, until it is done."""
    command: dict[str, Any] = {}
    for key, value in args.items():
        if key in ("wait", "within"):
            continue
        if key == "headers":
            command["headers"] = dict(run.headers(value))
        elif key == "body_hex":
            command["body_b64"] = base64.b64encode(bytes.fromhex(value)).decode()
        elif key == "body":
            body = run.substitute(value).encode("utf-8", "surrogatepass")
            if b"\0" in body:  # a NUL body goes as octets, as any driver can read them
                command["body_b64"] = base64.b64encode(body).decode()
            else:
                command["body"] = body.decode()
        else:
            command[key] = run.substitute(value) if isinstance(value, str) else value
    await run.command(command)
    if not args.get("wait"):
        return
    within = args.get("within", COMMAND_WITHIN)
    while True:
        event = await run.next_event(within, done=True)
        if event is None:
            raise CaseError(f"the driver did not finish {args['op']!r} within {within:g} s "
                            "(it hangs?)")
        if event["event"] in ("done", "failed") and event.get("op") == args["op"]:
            if event["event"] == "failed":
                raise StepFailed(f"the library to do {args['op']!r}",
                                 f"it failed: {str(event.get('error'))[:200]}")
            return
        run.pending.append(event)  # reported while the command ran: for later steps


async def step_accept(run: ClientRun, args: dict[str, Any] | None) -> None:
    await run.accept((args or {}).get("within", DEFAULT_WITHIN))


async def step_handshake(run: ClientRun, args: dict[str, Any] | None) -> None:
    """Accept the client, take its CONNECT (or STOMP) and answer it as the reference broker
    does: the case's version only, and CONNECTED's heart-beat the case names (0,0 by
    default; `none`: no heart-beat header)."""
    args = args or {}
    within = args.get("within", DEFAULT_WITHIN)
    offered = args.get("heart_beat", "0,0")
    conn = await run.accept(within)
    event = await run.next_frame(within)
    wanted = {"command": "CONNECT", **(args.get("expect") or {})}
    if not isinstance(event, Frame) or event.command not in ("CONNECT", "STOMP"):
        raise StepFailed("CONNECT or STOMP", describe(event, within))
    if frame_mismatch(event, {**wanted, "command": event.command}, run) is not None:
        raise StepFailed(expectation(wanted, run), describe(event, within))
    capture(event, wanted, run)
    offer = heart_beat_pair(event.get("heart-beat"))
    run.client_heart_beat = offer or (0, 0)
    sx, sy = heart_beat_pair(offered) or (0, 0)  # `none`: no header, as 0,0
    config = BrokerConfig(versions=(run.version,), heartbeat=(sx, sy))
    # over WebSocket, the versions the client's subprotocols named bound the session's
    bound = conn.transport.versions if isinstance(conn.transport, WebSocketTransport) else None
    session = f"session-{run.variables['id']}"
    said = answer(config, NO_FAULTS, event, session, bound)
    mended = mend(event, said.breaks)
    if mended is not None and not _checks(run, said.breaks):
        # a case about another rule: one defect of the handshake must not hide the rest
        run.lenient = f"lenient handshake: the CONNECT breaks {said.breaks} " \
            f"({said.refused}), served anyway"
        rule = rule_of(said.breaks)
        run.found[:] = [j for j in run.found if rule_of(j.statement) != rule]
        said = answer(config, NO_FAULTS, mended, session, bound)
    if said.version is not None:
        conn.set_version(said.version)
    if said.refused:
        await conn.send(frame_bytes(error_frame(said.refused, event, "", NO_FAULTS),
                                    conn.version, NO_FAULTS))
        raise StepFailed(f"a CONNECT a STOMP {run.version} broker serves",
                         f"one it refuses: {said.refused}",
                         statements=(said.breaks,) if said.breaks else ())
    eol = b"\r\n" if args.get("eol") == "CRLF" else b"\n"
    for frame in said.frames:
        if offered == "none":
            frame = frame.replace(headers=[h for h in frame.headers if h[0] != "heart-beat"])
        await conn.send(frame_bytes(frame, conn.version, NO_FAULTS) if eol == b"\n" else
                        encode(frame, version=conn.version, eol=eol))  # type: ignore[arg-type]
    if not said.connected:
        raise StepFailed(f"a CONNECT offering STOMP {run.version}",
                         f"accept-version {event.get('accept-version')!r}")
    run.server_heart_beat = (sx, sy) if conn.version != "1.0" else (0, 0)
    if event.command == "STOMP" and "stomp" in args:  # served, graded as the case says
        run.grade(Outcome(args["stomp"]), "the client connected with STOMP, not CONNECT")


def _checks(run: ClientRun, statement: str) -> bool:
    """Whether the case checks `statement`'s rule (at any version's wording)."""
    rule = rule_of(statement)
    return any(rule_of(s) == rule for s in run.case.statements) or any(
        rule_of(s) == rule for step in run.case.steps for s in step.statements)


async def step_expect_frame(run: ClientRun, args: dict[str, Any]) -> None:
    within = args.get("within", DEFAULT_WITHIN)
    event = await run.next_frame(within)
    if isinstance(event, Frame) and frame_mismatch(event, args, run) is None:
        capture(event, args, run)
        return
    raise StepFailed(expectation(args, run), describe(event, within))


async def step_reply(run: ClientRun, args: dict[str, Any]) -> None:
    """A frame to the client, encoded for the session's version (headers escaped, except in
    CONNECTED), content-length added to a body unless the case says not."""
    conn = run.connection()
    body = bytes.fromhex(args["body_hex"]) if "body_hex" in args else \
        run.substitute(args.get("body", "")).encode("utf-8", "surrogatepass")
    frame = Frame(args["command"], run.headers(args.get("headers")), body)
    eol = b"\r\n" if args.get("eol") == "CRLF" else b"\n"
    try:
        data = encode(frame, version=conn.version, eol=eol,  # type: ignore[arg-type]
                      content_length=args.get("content_length"))
    except LocalProtocolError as error:
        raise CaseError(f"the reply cannot be written in STOMP {conn.version}: {error}"
                        ) from None
    await conn.send(data)


#: The pause between the octets of a `bytewise` raw step, so that each is a read of its own.
BYTEWISE_PAUSE = 0.003


async def step_raw(run: ClientRun, args: dict[str, Any]) -> None:
    """Octets to the client: in one write, or with `bytewise` one write per octet (over
    WebSocket, one message each), so that the frame is cut across reads at every offset."""
    data = run.substitute(args.get("data", "")).encode() + bytes.fromhex(args.get("hex", ""))
    if not args.get("bytewise"):
        await run.connection().send(data)
        return
    for octet in range(len(data)):
        await run.connection().send(data[octet:octet + 1])
        await asyncio.sleep(BYTEWISE_PAUSE)


def event_mismatch(event: dict[str, Any], args: dict[str, Any], run: ClientRun) -> str | None:
    """Why the driver's `event` does not meet `args`, or None if it does."""
    if event["event"] != args["event"]:
        return f"event {args['event']}"
    if "op" in args and event.get("op") != args["op"]:
        return f"op {args['op']}"
    headers = event_headers(event)
    for name, matcher in (args.get("headers") or {}).items():
        if not matches(matcher, headers.get(name), run):
            return f"header {name} {show_matcher(matcher)}"
    if "body_hex" in args and event_body(event) != bytes.fromhex(args["body_hex"]):
        return f"body (hex) {args['body_hex']}"
    if "body" in args:
        body = event_body(event)
        if not matches(args["body"], body.decode("utf-8", "replace") if body else None, run):
            return f"body {show_matcher(args['body'])}"
    if "id" in args and not matches(args["id"], _text(event.get("id")), run):
        return f"id {show_matcher(args['id'])}"
    return None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def describe_event(event: dict[str, Any] | None, within: float) -> str:
    if event is None:
        return f"no event within {within:g} s"
    shown = {k: v for k, v in event.items() if k != "body_b64"}
    if "body_b64" in event:
        body = event_body(event)[:60]
        shown["body"] = body.decode() if body.isascii() else body.hex()
    return f"{event['event']} event {str(shown)[:300]}"


def describe_wanted(args: dict[str, Any], run: ClientRun) -> str:
    parts = [f"a {args['event']} event"]
    parts += [f"{n} {show_matcher(m)}" for n, m in (args.get("headers") or {}).items()]
    parts += [f"{k} {show_matcher(args[k])}" for k in ("op", "body", "body_hex", "id")
              if k in args]
    return run.substitute(" ".join(parts))


def capture_event(event: dict[str, Any], args: dict[str, Any], run: ClientRun) -> None:
    headers = event_headers(event)
    for variable, source in (args.get("capture") or {}).items():
        value = (event_body(event).decode("utf-8", "replace") if source == "body"
                 else _text(event.get(source)) if source in ("n", "id") else headers.get(source))
        if value is None:
            raise StepFailed(f"a {source!r} to capture", describe_event(event, 0))
        run.variables[variable] = value


async def step_expect_event(run: ClientRun, args: dict[str, Any]) -> None:
    within = args.get("within", DEFAULT_WITHIN)
    if args["event"] == "done":
        event = await _done(run, args, within)
    else:
        event = await run.next_event(within)
    if event is not None and event_mismatch(event, args, run) is None:
        capture_event(event, args, run)
        return
    raise StepFailed(describe_wanted(args, run), describe_event(event, within))


async def _done(run: ClientRun, args: dict[str, Any], within: float) -> dict[str, Any] | None:
    """The `done` (or `failed`) of the op `args` names, passing over those of earlier
    commands; the other events reported meanwhile stay for the next steps."""
    deadline = time.monotonic() + within
    others: list[dict[str, Any]] = []
    try:
        while (event := await run.next_event(max(0.0, deadline - time.monotonic()),
                                             done=True)) is not None:
            if event["event"] not in ("done", "failed"):
                others.append(event)
            elif "op" not in args or event.get("op") == args["op"]:
                return event
        return None
    finally:
        run.pending[:0] = others


async def step_expect_any(run: ClientRun, alternatives: list[dict[str, Any]]) -> None:
    """The first alternative the client meets decides the grade. The alternatives look at
    the client's frames (expect_frame, expect_close) or at the driver's events
    (expect_event, expect_no_event), not both."""
    wanted = [a[k] or {} for a in alternatives for k in a if k.startswith("expect")]
    within = max(w.get("within", DEFAULT_WITHIN) for w in wanted)
    on_events = any("expect_event" in a or "expect_no_event" in a for a in alternatives)
    if on_events and any("expect_frame" in a or "expect_close" in a for a in alternatives):
        raise CaseError("expect_any mixes the client's frames and the driver's events")
    event: dict[str, Any] | None = None
    frame: Received | None = None
    if on_events:
        event = await run.next_event(within)
    else:
        frame = await run.next_frame(within)
    for alternative in alternatives:
        met = (("expect_event" in alternative and event is not None
                and event_mismatch(event, alternative["expect_event"], run) is None)
               or ("expect_no_event" in alternative and on_events and event is None)
               or ("expect_frame" in alternative and isinstance(frame, Frame)
                   and frame_mismatch(frame, alternative["expect_frame"], run) is None)
               or ("expect_close" in alternative and isinstance(frame, Closed)))
        if met:
            run.grade(Outcome(alternative["grade"]), alternative.get("note", ""))
            if event is not None and "expect_event" in alternative:
                capture_event(event, alternative["expect_event"], run)
            if isinstance(frame, Frame) and "expect_frame" in alternative:
                capture(frame, alternative["expect_frame"], run)
            return
    shown = [describe_wanted(a["expect_event"], run) if "expect_event" in a else
             expectation(a["expect_frame"], run) if "expect_frame" in a else
             "no event" if "expect_no_event" in a else "close" for a in alternatives]
    observed = describe_event(event, within) if on_events else describe(frame, within)
    raise StepFailed("one of: " + " | ".join(shown), observed)


async def step_expect_heartbeats(run: ClientRun, args: dict[str, Any] | None) -> None:
    """The client's heart-beats at the interval negotiated from its CONNECT and the
    CONNECTED the case sent: MAX(cx, sy), none when either is 0. Any data counts; the
    longest silence over the window must stay within the interval and its tolerance.
    With `none`, the case negotiated none: no heart-beat EOL may come `within` seconds."""
    args = args or {}
    conn = run.connection()
    (cx, _), (_, sy) = run.client_heart_beat, run.server_heart_beat
    if args.get("none"):
        if cx and sy:
            raise CaseError(f"expect_heartbeats none: heart-beats were negotiated "
                            f"(cx={cx}, sy={sy})")
        window = args.get("within", 1.0)
        beats, _, _ = await watch(conn, run.transcript, run.clock, window)
        if beats:
            raise StepFailed(f"no heart-beat for {window:g} s (CONNECT's cx={cx}, CONNECTED's "
                             f"sy={sy}: there will be none)", f"{beats} heart-beat EOLs")
        return
    if not (cx and sy):
        run.grade(Outcome.INFORMATIONAL, f"no client heart-beats to check: CONNECT offered "
                  f"cx={cx}, CONNECTED asked sy={sy}")
        return
    every = max(cx, sy) / 1000
    tolerance = args.get("tolerance", 1.5)
    window = min(args.get("within") or every * args.get("intervals", 4), MAX_HEARTBEAT_WINDOW)
    beats, silence, late = await watch(conn, run.transcript, run.clock, window)
    if silence >= window or silence - late > every * tolerance:
        raise StepFailed(f"data at least every {every * 1000:g} ms (MAX of CONNECT's cx={cx} "
                         f"and CONNECTED's sy={sy}, x{tolerance:g} tolerance) for {window:g} s",
                         f"{beats} heart-beat EOLs, {silence_seen(silence, late)}")


#: A silence before the client's close of more than this many intervals means the harness
#: sent its EOL late (it sends one every interval), not that the client was intolerant.
HARNESS_LATE = 1.2


async def step_send_heartbeats(run: ClientRun, args: dict[str, Any] | None) -> None:
    """An EOL to the client every MAX(sx, cy) ms, the interval of the CONNECTED the case
    sent and the client's CONNECT, for `intervals` of them: the client must keep the
    connection. A close after less silence than the interval breaks the negotiated window;
    one after about the interval, the tolerance the client SHOULD allow."""
    conn = run.connection()
    (_, cy), (sx, _) = run.client_heart_beat, run.server_heart_beat
    if not (sx and cy):
        run.grade(Outcome.INFORMATIONAL, f"no heart-beats to send: CONNECTED offered sx={sx}, "
                  f"CONNECT asked cy={cy}")
        return
    every = max(sx, cy) / 1000
    eol = b"\r\n" if (args or {}).get("eol") == "CRLF" else b"\n"
    start = time.monotonic()
    stop = start + min(every * (args or {}).get("intervals", 4), MAX_HEARTBEAT_WINDOW)
    sent: list[float] = []
    while time.monotonic() < stop and conn.closed is None:
        sent.append(run.clock())
        await conn.send(eol)
        # each EOL due on the interval's beat from the start: a late one makes no drift
        await asyncio.sleep(max(0.0, start + len(sent) * every - time.monotonic()))
    if conn.closed is None:
        return
    # what the client had surely read before it closed: EOLs sent well before the close
    before = [t for t in sent if t < conn.closed.at - 0.05]
    silence = (conn.closed.at - before[-1]) * 1000 if before else every * 1000
    expected = f"the connection kept while an EOL comes every {every * 1000:g} ms"
    observed = f"the client closed it {silence:.0f} ms after an EOL"
    if silence > every * 1000 * HARNESS_LATE:
        # the harness's next EOL was that late: the client saw more than an interval of
        # silence, and its close says nothing of its tolerance
        run.grade(Outcome.INFORMATIONAL, f"no verdict: {observed}, the harness's next EOL "
                  f"{silence - every * 1000:.0f} ms late")
        raise CaseDecided  # the connection is gone: nothing after this step can be checked
    raise StepFailed(expected, observed, grade=broken("heart-beating.negotiated-interval")
                     if silence < every * 900 else broken("heart-beating.tolerance"))


async def step_expect_close(run: ClientRun, args: dict[str, Any] | None) -> None:
    within = (args or {}).get("within", DEFAULT_WITHIN)
    event = await run.next_frame(within)
    if not isinstance(event, Closed):
        raise StepFailed(f"the client to close the connection within {within:g} s",
                         describe(event, within))


async def step_expect_open(run: ClientRun, seconds: float) -> None:
    """The client keeps the connection open and sends nothing for `seconds` (a client
    awaiting the RECEIPT of its DISCONNECT, say)."""
    event = await run.next_frame(seconds)
    if event is not None:
        raise StepFailed(f"the connection kept open and quiet for {seconds:g} s",
                         describe(event, seconds))


async def step_close(run: ClientRun, args: dict[str, Any] | None) -> None:
    """Drop the client's connection: a reset with `abort`, else a clean close."""
    await run.connection().close(abort=bool((args or {}).get("abort")))
    run.note("client", "the broker closed the connection")


async def step_sleep(run: ClientRun, seconds: float) -> None:
    await asyncio.sleep(seconds)


STEPS: dict[str, Callable[[ClientRun, Any], Awaitable[None]]] = {
    "driver": step_driver, "accept": step_accept, "handshake": step_handshake,
    "expect_frame": step_expect_frame, "reply": step_reply, "raw": step_raw,
    "expect_event": step_expect_event, "expect_any": step_expect_any,
    "expect_heartbeats": step_expect_heartbeats, "send_heartbeats": step_send_heartbeats,
    "expect_close": step_expect_close,
    "close": step_close, "sleep": step_sleep, "expect_open": step_expect_open,
}
