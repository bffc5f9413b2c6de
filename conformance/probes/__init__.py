"""Limit and segmentation probes: how a broker copes with big frames, frames cut across
reads, frames that never end, and many frames in one read. Each probe gives a verdict.

- `header-count`, `header-line`, `body`: grow one dimension of a SEND (each try on a fresh
  connection, to a topic nobody subscribes to) until the broker refuses it, then bisect to
  the exact limit: the largest size accepted, the smallest refused. "Servers MAY place
  maximum limits"; beyond them "the server SHOULD send the client an ERROR frame and then
  close the connection".
- `split`: a few frames that hold escapes, CR LF line ends, a NUL in a content-length body,
  written in two writes cut at every byte offset (and once a byte per write): every frame
  must be handled as if it came whole.
- `slow-loris`: a frame dribbled one byte per interval, before and after CONNECT: a broker
  that drops the connection after a while is robust; one that keeps it open for the whole
  budget holds memory and a socket for any client that never finishes a frame.
- `many-frames`: N SEND frames in one write: every one delivered and acknowledged, in order.

Every wait has a deadline, every probe a time budget; what a broker sends goes through the
bounded observing parser of `conformance.wire.connection`, so no broker can hang the probes or
fill their memory."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from conformance.broker import BrokerConfig, embedded
from conformance.codec import Frame, encode, encode_raw
from conformance.profiles import load_profile
from conformance.runner.engine import HarnessError
from conformance.runner.steps import brief
from conformance.spec import statement_id
from conformance.spec.grammar import Version
from conformance.wire.connection import Closed, Connection
from conformance.wire.target import Target
from conformance.wire.transcript import Transcript
from conformance.wire.transport import (
    TransportError,
    open_transport,
    parse_broker,
)

PROBES = ("header-count", "header-line", "body", "split", "slow-loris", "many-frames")


class Grade(enum.StrEnum):
    #: the broker does what the spec asks (or what a robust broker does)
    PASSED = "passed"
    #: a MUST broken
    FAILED = "failed"
    #: a SHOULD broken
    NON_STRICT = "non-strict"
    #: no statement broken, but a weakness a hostile client can use (no limit, no timeout)
    FINDING = "finding"
    #: a measurement only, or the probe could not conclude within its budget
    INFORMATIONAL = "informational"


@dataclass(frozen=True)
class ProbeVerdict:
    probe: str
    grade: Grade
    #: one line
    summary: str
    statements: tuple[str, ...] = ()
    #: limit probes: the largest size accepted and the smallest refused (None: not found)
    limit: int | None = None
    refused: int | None = None
    unit: str = ""
    #: limit probes: `refused` is `limit` + 1
    exact: bool = False
    duration_s: float = 0.0
    detail: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"probe": self.probe, "grade": self.grade.value, "summary": self.summary,
                "statements": list(self.statements), "limit": self.limit,
                "refused": self.refused, "unit": self.unit, "exact": self.exact,
                "duration_s": round(self.duration_s, 3), "detail": self.detail}


@dataclass(frozen=True)
class ProbeOptions:
    version: Version = "1.2"
    #: seconds an answer may take
    within: float = 5.0
    #: seconds each probe may take in all
    budget: float = 60.0
    #: the largest sizes the limit probes try
    max_headers: int = 65_536
    max_header_line: int = 4 << 20
    max_body: int = 64 << 20
    #: seconds between the two writes of a split frame
    pause: float = 0.002
    #: seconds between the octets of a slow-loris frame, and how long to keep at it
    slow_interval: float = 1.0
    slow_budget: float = 40.0
    #: frames written at once by `many-frames`
    many: int = 200

    def __post_init__(self) -> None:
        for name in ("within", "budget", "slow_interval", "slow_budget"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ProbeOptions.{name} must be a number of seconds above 0")
        for name in ("max_headers", "max_header_line", "max_body", "many"):
            if getattr(self, name) < 1:
                raise ValueError(f"ProbeOptions.{name} must be a positive whole number")
        if self.pause < 0:
            raise ValueError("ProbeOptions.pause must not be negative")


class _Failed(Exception):
    """A probe cannot go on (a connection refused, no CONNECTED): its one-line reason."""


class _Probe:
    """What every probe of one run shares: the target, the options, fresh names."""

    def __init__(self, target: Target, options: ProbeOptions) -> None:
        self.target, self.options = target, options
        self.run = uuid.uuid4().hex[:8]
        self.count = 0
        self.transcript = Transcript(head=32 << 10, tail=32 << 10)
        self.started = time.monotonic()

    def name(self, what: str) -> str:
        self.count += 1
        return f"probe-{self.run}-{what}-{self.count}"

    def rule(self, rule: str) -> str:
        return statement_id(rule, self.options.version)

    async def open(self, name: str = "probe") -> Connection:
        target = self.target
        try:
            transport = await open_transport(target.address, tls=target.tls,
                                             timeout=self.options.within)
        except TransportError as error:
            raise _Failed(str(error)) from None
        self.transcript = Transcript(head=32 << 10, tail=32 << 10)  # the last connection's
        return Connection(name, transport, self.transcript,
                          lambda: time.monotonic() - self.started)

    def connect_frame(self) -> bytes:
        target, version = self.target, self.options.version
        login, passcode = target.credentials
        headers = [("accept-version", version), ("heart-beat", "0,0"),
                   ("host", target.host or target.profile.host or target.address.host)]
        headers += [(k, v) for k, v in (("login", login), ("passcode", passcode)) if v]
        return encode_raw("CONNECT", headers)

    async def connected(self, name: str = "probe", *, patient: bool = False) -> Connection:
        """A fresh connection past CONNECTED. `patient`: try three times, a broker still
        chewing on the last probe's frame may answer late."""
        for attempt in range(3 if patient else 1):
            conn = await self.open(name)
            await conn.send(self.connect_frame())
            event = await conn.next_event(self.options.within * (attempt + 1))
            if isinstance(event, Frame) and event.command == "CONNECTED":
                conn.set_version(event.get("version") or "1.0")
                return conn
            await conn.close(abort=True)
        raise _Failed(f"CONNECT was answered with {brief(event)}")

    async def answer(self, conn: Connection, receipt: str) -> str:
        """How the broker answered a frame asking for `receipt`: 'accepted',
        'ERROR then close', 'ERROR, then FRAMES before the close', 'ERROR, the connection
        left open', 'a close without ERROR' or 'no answer'."""
        within = self.options.within
        while True:
            event = await conn.next_event(within)
            if isinstance(event, Frame) and event.command == "RECEIPT" and \
                    event.get("receipt-id") == receipt:
                return "accepted"
            if isinstance(event, Frame) and event.command == "ERROR":
                grace = time.monotonic() + min(within, 2.0)
                more = []
                while isinstance(after := await conn.next_event(
                        max(grace - time.monotonic(), 0)), Frame):
                    more.append(after.command)
                if not isinstance(after, Closed):
                    return "ERROR, the connection left open"
                return f"ERROR, then {' '.join(more)} before the close" if more else \
                    "ERROR then close"
            if isinstance(event, Closed):
                return "a close without ERROR"
            if event is None:
                return "no answer"


