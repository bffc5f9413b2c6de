"""Replaying a finding: its reproducer sent again on fresh connections and judged by the
same oracle; it reproduces when an anomaly of the same signature shows. An outage (crash,
hang, leak) sends its input (or, unattributed, its suspects in order), then checks the
broker is alive: it reproduces when a new connection gets no CONNECTED. A broker the replay
launched (process.py) is started again after each try that brought it down."""

from __future__ import annotations

from dataclasses import dataclass, field

from conformance.fuzz.network.findings import Finding, signature
from conformance.fuzz.network.generators import Generator
from conformance.fuzz.network.oracle import Anomaly, Judgement, Oracle, Unreachable
from conformance.fuzz.network.process import BrokerProcess, crash_line


@dataclass
class Replayed:
    tries: int = 0
    reproduced: int = 0
    #: the judgement of each try (for a crash: the last suspect's), in order
    judgements: list[Judgement] = field(default_factory=list)
    #: the anomaly that matched, from the first try that reproduced
    matched: Anomaly | None = None


async def replay(finding: Finding, oracle: Oracle, generator: Generator, *,
                 times: int = 1, process: BrokerProcess | None = None) -> Replayed:
    """Send the finding's reproducer `times` times. Raises Unreachable when the broker
    cannot be reached before the first try."""
    why = await oracle.alive()
    if why is not None:
        raise Unreachable(why)
    out = Replayed()
    for _ in range(times):
        out.tries += 1
        if finding.kind.outage:
            await _outage_try(finding, oracle, generator, out, process)
            continue
        try:
            judgement = await generator.run(oracle, finding.input)
        except Unreachable as error:
            judgement = Judgement(ended=f"unreachable: {error}")
        out.judgements.append(judgement)
        for anomaly in judgement.anomalies:
            if signature(anomaly) == finding.signature:
                out.reproduced += 1
                out.matched = out.matched or anomaly
                break
    return out


async def _outage_try(finding: Finding, oracle: Oracle, generator: Generator,
                      out: Replayed, process: BrokerProcess | None) -> None:
    last = Judgement()
    for sent in finding.sent:
        try:
            last = await generator.run(oracle, sent)
        except Unreachable as error:
            last = Judgement(ended=f"unreachable: {error}")
            break
    out.judgements.append(last)
    why = await oracle.alive()
    if why is None and process is not None and process.exited() is None:
        return
    said = "" if process is None else crash_line(process.output(), process.exited())
    out.reproduced += 1
    out.matched = out.matched or Anomaly(
        finding.kind, finding.statement,
        f"a new connection gets no CONNECTED: {why or 'its process ended'}"
        + (f"; the broker said: {said}" if said else ""), about=said)
    if process is not None:
        await process.restart()
