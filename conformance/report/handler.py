"""The reports as an engine handler: give it to Engine.run and the chosen files are written
when the run finishes, from the same results the console shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance import __version__
from conformance.engine import EngineEvent, RunFinished, RunStarted, Target
from conformance.report.html import write_html
from conformance.report.json_report import report_json, write_json
from conformance.report.junit import write_junit
from conformance.report.markdown import write_markdown
from conformance.report.records import write_records


class ReportWriter:
    """Writes a JSON report, JUnit XML, pipeline records, an HTML page and a Markdown
    summary (each optional) on RunFinished; `written` lists the files in that order. The
    page and the summary are rendered from the JSON report's dict, as from a saved one."""

    def __init__(self, *, run_id: str, json_path: Path | str | None = None,
                 junit_path: Path | str | None = None, records_dir: Path | str | None = None,
                 html_path: Path | str | None = None, markdown_path: Path | str | None = None,
                 history: dict[str, Any] | None = None,
                 tool_version: str = __version__, strict: bool = False) -> None:
        self.run_id, self.tool_version = run_id, tool_version
        self.strict = strict  # the engine's: recorded in the report's certification
        self.json_path, self.junit_path, self.records_dir = json_path, junit_path, records_dir
        self.html_path, self.markdown_path = html_path, markdown_path
        self.history = history  # a loaded report-data.json, for the page's history sections
        self.target: Target | None = None
        self.written: list[Path] = []

    def __call__(self, event: EngineEvent) -> None:
        if isinstance(event, RunStarted):
            self.target = event.target
        elif isinstance(event, RunFinished):
            if self.target is None:
                raise RuntimeError("RunFinished before RunStarted: no target to report on")
            self.finish(event, self.target)

    def finish(self, event: RunFinished, target: Target) -> None:
        report: dict[str, Any] = {}
        if any(p is not None for p in (self.json_path, self.html_path, self.markdown_path)):
            # One dict for the three: scrubbing a run's transcripts is not free.
            report = report_json(event.results, target=target, server=event.server,
                                 duration=event.duration, tool_version=self.tool_version,
                                 strict=self.strict)
        if self.json_path is not None:
            write_json(self.json_path, report)
            self.written.append(Path(self.json_path))
        if self.junit_path is not None:
            write_junit(self.junit_path, event.results, target=target)
            self.written.append(Path(self.junit_path))
        if self.records_dir is not None:
            self.written.append(write_records(
                self.records_dir, event.results, target=target, run_id=self.run_id,
                tool_version=self.tool_version, server=event.server.get("server")))
        if self.html_path is not None:
            write_html(self.html_path, report, self.history)
            self.written.append(Path(self.html_path))
        if self.markdown_path is not None:
            write_markdown(self.markdown_path, report)
            self.written.append(Path(self.markdown_path))
