"""The steps that open, connect and close a case's connections."""

from __future__ import annotations

from typing import Any

from conformance.codec import Frame, encode_raw
from conformance.runner.case_run import (
    CaseDecided,
    CaseRun,
    SetupRefused,
    UpgradeRefused,
    heart_beat_pair,
)
from conformance.runner.judge import StepFailed
from conformance.runner.results import Outcome, Refusal
from conformance.runner.steps.expectations import DEFAULT_WITHIN
from conformance.spec.grammar import VERSIONS, parse_accept_version
from conformance.wire.connection import Closed, Connection, Received, brief, describe
from conformance.wire.handshake import connect_headers


async def step_open(run: CaseRun, args: dict[str, Any]) -> None:
    """Open a connection offering `ws.subprotocols` over WebSocket; with `refused`, a
    refused upgrade ends the case with that grade (else it is the case's error)."""
    subprotocols = (args.get("ws") or {}).get("subprotocols")
    try:
        await run.open(args.get("conn", "main"), subprotocols)
    except UpgradeRefused as refusal:
        if "refused" not in args:
            raise
        graded = args["refused"]
        note = graded.get("note", "")
        run.grade(Outcome(graded["grade"]), f"{note}: {refusal}" if note else str(refusal))
        raise CaseDecided() from None


def refusal(run: CaseRun, conn: Connection, event: Received | None) -> bool:
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
    # a repeated accept-version: the broker may read any of its entries
    accept = ",".join(v for k, v in headers if k == "accept-version") or None
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
                                   f"CONNECT within {DEFAULT_WITHIN:g} s", observed,
                                   Refusal.SILENT)
            raise SetupRefused(f"a CONNECT with the run's settings got {brief(event)}",
                               observed)
        if isinstance(event, Frame):
            run.received(conn, event)
        raise StepFailed("CONNECTED", describe(event, DEFAULT_WITHIN))
    run.received(conn, event)
    chosen = event.get("version") or "1.0"
    if chosen in VERSIONS:
        conn.set_version(chosen)


async def step_close(run: CaseRun, args: dict[str, Any]) -> None:
    name = args.get("conn", "main")
    conn = run.connections.get(name)
    if conn is not None:
        await conn.close(abort=args.get("abort", False))
