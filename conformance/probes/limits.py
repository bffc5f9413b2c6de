"""The limit probes, `header-count`, `header-line` and `body`: grow one dimension of a
SEND (each try on a fresh connection, to a topic nobody subscribes to) until the broker
refuses it, then bisect to the exact limit (probes.search), and grade how it refused.

"Servers MAY place maximum limits"; beyond them "the server SHOULD send the client an ERROR
frame and then close the connection"."""

from __future__ import annotations

import asyncio
import time

from conformance.codec import encode_raw
from conformance.probes.results import Grade, ProbeResult
from conformance.probes.search import Answer, GaveUp, find_limit
from conformance.probes.session import Failed, ProbeRun

UNITS = {"header-count": "headers", "header-line": "octets", "body": "octets"}


def limit_frame(what: str, size: int, destination: str, receipt: str) -> bytes:
    """A SEND of `size`: that many headers in all, a header line of that many octets (no
    EOL), or a body of that many octets."""
    headers: list[tuple[str, str]] = [("destination", destination), ("receipt", receipt)]
    body = b""
    if what == "header-count":
        headers += [(f"x-{i}", "v") for i in range(size - len(headers))]
    elif what == "header-line":
        headers.append(("x", "v" * (size - 2)))
    else:
        body = b"b" * size
    return encode_raw("SEND", headers, body, content_length=len(body) if body else None)


def _smallest(what: str, destination: str) -> int:
    """The smallest size that is still the dimension probed."""
    if what == "header-count":
        return 2
    if what == "header-line":
        return max(len(f"destination:{destination}"), len("receipt:r0000000")) + 1
    return 0


async def _try_size(run: ProbeRun, what: str, size: int, destination: str,
                    receipt: str) -> tuple[str, float]:
    """One SEND of `size` on a fresh connection: how it was answered, and in how long."""
    conn = await run.connected(patient=True)
    started = time.monotonic()
    try:
        await conn.send(limit_frame(what, size, destination, receipt))
        return await run.answer(conn, receipt), time.monotonic() - started
    finally:
        await conn.close(abort=True)


async def _quiet(run: ProbeRun, destination: str, deadline: float) -> None:
    """Wait until the broker answers a small SEND within a second again: a frame it got no
    answer for may still be keeping it busy, and the next try must not pay for it."""
    while time.monotonic() < deadline:
        outcome, seconds = await _try_size(run, "body", 1, destination, "quiet")
        if outcome == "accepted" and seconds < 1:
            return
        await asyncio.sleep(1)


async def limit_probe(run: ProbeRun, what: str, deadline: float) -> ProbeResult:
    """Grow the size (fourfold while answers are quick, else twofold) until a refusal,
    then bisect between the largest accepted and the smallest refused size. A size that got
    no answer is tried once more on a quiet broker before it counts as refused."""
    options = run.options
    top = {"header-count": options.max_headers, "header-line": options.max_header_line,
           "body": options.max_body}[what]
    unit = UNITS[what]
    destination = run.target.profile.topic.format(name=run.name(what))
    low = _smallest(what, destination)
    tries: list[tuple[int, str, float]] = []

    async def attempt(size: int) -> Answer:
        while True:
            try:
                outcome, seconds = await _try_size(run, what, size, destination,
                                                   f"r{len(tries):07d}")
                tries.append((size, outcome, round(seconds, 3)))
                if outcome == "no answer":  # slow, or stuck: once more on a quiet broker
                    await _quiet(run, destination, deadline)
                    if sum(1 for t in tries if t[0] == size) == 1 and \
                            time.monotonic() < deadline:
                        continue
            except Failed as error:
                raise GaveUp(f"then the broker stopped answering CONNECT ({error})") from None
            return Answer("" if outcome == "accepted" else outcome, seconds)

    start = min(max({"header-count": 16, "header-line": 1024, "body": 64 * 1024}[what], low),
                top)
    found = await find_limit(attempt, start=start, top=top, low=low, quick=1.0,
                             deadline=deadline)
    accepted, refused, how, stopped = found.accepted, found.refused, found.how, found.stopped
    exact = found.exact
    detail: dict[str, object] = {"tries": [list(t) for t in tries]}
    slowest = max((t for t in tries if t[1] == "accepted"), key=lambda t: t[2], default=None)
    slow = f" ({slowest[0]} {unit} took {slowest[2]:.1f} s)" if slowest and \
        slowest[2] >= 1 else ""
    tail = f"; {stopped}" if stopped else "" if exact or refused is None else \
        "; the budget ran out before the exact limit"
    may = run.rule("size-limits.may-limit")
    if refused is None:
        if accepted is not None and accepted >= top:
            return ProbeResult(what, Grade.FINDING, f"accepted up to {accepted} {unit}: no "
                               f"limit found{slow}{tail}", (may,), accepted, None, unit,
                               detail=detail)
        summary = f"accepted up to {accepted} {unit}{slow}, no refusal yet{tail}" \
            if accepted is not None else f"no size could be tried{tail}"
        return ProbeResult(what, Grade.INFORMATIONAL, summary, (may,), accepted, None, unit,
                           detail=detail)
    if accepted is None and how == "no answer":
        return ProbeResult(what, Grade.INFORMATIONAL, f"no RECEIPT, ERROR or close within "
                           f"{options.within:g} s even for {refused} {unit}: no limit to "
                           f"measure{tail}", (may,), None, refused, unit, detail=detail)
    first = f"{accepted} {unit} accepted{slow}, " if accepted is not None else ""
    summary = f"{first}{refused} {unit} refused with {how}{tail}"
    statements: tuple[str, ...]
    if how == "ERROR then close":
        grade, statements = Grade.PASSED, (may, run.rule("size-limits.error-then-close"))
    elif how == "a close without ERROR":
        grade, statements = Grade.NON_STRICT, (run.rule("size-limits.error-then-close"),)
    elif how.startswith("ERROR, "):  # left open, or more frames before the close
        grade, statements = Grade.FAILED, (run.rule("error.close-after"),)
    else:  # no answer in time: the broker keeps reading, or chews, past any sane size
        grade, statements = Grade.FINDING, (run.rule("size-limits.error-then-close"),)
        summary = f"{first}{refused} {unit} got no answer within {options.within:g} s: no " \
            f"limit, and the time to process grows with the size{tail}"
    # A larger size refused worse than the smallest one decides too: an ERROR that left
    # the connection open is a MUST broken whatever size it came at.
    late = [(size, outcome) for size, outcome, _ in sorted(tries)
            if outcome.startswith("ERROR, ")]
    if late and grade is not Grade.FAILED:
        sizes = ", ".join(str(size) for size, _ in late[:4]) + (", ..." if len(late) > 4
                                                                 else "")
        grade, statements = Grade.FAILED, (*statements, run.rule("error.close-after"))
        summary += f"; for {sizes} {unit}: {late[0][1]}"
    return ProbeResult(what, grade, f"limit: {summary}" if grade is not Grade.FINDING
                       else summary, statements, accepted, refused, unit, exact,
                       detail=detail)
