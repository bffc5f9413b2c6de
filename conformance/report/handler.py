"""The reports as an engine handler: give it to Engine.run and the chosen files are written
when the run finishes, from the same results the console shows."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from conformance import __version__
from conformance.files import STDOUT, write_report
from conformance.report.html import render_html
from conformance.report.json_report import chunks, report_json
from conformance.report.junit import report_junit
from conformance.report.markdown import render_markdown
from conformance.report.records import write_records
from conformance.runner.events import RunEvent, RunFinished, RunStarted
from conformance.wire.target import Target


class ReportWriter:
    """Writes a JSON report, JUnit XML, pipeline records, an HTML page and a Markdown
    summary (each optional) on RunFinished; `written` lists the files in that order. A path
    of `-` (not the records folder) is standard output, left out of `written`; give it to one
    format only. The page and the summary are rendered from the JSON report's dict, as from
    a saved one."""

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

    def __call__(self, event: RunEvent) -> None:
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
                                 strict=self.strict, subprotocol=event.subprotocol)
        if self.json_path is not None:
            self._write(self.json_path, chunks(report))
        if self.junit_path is not None:
            self._write(self.junit_path, report_junit(event.results, target=target).encode())
        if self.records_dir is not None:
            self.written.append(write_records(
                self.records_dir, event.results, target=target, run_id=self.run_id,
                tool_version=self.tool_version, server=event.server.get("server")))
        if self.html_path is not None:
            self._write(self.html_path, render_html(report, history=self.history).encode())
        if self.markdown_path is not None:
            self._write(self.markdown_path, render_markdown(report).encode())

    def _write(self, path: Path | str, data: bytes | Iterable[bytes]) -> None:
        write_report(path, data)
        if str(path) != STDOUT:
            self.written.append(Path(path))
