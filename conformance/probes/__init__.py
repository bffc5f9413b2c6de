"""Limit and segmentation probes: how a broker copes with big frames, frames cut across
reads, frames that never end, and many frames in one read. Each probe gives a graded
`ProbeResult`; `run_probes` runs them one after the other against a Target the caller
gives (the `probe` verb starts the reference broker when no broker is named).

Data flows down from `run_probes` to each probe (limits: `header-count`, `header-line`,
`body`, with the grow-then-bisect search of search.py that the runner's `probe_limit`
step shares; segmentation: `split`, `slow-loris`, `many-frames`), which talks to the
broker over the wire's connections (session.py: fresh names, CONNECT, reading answers)
and hands back one result per probe.

Every wait has a deadline, every probe a time budget; what a broker sends goes through the
bounded observing parser of `conformance.wire.connection`, so no broker can hang the probes or
fill their memory."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterable

from conformance.probes.limits import UNITS, limit_probe
from conformance.probes.results import Grade, ProbeResult
from conformance.probes.segmentation import many_frames_probe, slow_loris_probe, split_probe
from conformance.probes.session import Failed, ProbeOptions, ProbeRun
from conformance.wire.target import HarnessError, Target

PROBES = ("header-count", "header-line", "body", "split", "slow-loris", "many-frames")


async def run_probes(target: Target, *, probes: Iterable[str] = PROBES,
                     options: ProbeOptions | None = None,
                     progress: Callable[[str], None] | None = None) -> list[ProbeResult]:
    """Run `probes` one after the other against `target`. Raises HarnessError when the
    broker cannot be reached or does not answer CONNECT; a probe that cannot go on later
    gets an INFORMATIONAL result saying why."""
    chosen = list(dict.fromkeys(probes))
    unknown = [p for p in chosen if p not in PROBES]
    if unknown:
        raise ValueError(f"unknown probe {', '.join(unknown)}: choose from {', '.join(PROBES)}")
    options = options or ProbeOptions()
    run = ProbeRun(target, options)
    try:
        conn = await run.connected()
    except Failed as error:
        text = str(error)
        raise HarnessError(text if target.address.hostport in text
                           else f"{target.address.display}: {text}") from None
    await conn.close()
    results = []
    for name in chosen:
        if progress is not None:
            progress(f"probe {name}")
        started = time.monotonic()
        budget = options.budget + (options.slow_budget * 2 if name == "slow-loris" else 0)
        deadline = started + budget
        work: Awaitable[ProbeResult]
        if name in UNITS:
            work = limit_probe(run, name, deadline)
        elif name == "split":
            work = split_probe(run, deadline)
        elif name == "many-frames":
            work = many_frames_probe(run, deadline)
        else:
            work = slow_loris_probe(run, deadline)
        try:  # each probe checks its deadline between tries; this bounds a try too
            async with asyncio.timeout(budget + options.within * 3 + 5):
                result = await work
        except Failed as error:
            result = ProbeResult(name, Grade.INFORMATIONAL, f"could not go on: {error}")
        except TimeoutError:
            result = ProbeResult(name, Grade.INFORMATIONAL,
                                 f"did not finish within its budget of {budget:g} s")
        results.append(dataclasses.replace(result, duration_s=time.monotonic() - started))
    return results


def probe(target: Target, *, probes: Iterable[str] = PROBES,
          options: ProbeOptions | None = None,
          progress: Callable[[str], None] | None = None) -> list[ProbeResult]:
    """`run_probes` from synchronous code."""
    return asyncio.run(run_probes(target, probes=probes, options=options, progress=progress))


__all__ = ["PROBES", "Grade", "ProbeOptions", "ProbeResult", "probe", "run_probes"]