# -- limits --------------------------------------------------------------------------------

_UNITS = {"header-count": "headers", "header-line": "octets", "body": "octets"}


def _limit_frame(what: str, size: int, destination: str, receipt: str) -> bytes:
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


async def _try_size(probe: _Probe, what: str, size: int, destination: str,
                    receipt: str) -> tuple[str, float]:
    """One SEND of `size` on a fresh connection: how it was answered, and in how long."""
    conn = await probe.connected(patient=True)
    started = time.monotonic()
    try:
        await conn.send(_limit_frame(what, size, destination, receipt))
        return await probe.answer(conn, receipt), time.monotonic() - started
    finally:
        await conn.close(abort=True)


async def _quiet(probe: _Probe, destination: str, deadline: float) -> None:
    """Wait until the broker answers a small SEND within a second again: a frame it got no
    answer for may still be keeping it busy, and the next try must not pay for it."""
    while time.monotonic() < deadline:
        outcome, seconds = await _try_size(probe, "body", 1, destination, "quiet")
        if outcome == "accepted" and seconds < 1:
            return
        await asyncio.sleep(1)


async def _probe_limit(probe: _Probe, what: str, deadline: float) -> ProbeVerdict:
    """Grow the size (fourfold while answers are quick, else twofold) until a refusal,
    then bisect between the largest accepted and the smallest refused size."""
    options = probe.options
    top = {"header-count": options.max_headers, "header-line": options.max_header_line,
           "body": options.max_body}[what]
    unit = _UNITS[what]
    destination = probe.target.profile.topic.format(name=probe.name(what))
    low = _smallest(what, destination)
    size = min(max({"header-count": 16, "header-line": 1024, "body": 64 * 1024}[what], low),
               top)
    accepted: int | None = None  # the largest size accepted
    refused: int | None = None  # the smallest refused, and how
    how, stopped = "", ""
    tries: list[tuple[int, str, float]] = []
    while time.monotonic() < deadline:
        try:
            outcome, seconds = await _try_size(probe, what, size, destination,
                                               f"r{len(tries):07d}")
        except _Failed as error:
            stopped = f"then the broker stopped answering CONNECT ({error})"
            break
        tries.append((size, outcome, round(seconds, 3)))
        if outcome == "no answer":  # slow, or stuck: once more on a quiet broker
            try:
                await _quiet(probe, destination, deadline)
                if sum(1 for t in tries if t[0] == size) == 1 and time.monotonic() < deadline:
                    continue
            except _Failed as error:
                stopped = f"then the broker stopped answering CONNECT ({error})"
                break
        if outcome == "accepted":
            accepted = size
        else:
            refused, how = size, outcome
        floor = accepted if accepted is not None else low - 1
        if refused is None:
            if size >= top:
                break
            size = min(size * (4 if seconds < 1 else 2), top)
        elif refused - floor <= 1:
            break
        else:
            size = (floor + 1 + refused) // 2
    floor = accepted if accepted is not None else low - 1
    exact = refused is not None and refused - floor <= 1
    detail: dict[str, object] = {"tries": [list(t) for t in tries]}
    slowest = max((t for t in tries if t[1] == "accepted"), key=lambda t: t[2], default=None)
    slow = f" ({slowest[0]} {unit} took {slowest[2]:.1f} s)" if slowest and \
        slowest[2] >= 1 else ""
    tail = f"; {stopped}" if stopped else "" if exact or refused is None else \
        "; the budget ran out before the exact limit"
    may = probe.rule("size-limits.may-limit")
    if refused is None:
        if accepted is not None and accepted >= top:
            return ProbeVerdict(what, Grade.FINDING, f"accepted up to {accepted} {unit}: no "
                                f"limit found{slow}{tail}", (may,), accepted, None, unit,
                                detail=detail)
        summary = f"accepted up to {accepted} {unit}{slow}, no refusal yet{tail}" \
            if accepted is not None else f"no size could be tried{tail}"
        return ProbeVerdict(what, Grade.INFORMATIONAL, summary, (may,), accepted, None, unit,
                            detail=detail)
    if accepted is None and how == "no answer":
        return ProbeVerdict(what, Grade.INFORMATIONAL, f"no RECEIPT, ERROR or close within "
                            f"{options.within:g} s even for {refused} {unit}: no limit to "
                            f"measure{tail}", (may,), None, refused, unit, detail=detail)
    first = f"{accepted} {unit} accepted{slow}, " if accepted is not None else ""
    summary = f"{first}{refused} {unit} refused with {how}{tail}"
    statements: tuple[str, ...]
    if how == "ERROR then close":
        grade, statements = Grade.PASSED, (may, probe.rule("size-limits.error-then-close"))
    elif how == "a close without ERROR":
        grade, statements = Grade.NON_STRICT, (probe.rule("size-limits.error-then-close"),)
    elif how.startswith("ERROR, "):  # left open, or more frames before the close
        grade, statements = Grade.FAILED, (probe.rule("error.close-after"),)
    else:  # no answer in time: the broker keeps reading, or chews, past any sane size
        grade, statements = Grade.FINDING, (probe.rule("size-limits.error-then-close"),)
        summary = f"{first}{refused} {unit} got no answer within {options.within:g} s: no " \
            f"limit, and the time to process grows with the size{tail}"
    # A larger size refused worse than the smallest one decides too: an ERROR that left
    # the connection open is a MUST broken whatever size it came at.
    late = [(size, outcome) for size, outcome, _ in sorted(tries)
            if outcome.startswith("ERROR, ")]
    if late and grade is not Grade.FAILED:
        sizes = ", ".join(str(size) for size, _ in late[:4]) + (", ..." if len(late) > 4
                                                                 else "")
        grade, statements = Grade.FAILED, (*statements, probe.rule("error.close-after"))
        summary += f"; for {sizes} {unit}: {late[0][1]}"
    return ProbeVerdict(what, grade, f"limit: {summary}" if grade is not Grade.FINDING
                        else summary, statements, accepted, refused, unit, exact,
                        detail=detail)


