"""Making a reproducer small against the broker itself, under a time cap: first whole
frames are left out one at a time (as the project's parser reads the input), then delta
debugging (ddmin, complements only) leaves out lines. The pieces are the input's lines and
writes: the input is cut at every LF, at every write boundary and where each frame starts,
and a candidate is the input without some pieces, written with the boundaries that remain.
A candidate is tried on the broker only when `keep` says it is still an input of the same
sort (a broken input that still breaks its rule, a valid one still valid: rules.py), and
kept when replaying it on a fresh connection gives the same anomaly; so a reproducer never
shrinks into a different input that happens to show the same anomaly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from conformance.codec import Frame, Heartbeat, Parser, StompError
from conformance.fuzz.inputs.fuzz_input import FuzzInput

#: A piece of the input, and whether a write ends after it.
Piece = tuple[bytes, bool]
Reproduces = Callable[[FuzzInput], Awaitable[bool]]


def pieces(chunks: tuple[bytes, ...], cuts: Sequence[int] = ()) -> list[Piece]:
    """The writes cut after every LF and at each offset of `cuts` (frame starts)."""
    out: list[Piece] = []
    at = sorted(set(cuts))
    offset = 0
    for chunk in chunks:
        lines = chunk.splitlines(keepends=True) if b"\n" in chunk else [chunk]
        for line in lines:
            start = offset
            offset += len(line)
            inner = [c - start for c in at if start < c < offset]
            edges = [0, *inner, len(line)]
            out += [(line[a:b], False) for a, b in zip(edges, edges[1:], strict=False)
                    if b > a]
        if out:
            out[-1] = (out[-1][0], True)
    return out


def chunks_of(parts: list[Piece]) -> tuple[bytes, ...]:
    out: list[bytes] = []
    current = b""
    for data, ends in parts:
        current += data
        if ends:
            out.append(current)
            current = b""
    if current:
        out.append(current)
    return tuple(out)


def frame_starts(fuzz: FuzzInput) -> list[int]:
    """Offsets where the input's frames start (EOLs between frames go with the frame
    before), as the project's observing parser reads it; what it cannot read is one more
    unit."""
    parser = Parser(version=fuzz.version, strict=False)
    try:
        events = parser.feed(fuzz.data)
    except StompError as error:
        events = getattr(error, "events", [])
    starts = [e.offset for e in events if isinstance(e, Frame)]
    ends = [e.offset + e.size for e in events if isinstance(e, Frame)]
    ends += [e.offset + len(e.eol) for e in events if isinstance(e, Heartbeat)]
    rest = max(ends, default=0)
    if rest < len(fuzz.data):
        starts.append(rest)
    return sorted(set(starts) | {0})


def _units(parts: list[Piece], starts: list[int]) -> list[list[int]]:
    """Indexes of `parts`, grouped by the frame each starts in."""
    groups: dict[int, list[int]] = {}
    offset, frame = 0, 0
    for index, (data, _) in enumerate(parts):
        while frame + 1 < len(starts) and starts[frame + 1] <= offset:
            frame += 1
        groups.setdefault(frame, []).append(index)
        offset += len(data)
    return list(groups.values())


def _always(_: FuzzInput) -> bool:
    return True


async def minimise(fuzz: FuzzInput, reproduces: Reproduces, *, budget: float,
                   keep: Callable[[FuzzInput], bool] = _always) -> FuzzInput:
    """The smallest input found within `budget` seconds that still reproduces: first as
    one write, then with as few lines as ddmin gets to."""
    stop = time.monotonic() + budget
    best = fuzz
    if len(fuzz.chunks) > 1:
        whole = fuzz.with_chunks((fuzz.data,))
        if await reproduces(whole):
            best = whole
    parts = pieces(best.chunks, frame_starts(best))
    progress = True
    while progress and time.monotonic() < stop:  # whole frames first
        progress = False
        for unit in _units(parts, frame_starts(best)):
            if time.monotonic() >= stop or len(unit) == len(parts):
                break
            await asyncio.sleep(0)  # judging candidates locally must not hold up the rest
            gone = set(unit)
            candidate = [p for i, p in enumerate(parts) if i not in gone]
            trial = best.with_chunks(chunks_of(candidate))
            if keep(trial) and await reproduces(trial):
                parts, best, progress = candidate, trial, True
                break
    granularity = 2
    while len(parts) >= 2 and time.monotonic() < stop:
        size = max(len(parts) // granularity, 1)
        for start in range(0, len(parts), size):
            if time.monotonic() >= stop:
                break
            await asyncio.sleep(0)
            candidate = parts[:start] + parts[start + size:]
            trial = best.with_chunks(chunks_of(candidate))
            if candidate and keep(trial) and await reproduces(trial):
                parts, best = candidate, trial
                granularity = max(granularity - 1, 2)
                break
        else:
            if granularity >= len(parts):
                break
            granularity = min(granularity * 2, len(parts))
    return best
