"""The `probe_limit` step: the limit search of the `probe` verb (probes.search), each size
tried on a fresh connection of the case, coarser (to within a tenth) and graded as a
case: ERROR then close is the expected refusal ("If these limits are exceeded the server
SHOULD send the client an ERROR frame and then close the connection")."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from conformance.codec import Frame
from conformance.probes.limits import limit_frame
from conformance.probes.search import Answer, find_limit
from conformance.runner.case_run import CaseRun
from conformance.runner.judge import StepFailed
from conformance.runner.results import Outcome
from conformance.runner.steps.connect import step_connect
from conformance.runner.steps.expectations import DEFAULT_WITHIN
from conformance.wire.connection import Closed, describe


async def step_probe_limit(run: CaseRun, args: dict[str, Any]) -> None:
    """Grow one dimension of a SEND until the broker refuses it, then bisect to within a
    tenth, each size on a fresh connection to a topic nobody subscribes to (a size accepted
    is dropped, not left queued)."""
    what, within = args["what"], args.get("within", DEFAULT_WITHIN)
    unit = "headers" if what == "header-count" else "octets"
    tries = itertools.count(1)

    async def attempt(size: int) -> Answer:
        n = next(tries)
        refusal = await _attempt(run, f"probe-{what}-{n}", limit_frame(
            what, size, run.variables["topic"], f"p{n}"), f"{size} {unit}", within)
        return Answer(refusal or "")

    found = await find_limit(attempt, start=args.get("start", 64),
                             top=args.get("max", 4 << 20), exact=False)
    if found.refused is None:
        run.grade(Outcome.INFORMATIONAL, f"{what}: accepted up to {found.accepted} {unit}, "
                  "no limit found")
        return
    grade = Outcome.PASSED if found.how == "ERROR then close" else Outcome.NON_STRICT
    run.grade(grade, f"{what} limit: {found.accepted or 0} {unit} accepted, {found.refused} "
              f"refused with {found.how}")


async def _attempt(run: CaseRun, name: str, data: bytes, what: str,
                   within: float) -> str | None:
    """Send one frame of the search on a fresh connection: None if accepted, else how it
    was refused."""
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
    for read in (event, after):
        if isinstance(read, Frame):
            run.received(conn, read)
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