# -- segmentation ----------------------------------------------------------------------------

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


async def _split_round(probe: _Probe, conn: Connection, chunks: Iterable[bytes],
                       receipt: str) -> str | None:
    """Write `chunks` with a pause between them; None when both MESSAGEs (intact) and the
    RECEIPT came, else what went wrong."""
    options = probe.options
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


async def _probe_split(probe: _Probe, deadline: float) -> ProbeVerdict:
    options = probe.options
    queue = probe.target.profile.queue.format(name=probe.name("split"))
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
                conn = await probe.connected()
                subscribe = encode(Frame("SUBSCRIBE", [("id", "split"), ("receipt", "sub"),
                                                       ("destination", queue)]),
                                   version=options.version)
                await conn.send(subscribe)
                answer = await probe.answer(conn, "sub")
                if answer not in ("accepted", "no answer"):  # no RECEIPT: judged below
                    raise _Failed(f"the SUBSCRIBE before the split frames got {answer}")
            receipt = f"r{done:05d}"
            data = _split_payload(options.version, queue, receipt)
            chunks = [data[i:i + 1] for i in range(len(data))] if cut < 0 else \
                [data[:cut], data[cut:]]
            problem = await _split_round(probe, conn, chunks, receipt)
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
    statements = tuple(probe.rule(r) for r in rules)
    detail: dict[str, object] = {"octets": size, "rounds": done,
                                 "failures": [list(f) for f in failures]}
    if failures:
        where, what = failures[0]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return ProbeVerdict("split", Grade.FAILED, f"{where}: {what}{more}", statements,
                            detail=detail)
    if done < len(cuts):
        return ProbeVerdict("split", Grade.INFORMATIONAL, f"{done} of {len(cuts)} ways of "
                            "writing the frames handled before the budget ran out", statements,
                            detail=detail)
    return ProbeVerdict("split", Grade.PASSED, f"the {size} octets of frames handled whole "
                        f"when cut at each of {size - 1} offsets and written a byte at a time",
                        statements, detail=detail)


