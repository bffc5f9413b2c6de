"""Replaying a finding: its reproducer sent again on fresh connections and judged by the
same oracle; it reproduces when an anomaly of the same signature shows. An outage (crash,
hang, leak) sends its input (or, unattributed, its suspects in order), then checks the
broker is alive: it reproduces when a new connection gets no CONNECTED. A broker the replay
launched (process.py) is started again after each try that brought it down."""

from __future__ import annotations

from dataclasses import dataclass, field

from conformance.fuzz.network.findings import Finding, signature
from conformance.fuzz.network.generators import Generator
from conformance.fuzz.network.oracle import Anomaly, Judgement, Kind, Oracle, Unreachable
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
    cannot be reached before the first try (a launched one is started again first: an
    input replayed before may have brought it down)."""
    out = Replayed()
    await _up(oracle, process)
    for _ in range(times):
        if out.tries and process is not None:
            await _up(oracle, process)
        out.tries += 1
        if finding.kind.outage:
            await _outage_try(finding, oracle, generator, out, process)
            continue
        try:
            judgement = await generator.run(oracle, finding.input)
        except Unreachable as error:
            judgement = Judgement(ended=f"unreachable: {error}")
        down = await _down(oracle, process) if process is not None else None
        if down is not None:  # what the answer showed was the broker dying: a crash's
            judgement = Judgement(anomalies=[down], response=judgement.response,
                                  ended=f"{judgement.ended}, the broker down")
        out.judgements.append(judgement)
        for anomaly in judgement.anomalies:
            if signature(anomaly) == finding.signature:
                out.reproduced += 1
                out.matched = out.matched or anomaly
                break
    return out


async def _up(oracle: Oracle, process: BrokerProcess | None) -> None:
    """The broker taking connections: a launched one that is down is started again;
    Unreachable for one that is not launched."""
    if process is not None and process.exited() is not None:
        await process.restart()
        return
    why = await oracle.alive()
    if why is None:
        return
    if process is None:
        raise Unreachable(why)
    await process.restart()


async def _outage_try(finding: Finding, oracle: Oracle, generator: Generator,
                      out: Replayed, process: BrokerProcess | None) -> None:
    last = Judgement()
    for sent in finding.sent:
        try:
            last = await generator.run(oracle, sent)
        except Unreachable as error:
            last = Judgement(ended=f"unreachable: {error}")
            break
    down = await _down(oracle, process, finding)
    if down is not None:
        last.anomalies.append(down)
    out.judgements.append(last)
    if down is None:
        return
    # two ways to kill a broker are two findings: a launched one's last words tell them apart
    if process is None or not finding.about or down.about == finding.about:
        out.reproduced += 1
        out.matched = out.matched or down
    if process is not None:
        await process.restart()


async def _down(oracle: Oracle, process: BrokerProcess | None,
                finding: Finding | None = None) -> Anomaly | None:
    """The outage (as `finding`'s kind, else a crash) when the broker takes no connection
    or its launched process ended; None while it is up."""
    why = await oracle.alive()
    if why is None and (process is None or process.exited() is None):
        return None
    said = "" if process is None else crash_line(process.output(), process.exited())
    kind, statement = (finding.kind, finding.statement) if finding else \
        (Kind.CRASH, "connecting.connected-response")
    return Anomaly(kind, statement,
                   f"a new connection gets no CONNECTED: {why or 'its process ended'}"
                   + (f"; the broker said: {said}" if said else ""), about=said)
