"""The steps that send frames or raw octets and the steps that expect what comes back:
a frame, nothing, ERROR then close, a close, or the first of several alternatives."""

from __future__ import annotations

import re
from typing import Any

from conformance.codec import Frame, Parser, StompError, encode_raw, escape
from conformance.runner.case_run import CaseRun
from conformance.runner.judge import StepFailed, broken
from conformance.runner.results import Outcome
from conformance.runner.steps.expectations import (
    DEFAULT_WITHIN,
    capture,
    expectation,
    frame_mismatch,
)
from conformance.spec.grammar import UNESCAPED_COMMANDS, Version
from conformance.wire.connection import Closed, Connection, Received, describe


async def step_send(run: CaseRun, args: dict[str, Any]) -> None:
    conn = run.conn(args)
    command = args["command"]
    headers = run.headers(args.get("headers"))
    body = run.substitute(args.get("body", "")).encode()
    if command == "SUBSCRIBE":
        subscribed(conn, headers)
    if command not in UNESCAPED_COMMANDS:  # valid or not, headers are escaped per version
        headers = [(escape(k, conn.version), escape(v, conn.version))  # type: ignore[arg-type]
                   for k, v in headers]
    length = len(body) if args.get("content_length", bool(body)) else None
    data = encode_raw(command, headers, body, content_length=length)
    await conn.send(data, **_websocket(data, args.get("ws")))


async def step_raw(run: CaseRun, args: dict[str, Any]) -> None:
    # escape_variables: values a case captured (ids the broker chose) escaped as header values
    version: Version = run.version  # type: ignore[assignment]
    quote = (lambda v: escape(v, version)) if args.get("escape_variables") else str
    data = run.substitute(args.get("data", ""), quote=quote).encode()
    data += bytes.fromhex(args.get("hex", ""))
    data *= args.get("repeat", 1)
    conn = run.conn(args)
    _subscribed_raw(conn, data)
    delivery = args.get("delivery", "whole")
    chunk = 1 if delivery == "bytewise" else args.get("chunk", 1) if delivery == "chunked" else 0
    await conn.send(data, chunk=chunk, pause=args.get("pause", 0.0),
                    **_websocket(data, args.get("ws")))


def subscribed(conn: Connection, headers: list[tuple[str, str]]) -> None:
    """Note the ack mode of a SUBSCRIBE the case sends (its headers decoded), by which the
    judge checks its MESSAGEs' ack header: under each id it names (of a repeated id the
    broker may take either), unless it repeats ack with different values (the mode is then
    the broker's pick, which the case checks itself)."""
    modes = {v for k, v in headers if k == "ack"} or {"auto"}
    for sub_id in {v for k, v in headers if k == "id"} or {""}:
        if len(modes) == 1:
            conn.ack_modes[sub_id] = next(iter(modes))
        else:
            conn.ack_modes.pop(sub_id, None)


def _subscribed_raw(conn: Connection, data: bytes) -> None:
    """`subscribed` for the SUBSCRIBE frames of a raw step's octets, as far as they parse."""
    if b"SUBSCRIBE" not in data:
        return
    parser = Parser(version=conn.version, strict=False)  # type: ignore[arg-type]
    try:
        events = parser.feed(data)
    except StompError as problem:
        events = getattr(problem, "events", [])
    for event in events:
        if isinstance(event, Frame) and event.command == "SUBSCRIBE":
            subscribed(conn, list(event.headers))


def _websocket(data: bytes, ws: dict[str, Any] | None) -> dict[str, Any]:
    """A step's `ws` delivery as Connection.send's arguments: where the messages are cut
    (`split`: offsets, negative ones from the end; `per-frame`; or `batched`, all in one)
    and their type."""
    if not ws:
        return {}
    split = ws.get("split")
    cuts = frame_ends(data) if split == "per-frame" else [] if split == "batched" else \
        [at if at > 0 else len(data) + at for at in split or ()]  # negative: from the end
    return {"cuts": cuts, "message_type": ws.get("type")}


def frame_ends(data: bytes) -> list[int]:
    """The offsets just after each frame of `data` (its NUL and the EOLs after it), the
    body read for its content-length where the headers give one; EOLs before a frame go
    with it. Bytes that end no frame make the last piece."""
    ends: list[int] = []
    at = 0
    while at < len(data):
        while at < len(data) and data[at] in b"\r\n":  # heart-beats before a frame
            at += 1
        head_end = data.find(b"\n\n", at)
        crlf = data.find(b"\r\n\r\n", at)
        if crlf != -1 and (head_end == -1 or crlf < head_end):
            head_end, body = crlf, crlf + 4
        elif head_end != -1:
            body = head_end + 2
        else:
            break
        length = re.search(rb"(?:^|\n)content-length:(\d+)\r?\n", data[at:head_end + 1])
        nul = body + int(length.group(1)) if length else data.find(b"\0", body)
        if nul < 0 or nul >= len(data):
            break
        at = nul + 1
        while at < len(data) and data[at] in b"\r\n":
            at += 1
        ends.append(at)
    return ends


async def step_expect(run: CaseRun, args: dict[str, Any]) -> None:
    conn = run.conn(args)
    within = args.get("within", DEFAULT_WITHIN)
    event = await conn.next_event(within)
    if isinstance(event, Frame):
        run.received(conn, event)
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
            run.received(conn, event)
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
    run.received(conn, event)
    if frame_mismatch(event, wanted, run) is not None:
        raise StepFailed(expectation(wanted, run), describe(event, within))
    capture(event, args, run)
    after = await conn.next_event(within)
    if isinstance(after, Frame):
        run.received(conn, after)
    if not isinstance(after, Closed):
        raise StepFailed(f"the connection closed within {within:g} s after ERROR",
                         describe(after, within) + " after the ERROR",
                         grade=broken("error.close-after"))


async def step_expect_close(run: CaseRun, args: dict[str, Any]) -> None:
    conn = run.conn(args)
    within = args.get("within", DEFAULT_WITHIN)
    event = await conn.next_event(within)
    if not isinstance(event, Closed):
        if isinstance(event, Frame):
            run.received(conn, event)
        raise StepFailed(f"the connection closed within {within:g} s", describe(event, within))


async def step_expect_any(run: CaseRun, alternatives: list[dict[str, Any]]) -> None:
    """The first alternative the broker's behaviour meets decides the grade."""
    expectations = [a[k] or {} for a in alternatives for k in a if k.startswith("expect")]
    conn = run.conn(next((e for e in expectations if "conn" in e), {}))
    within = max(e.get("within", DEFAULT_WITHIN) for e in expectations)
    event = await conn.next_event(within)
    if isinstance(event, Frame):
        run.received(conn, event)
    after: Received | None = None
    if isinstance(event, Frame) and event.command == "ERROR":
        after = await conn.next_event(within)
        if isinstance(after, Frame):
            run.received(conn, after)
    for alternative in alternatives:
        if _alternative_met(alternative, event, after, run):
            run.grade(Outcome(alternative["grade"]), alternative.get("note", ""),
                      tuple(alternative.get("statements", ())))
            if isinstance(event, Frame):
                for key in ("expect", "expect_error_close"):
                    if key in alternative:
                        capture(event, alternative[key], run)
            return
    if after is not None and not isinstance(after, Closed):
        conn.queue.appendleft(after)
    wanted = " | ".join(_describe_alternative(a, run) for a in alternatives)
    raise StepFailed(f"one of: {wanted}", describe(event, within))


def _alternative_met(alternative: dict[str, Any], event: Received | None, after: Received | None,
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