async def _probe_many(probe: _Probe, deadline: float) -> ProbeVerdict:
    options = probe.options
    queue = probe.target.profile.queue.format(name=probe.name("many"))
    count = options.many
    conn = await probe.connected()
    statements = tuple(probe.rule(r) for r in ("frames.frame-grammar",
                                               "receipt-header.server-acknowledges",
                                               "receipt.cumulative"))
    try:
        await conn.send(encode(Frame("SUBSCRIBE", [("id", "many"), ("destination", queue),
                                                   ("receipt", "sub")]), version=options.version))
        answer = await probe.answer(conn, "sub")
        if answer not in ("accepted", "no answer"):  # no RECEIPT: judged below
            raise _Failed(f"the SUBSCRIBE before the frames got {answer}")
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
        return ProbeVerdict("many-frames", Grade.FAILED,
                            f"{count} SENDs in one write of {len(data)} octets: "
                            f"{len(set(receipts))} RECEIPTs and {len(set(bodies))} MESSAGEs "
                            f"came, then {ended or 'nothing'}", statements, detail=detail)
    if receipts != sorted(receipts):
        return ProbeVerdict("many-frames", Grade.FAILED, f"{count} SENDs in one write: the "
                            "RECEIPTs came out of order", (probe.rule("receipt.cumulative"),),
                            detail=detail)
    note = "" if bodies == sorted(bodies) else " (the MESSAGEs out of order)"
    return ProbeVerdict("many-frames", Grade.PASSED, f"{count} SENDs in one write of "
                        f"{len(data)} octets: every one acknowledged in order and delivered"
                        f"{note}", statements, detail=detail)


