"""What a campaign is run with (Settings) and what it tells its handlers as it runs: the
events (Started, Progress, FindingSaved, Note, Finished) with the counters the display
shows (Stats). The live display and any other reporter handle CampaignEvents."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.fuzz.network.findings import Finding
from conformance.fuzz.network.folder import CampaignState


@dataclass(frozen=True)
class Settings:
    #: seconds this run fuzzes
    budget: float
    jobs: int = 16
    #: seconds an input may take; seconds a connection may stay open after ERROR
    deadline: float = 2.0
    grace: float = 1.0
    #: seconds spent minimising each finding (0: none)
    minimise: float = 10.0
    #: seconds between liveness checks (a new connection must still get CONNECTED)
    check_every: float = 0.5
    #: seconds to wait for a broker that failed its liveness check to answer again
    recovery: float = 10.0
    #: seconds between Progress events
    tick: float = 0.5


@dataclass
class Stats:
    """What the display shows: this run's share of the campaign's counters, and its rate."""

    elapsed: float = 0.0
    budget: float = 0.0
    inputs: int = 0
    total_inputs: int = 0
    #: inputs per second over the last few seconds
    rate: float = 0.0
    #: liveness checks
    checks: int = 0
    anomalies: int = 0
    unanswered: int = 0
    harness_errors: int = 0
    findings: dict[str, int] = field(default_factory=dict)  # grade -> count

    @property
    def found(self) -> int:
        return sum(self.findings.values())


@dataclass(frozen=True)
class Started:
    state: CampaignState
    resumed: bool
    findings: int
    settings: Settings
    folder: Path


@dataclass(frozen=True)
class Progress:
    stats: Stats


@dataclass(frozen=True)
class FindingSaved:
    finding: Finding
    path: Path
    #: False when an earlier save of the same finding is rewritten (confirmed, minimised)
    new: bool


@dataclass(frozen=True)
class Note:
    text: str


@dataclass(frozen=True)
class Finished:
    stats: Stats
    findings: list[Finding]
    reason: str


CampaignEvent = Started | Progress | FindingSaved | Note | Finished
Handler = Callable[[CampaignEvent], None]
