"""The console reporter: a progress line while cases run, then a summary and the cases that
did not pass, each with its statement and expected vs observed, and last the certification
verdict. Honours NO_COLOR (rich). `make_console` is the console every verb prints with."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from conformance.report.verdict import certify
from conformance.runner.events import CaseFinished, RunEvent, RunFinished, RunStarted
from conformance.runner.results import Outcome, summarise
from conformance.scenario import Selection

STYLE = {
    Outcome.PASSED: "green", Outcome.FAILED: "bold red", Outcome.NON_STRICT: "yellow",
    Outcome.INFORMATIONAL: "cyan", Outcome.UNSUPPORTED: "dim", Outcome.KNOWN_DEVIATION: "magenta",
    Outcome.ERROR: "bold red", Outcome.SKIPPED: "dim",
}


def make_console(*, stderr: bool = False) -> Console:
    """A console that wraps lines at the terminal's width on a terminal and leaves them
    whole elsewhere (CI logs, pipes): rich would cut them at 80 columns there, mid-path,
    where a reader searches for a case path or a tool reads a line at a time."""
    console = Console(stderr=stderr, highlight=False)
    console.soft_wrap = not console.is_terminal
    return console


class ConsoleReporter:
    def __init__(self, console: Console | None = None, *, client: bool = False,
                 catalogue: Selection | None = None) -> None:
        self.console = console or make_console(stderr=True)
        self.client = client  # the run judged a client library: its verdict says so
        self.catalogue = catalogue  # what the run is of its catalogue: certified if whole
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[tally]}"),
                                 TimeElapsedColumn(), console=self.console, transient=True)
        self.task = self.progress.add_task("cases", total=0, tally="")
        self.failed = 0

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, RunStarted):
            self.console.print(f"stomp-conformance: {event.total} case runs against "
                               f"{event.target.address.display} "
                               f"(profile {event.target.profile.name})")
            self.progress.update(self.task, total=event.total)
            self.progress.start()
        elif isinstance(event, CaseFinished):
            self.failed += event.result.outcome in (Outcome.FAILED, Outcome.ERROR)
            self.progress.update(self.task, advance=1, tally=f"{self.failed} failed")
        elif isinstance(event, RunFinished):
            self.progress.stop()
            self.finish(event)

    def finish(self, event: RunFinished) -> None:
        results = event.results
        for r in results:
            if r.outcome in (Outcome.PASSED, Outcome.SKIPPED, Outcome.UNSUPPORTED):
                continue
            line = Text(f"{r.outcome.value:15}", style=STYLE[r.outcome])
            line.append(f" {r.id} [{r.version}]", style="bold")
            line.append(f"  {r.file}:{r.step_line or r.line}\n    ")
            line.append(r.deviation or r.message or "")
            self.console.print(line)
        skipped = Counter(r.message for r in results if r.outcome == Outcome.SKIPPED)
        for reason, count in sorted(skipped.items()):
            self.console.print(Text(f"skipped {count} case runs: {reason or 'no reason'}",
                                    style=STYLE[Outcome.SKIPPED]))
        summary = summarise(results)
        self.console.print(f"{summary['total']} case runs in {event.duration:.1f} s")
        table = Table(show_header=True)
        table.add_column("outcome")
        table.add_column("count", justify="right")
        for outcome in Outcome:
            count = summary["outcomes"][outcome.value]
            if count:
                table.add_row(Text(outcome.value, style=STYLE[outcome]), str(count))
        self.console.print(table)
        server = event.server.get("server")
        if server:
            self.console.print(Text(f"server: {server}", style="dim"))
        # the line every report opens with
        certification = certify(results, client=self.client, catalogue=self.catalogue)
        colour = {True: "bold green", False: "bold red", None: "bold yellow"}
        self.console.print(Text(certification.text, style=colour[certification.conforms]),
                           soft_wrap=True)