async def _dribble(probe: _Probe, data: bytes, *, handshake: bool) -> tuple[bool, float, int]:
    """Send `data` (then `x` forever) one octet per interval: (dropped, seconds, octets)."""
    options = probe.options
    conn = await (probe.connected("slow") if handshake else probe.open("slow"))
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


async def _probe_slow(probe: _Probe, deadline: float) -> ProbeVerdict:
    destination = probe.target.profile.queue.format(name=probe.name("slow"))
    before = probe.connect_frame()[:-2] + b"x-pad:"  # a CONNECT whose headers never end
    after = f"SEND\ndestination:{destination}\nx-pad:".encode()
    results = {}
    for name, data, handshake in (("before CONNECT", before, False),
                                  ("after CONNECT", after, True)):
        if time.monotonic() >= deadline:
            break
        results[name] = await _dribble(probe, data, handshake=handshake)
    options = probe.options
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
        return ProbeVerdict("slow-loris", Grade.FINDING, summary, detail=detail)
    if len(results) < 2:
        return ProbeVerdict("slow-loris", Grade.INFORMATIONAL, summary + " (budget spent)",
                            detail=detail)
    return ProbeVerdict("slow-loris", Grade.PASSED, summary, detail=detail)


# -- running -------------------------------------------------------------------------------

async def run_probes(target: Target, *, probes: Iterable[str] = PROBES,
                     options: ProbeOptions | None = None,
                     progress: Callable[[str], None] | None = None) -> list[ProbeVerdict]:
    """Run `probes` one after the other against `target`. Raises HarnessError when the
    broker cannot be reached or does not answer CONNECT; a probe that cannot go on later
    gets an INFORMATIONAL verdict saying why."""
    chosen = list(dict.fromkeys(probes))
    unknown = [p for p in chosen if p not in PROBES]
    if unknown:
        raise ValueError(f"unknown probe {', '.join(unknown)}: choose from {', '.join(PROBES)}")
    options = options or ProbeOptions()
    probe = _Probe(target, options)
    try:
        conn = await probe.connected()
    except _Failed as error:
        text = str(error)
        raise HarnessError(text if target.address.hostport in text
                           else f"{target.address.display}: {text}") from None
    await conn.close()
    verdicts = []
    for name in chosen:
        if progress is not None:
            progress(f"probe {name}")
        started = time.monotonic()
        budget = options.budget + (options.slow_budget * 2 if name == "slow-loris" else 0)
        deadline = started + budget
        work: Awaitable[ProbeVerdict]
        if name in _UNITS:
            work = _probe_limit(probe, name, deadline)
        elif name == "split":
            work = _probe_split(probe, deadline)
        elif name == "many-frames":
            work = _probe_many(probe, deadline)
        else:
            work = _probe_slow(probe, deadline)
        try:  # each probe checks its deadline between tries; this bounds a try too
            async with asyncio.timeout(budget + options.within * 3 + 5):
                verdict = await work
        except _Failed as error:
            verdict = ProbeVerdict(name, Grade.INFORMATIONAL, f"could not go on: {error}")
        except TimeoutError:
            verdict = ProbeVerdict(name, Grade.INFORMATIONAL,
                                   f"did not finish within its budget of {budget:g} s")
        verdicts.append(dataclasses.replace(verdict, duration_s=time.monotonic() - started))
    return verdicts


def probe(target: Target | None = None, *, probes: Iterable[str] = PROBES,
          options: ProbeOptions | None = None, broker: BrokerConfig | None = None,
          progress: Callable[[str], None] | None = None) -> list[ProbeVerdict]:
    """`run_probes` from synchronous code; with no target, against the reference broker
    in this process (configured by `broker`)."""

    async def go() -> list[ProbeVerdict]:
        if target is not None:
            return await run_probes(target, probes=probes, options=options, progress=progress)
        async with embedded(broker or BrokerConfig(port=0)) as server:
            where = Target(parse_broker(f"127.0.0.1:{server.port}"), load_profile("reference"))
            return await run_probes(where, probes=probes, options=options, progress=progress)

    return asyncio.run(go())


__all__ = ["PROBES", "Grade", "ProbeOptions", "ProbeVerdict", "probe",
           "run_probes"]
