"""The segmentation probes: how a broker copes with frames cut across reads, frames that
never end, and many frames in one read.

- `split`: a few frames that hold escapes, CR LF line ends, a NUL in a content-length body,
  written in two writes cut at every byte offset (and once a byte per write): every frame
  must be handled as if it came whole.
- `slow-loris`: a frame dribbled one byte per interval, before and after CONNECT: a broker
  that drops the connection after a while is robust; one that keeps it open for the whole
  budget holds memory and a socket for any client that never finishes a frame.
- `many-frames`: N SEND frames in one write: every one delivered and acknowledged, in order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from conformance.codec import Frame, encode
from conformance.probes.results import Grade, ProbeResult
from conformance.probes.session import Failed, ProbeRun
from conformance.spec.grammar import Version
from conformance.wire.connection import Closed, Connection, brief

#: A header value that needs every escape of the version, and its decoded form.
_TRICKY = {"1.2": "a:b\nc\\d\re", "1.1": "a:b\nc\\d", "1.0": "a-b"}


def _split_payload(version: Version, destination: str, receipt: str) -> bytes:
    """Two SENDs: the first with CR LF line ends (1.2), an escaped header and a
    content-length body holding a NUL, followed by an EOL; the second plain, asking for
    `receipt`."""
    first = encode(Frame("SEND", [("destination", destination), ("x-tricky", _TRICKY[version])],
                         b"ab\x00cd"), version=version,
                   eol=b"\r\n" if version == "1.2" else b"\n") + b"\n"
    second = encode(Frame("SEND", [("destination", destination), ("receipt", receipt)],
                          b"plain"), version=version)
    return first + second


async def _split_round(run: ProbeRun, conn: Connection, chunks: Iterable[bytes],
                       receipt: str) -> str | None:
    """Write `chunks` with a pause between them; None when both MESSAGEs (intact) and the
    RECEIPT came, else what went wrong."""
    options = run.options
    for index, chunk in enumerate(chunks):
        if index:
            await asyncio.sleep(options.pause)
        await conn.send(chunk)
    want = [b"ab\x00cd", b"plain"]
    got_receipt = False
    while want or not got_receipt:
        event = await conn.next_event(options.within)
        if not isinstance(event, Frame):
            missing = [w.decode("latin-1") for w in want] + ([] if got_receipt else [receipt])
            return f"{brief(event)} while waiting for {', '.join(map(repr, missing))}"
        if event.command == "RECEIPT" and event.get("receipt-id") == receipt:
            got_receipt = True
        elif event.command == "MESSAGE" and want and event.body == want[0]:
            if want[0] == b"ab\x00cd" and event.get("x-tricky") != _TRICKY[options.version]:
                return f"header x-tricky came back as {event.get('x-tricky')!r}"
            want.pop(0)
        else:
            return f"unexpected {event.command} (body {event.body[:20]!r})"
    return None


async def split_probe(run: ProbeRun, deadline: float) -> ProbeResult:
    options = run.options
    queue = run.target.profile.queue.format(name=run.name("split"))
    size = len(_split_payload(options.version, queue, "r00000"))
    failures: list[tuple[str, str]] = []
    conn: Connection | None = None
    cuts = [*range(1, size), -1]  # -1: a byte per write
    done = 0
    try:
        for cut in cuts:
            if time.monotonic() >= deadline or len(failures) >= 10:
                break
            if conn is None:
                conn = await run.connected()
                subscribe = encode(Frame("SUBSCRIBE", [("id", "split"), ("receipt", "sub"),
                                                       ("destination", queue)]),
                                   version=options.version)
                await conn.send(subscribe)
                answer = await run.answer(conn, "sub")
                if answer not in ("accepted", "no answer"):  # no RECEIPT: judged below
                    raise Failed(f"the SUBSCRIBE before the split frames got {answer}")
            receipt = f"r{done:05d}"
            data = _split_payload(options.version, queue, receipt)
            chunks = [data[i:i + 1] for i in range(len(data))] if cut < 0 else \
                [data[:cut], data[cut:]]
            problem = await _split_round(run, conn, chunks, receipt)
            done += 1
            if problem is not None:
                failures.append(("byte per write" if cut < 0 else f"cut at octet {cut}",
                                 problem))
                await conn.close(abort=True)
                conn = None
    finally:
        if conn is not None:
            await conn.close(abort=True)
    rules = ("frames.frame-grammar", "value-encoding.decode-escapes",
             "content-length.read-octets") + (("frames.eol-cr-optional",)
                                             if options.version == "1.2" else ())
    statements = tuple(run.rule(r) for r in rules)
    detail: dict[str, object] = {"octets": size, "rounds": done,
                                 "failures": [list(f) for f in failures]}
    if failures:
        where, what = failures[0]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return ProbeResult("split", Grade.FAILED, f"{where}: {what}{more}", statements,
                           detail=detail)
    if done < len(cuts):
        return ProbeResult("split", Grade.INFORMATIONAL, f"{done} of {len(cuts)} ways of "
                           "writing the frames handled before the budget ran out", statements,
                           detail=detail)
    return ProbeResult("split", Grade.PASSED, f"the {size} octets of frames handled whole "
                       f"when cut at each of {size - 1} offsets and written a byte at a time",
                       statements, detail=detail)


async def many_frames_probe(run: ProbeRun, deadline: float) -> ProbeResult:
    options = run.options
    queue = run.target.profile.queue.format(name=run.name("many"))
    count = options.many
    conn = await run.connected()
    statements = tuple(run.rule(r) for r in ("frames.frame-grammar",
                                               "receipt-header.server-acknowledges",
                                               "receipt.cumulative"))
    try:
        await conn.send(encode(Frame("SUBSCRIBE", [("id", "many"), ("destination", queue),
                                                   ("receipt", "sub")]), version=options.version))
        answer = await run.answer(conn, "sub")
        if answer not in ("accepted", "no answer"):  # no RECEIPT: judged below
            raise Failed(f"the SUBSCRIBE before the frames got {answer}")
        data = b"".join(encode(Frame("SEND", [("destination", queue), ("receipt", f"n{i}")],
                                     f"n{i}".encode()), version=options.version)
                        for i in range(count))
        await conn.send(data)
        bodies: list[int] = []
        receipts: list[int] = []
        ended = ""
        while len(bodies) < count or len(receipts) < count:
            left = deadline - time.monotonic()
            event = await conn.next_event(min(options.within, max(left, 0)))
            if not isinstance(event, Frame):
                ended = brief(event)
                break
            number = event.body if event.command == "MESSAGE" else \
                (event.get("receipt-id") or "").encode()
            if event.command in ("MESSAGE", "RECEIPT") and number.startswith(b"n") and \
                    number[1:].isdigit():
                (bodies if event.command == "MESSAGE" else receipts).append(int(number[1:]))
            else:
                ended = f"unexpected {brief(event)}"
                break
    finally:
        await conn.close(abort=True)
    detail: dict[str, object] = {"frames": count, "octets": len(data), "messages": len(bodies),
                                 "receipts": len(receipts)}
    lost = count - len(set(receipts))
    if lost or len(set(bodies)) < count:
        return ProbeResult("many-frames", Grade.FAILED,
                           f"{count} SENDs in one write of {len(data)} octets: "
                           f"{len(set(receipts))} RECEIPTs and {len(set(bodies))} MESSAGEs "
                           f"came, then {ended or 'nothing'}", statements, detail=detail)
    if receipts != sorted(receipts):
        return ProbeResult("many-frames", Grade.FAILED, f"{count} SENDs in one write: the "
                           "RECEIPTs came out of order", (run.rule("receipt.cumulative"),),
                           detail=detail)
    note = "" if bodies == sorted(bodies) else " (the MESSAGEs out of order)"
    return ProbeResult("many-frames", Grade.PASSED, f"{count} SENDs in one write of "
                       f"{len(data)} octets: every one acknowledged in order and delivered"
                       f"{note}", statements, detail=detail)


async def _dribble(run: ProbeRun, data: bytes, *, handshake: bool) -> tuple[bool, float, int]:
    """Send `data` (then `x` forever) one octet per interval: (dropped, seconds, octets)."""
    options = run.options
    conn = await (run.connected("slow") if handshake else run.open("slow"))
    started = time.monotonic()
    sent = 0
    try:
        while time.monotonic() - started < options.slow_budget:
            octet = data[sent:sent + 1] or b"x"
            await conn.send(octet)
            sent += 1
            event = await conn.next_event(options.slow_interval)
            if isinstance(event, Closed) or conn.closed is not None or conn.transport.closed:
                return True, time.monotonic() - started, sent
            if isinstance(event, Frame) and event.command == "ERROR":
                # "ERROR then close" is the usual way out; a close must follow soon
                if isinstance(await conn.next_event(options.within), Closed):
                    return True, time.monotonic() - started, sent
        return False, time.monotonic() - started, sent
    finally:
        await conn.close(abort=True)


async def slow_loris_probe(run: ProbeRun, deadline: float) -> ProbeResult:
    destination = run.target.profile.queue.format(name=run.name("slow"))
    before = run.connect_frame()[:-2] + b"x-pad:"  # a CONNECT whose headers never end
    after = f"SEND\ndestination:{destination}\nx-pad:".encode()
    results = {}
    for name, data, handshake in (("before CONNECT", before, False),
                                  ("after CONNECT", after, True)):
        if time.monotonic() >= deadline:
            break
        results[name] = await _dribble(run, data, handshake=handshake)
    options = run.options
    detail: dict[str, object] = {
        "interval_s": options.slow_interval,
        **{name: {"dropped": dropped, "seconds": round(seconds, 1), "octets": octets}
           for name, (dropped, seconds, octets) in results.items()}}
    kept = [name for name, (dropped, _, _) in results.items() if not dropped]
    parts = [f"{name}: {'dropped after' if dropped else 'still open after'} {seconds:.0f} s "
             f"and {octets} octets" for name, (dropped, seconds, octets) in results.items()]
    summary = f"a frame dribbled an octet every {options.slow_interval:g} s: " + \
        "; ".join(parts)
    if kept:
        return ProbeResult("slow-loris", Grade.FINDING, summary, detail=detail)
    if len(results) < 2:
        return ProbeResult("slow-loris", Grade.INFORMATIONAL, summary + " (budget spent)",
                           detail=detail)
    return ProbeResult("slow-loris", Grade.PASSED, summary, detail=detail)
