"""What a campaign shows while it runs: on a terminal a live panel (elapsed and budget,
inputs and inputs/s, liveness checks, anomalies, findings by grade) with each finding printed above
it as it is found; elsewhere (CI logs, pipes) one plain line every `every` seconds and one
per finding. Both end with a summary.

A resumed campaign adds this run to earlier ones: elapsed time, inputs and liveness checks are this
run's, anomalies and findings the campaign's so far, and each figure says which it is."""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from conformance.fuzz.network.events import (
    CampaignEvent,
    FindingSaved,
    Finished,
    Note,
    Progress,
    Started,
    Stats,
)
from conformance.fuzz.network.findings import Finding, counts
from conformance.report.console import make_console
from conformance.runner.results import Outcome

#: what an anomaly is, said once in the summary next to the count
ANOMALY = "answers the oracle judged off the spec, before findings are told apart by signature"

STYLE = {Outcome.FAILED.value: "bold red", Outcome.NON_STRICT.value: "yellow",
         Outcome.INFORMATIONAL.value: "cyan", "not confirmed": "dim"}


def _tally(stats: Stats) -> str:
    parts = [f"{stats.findings[g]} {g}" for g in STYLE if stats.findings.get(g)]
    return ", ".join(parts) or "none"


def _finding_line(finding: Finding, path: str) -> Text:
    if finding.confirmed is False:  # sent again with a longer deadline, it did not show
        line = Text(f"{'unconfirmed':13}", style="dim")
        line.append(f" ({finding.grade.value})", style="dim")
    else:
        line = Text(f"{finding.grade.value:13}", style=STYLE.get(finding.grade.value, ""))
    line.append(f" {finding.kind.value} ", style="bold")
    line.append(f"{finding.statement} [{finding.input.mutation}, STOMP {finding.input.version}]")
    line.append(f"  {path}", style="dim")
    return line


class CampaignDisplay:
    """A handler of campaign events (CampaignEvent)."""

    def __init__(self, console: Console | None = None, *, live: bool | None = None,
                 every: float = 10.0) -> None:
        self.console = console or make_console(stderr=True)
        self.live_mode = self.console.is_terminal if live is None else live
        self.every = every
        self._live: Live | None = None
        self._last_line = 0.0
        self._stats = Stats()
        self._header = ""

    def __call__(self, event: CampaignEvent) -> None:
        if isinstance(event, Started):
            self._started(event)
        elif isinstance(event, Progress):
            self._stats = event.stats
            if self._live is not None:
                self._live.update(self._panel())
            elif time.monotonic() - self._last_line >= self.every:
                self._last_line = time.monotonic()
                self.console.print(self._plain(event.stats), soft_wrap=True)
        elif isinstance(event, FindingSaved):
            if event.new:
                self.console.print(Text("found ", style="bold") +
                                   _finding_line(event.finding, str(event.path)),
                                   soft_wrap=True)
            elif event.finding.confirmed is False:
                self.console.print(Text(f"not confirmed: {event.finding.id} did not show "
                                        "again (sent with five times the deadline)",
                                        style="dim"), soft_wrap=True)
            elif event.finding.minimised:
                f = event.finding
                self.console.print(Text(f"minimised {f.id}: {f.original_octets} -> "
                                        f"{len(f.input.data)} octets", style="dim"),
                                   soft_wrap=True)
        elif isinstance(event, Note):
            self.console.print(Text(event.text, style="yellow"), soft_wrap=True)
        elif isinstance(event, Finished):
            self._finished(event)

    def _started(self, event: Started) -> None:
        state = event.state
        again = (f", resumed (run {state.counters.runs}, {state.counters.inputs} inputs and "
                 f"{event.findings} findings before)" if event.resumed else "")
        self._header = (f"fuzzing {state.broker.id} for {event.settings.budget:g} s with "
                        f"{event.settings.jobs} jobs, seed {state.seed}, campaign "
                        f"{state.campaign} in {event.folder}{again}")
        self.console.print(self._header, soft_wrap=True)
        self._last_line = time.monotonic()
        if self.live_mode:
            self._live = Live(self._panel(), console=self.console, refresh_per_second=4,
                              transient=True)
            self._live.start()

    def _panel(self) -> Group:
        s = self._stats
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        table.add_row("elapsed", f"{s.elapsed:6.1f} s of {s.budget:g} s")
        table.add_row("inputs", f"{s.inputs} ({s.total_inputs} in the campaign)")
        table.add_row("inputs/s", f"{s.rate:7.0f}")
        table.add_row("liveness checks", str(s.checks))
        table.add_row("anomalies", f"{s.anomalies} in the campaign")
        table.add_row("findings", Text(f"{_tally(s)} in the campaign",
                                       style="bold" if s.found else ""))
        if s.unanswered or s.harness_errors:
            table.add_row("unanswered", f"{s.unanswered} handshakes, "
                                        f"{s.harness_errors} harness errors")
        return Group(table)

    @staticmethod
    def _plain(s: Stats) -> str:
        return (f"fuzz: {s.elapsed:.0f}/{s.budget:g} s, {s.inputs} inputs ({s.rate:.0f}/s), "
                f"{s.checks} liveness checks; in the campaign: {s.anomalies} anomalies, findings: "
                f"{_tally(s)}")

    def _finished(self, event: Finished) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        s = event.stats
        rate = s.inputs / s.elapsed if s.elapsed > 0 else 0.0
        self.console.print(f"stopped ({event.reason}) after {s.elapsed:.1f} s: this run sent "
                           f"{s.inputs} inputs ({rate:.0f}/s, liveness checks included) and "
                           f"{s.checks} liveness checks; the campaign so far: "
                           f"{s.total_inputs} inputs, {s.anomalies} anomalies ({ANOMALY})",
                           soft_wrap=True)
        if s.unanswered:
            self.console.print(f"{s.unanswered} handshakes went unanswered while the broker "
                               "passed its liveness checks", soft_wrap=True)
        if s.harness_errors:
            self.console.print(Text(f"{s.harness_errors} inputs hit a harness error (a fault "
                                    "of the fuzzer, not the broker)", style="bold red"),
                               soft_wrap=True)
        for finding in event.findings:
            self.console.print(_finding_line(finding, finding.id), soft_wrap=True)
        self.console.print(f"{len(event.findings)} findings in the campaign: {_tally(s)}",
                           soft_wrap=True)
        left = [f for f in event.findings if not counts(f)]
        if left:
            self.console.print(f"{len(left)} findings do not count for the exit code: not "
                               "shown again when sent again with five times the deadline, or "
                               "timeouts not sent again yet", soft_wrap=True)
