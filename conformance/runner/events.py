"""What the engine tells its handlers as a run goes: the CLI, the pytest plugin and every
report are handlers of these events; none of them runs a case itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from conformance.runner.results import CaseResult
from conformance.scenario import Case
from conformance.wire.target import Target


@dataclass(frozen=True)
class RunStarted:
    target: Target
    total: int


@dataclass(frozen=True)
class CaseStarted:
    case: Case
    version: str


@dataclass(frozen=True)
class CaseFinished:
    result: CaseResult


@dataclass(frozen=True)
class RunFinished:
    results: list[CaseResult]
    duration: float
    #: headers of the broker's CONNECTED seen first (server, version, ...)
    server: dict[str, str]
    #: over WebSocket: the subprotocol the broker accepted (None over TCP)
    subprotocol: str | None = None


#: One event of a run (the codec's `Event` and the connection's `Received` are what a
#: broker sent).
RunEvent = RunStarted | CaseStarted | CaseFinished | RunFinished
Handler = Callable[[RunEvent], None]
