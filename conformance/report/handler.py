"""The reports as an engine handler: give it to Engine.run and the chosen files are written
when the run finishes, from the same results the console shows. A client run (which has no
engine events) gives its JSON report's dict to `write`, the same path."""

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
from conformance.scenario import Selection
from conformance.wire.target import Target


class ReportWriter:
    """Writes a JSON report, JUnit XML, an HTML page, a Markdown summary and pipeline
    records (each optional) on RunFinished; `written` lists the files in that order. A path
    of `-` (not the records folder) is standard output, left out of `written`; give it to one
    format only. Every format but the records is rendered from the JSON report's dict, as
    from a saved one."""

    def __init__(self, *, run_id: str, json_path: Path | str | None = None,
                 junit_path: Path | str | None = None, records_dir: Path | str | None = None,
                 html_path: Path | str | None = None, markdown_path: Path | str | None = None,
                 history: dict[str, Any] | None = None,
                 tool_version: str = __version__, strict: bool = False,
                 catalogue: Selection | None = None) -> None:
        self.run_id, self.tool_version = run_id, tool_version
        self.strict = strict  # the engine's: recorded in the report's certification
        self.catalogue = catalogue  # what the run took of its catalogue: recorded there too
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
        if self.wanted:
            # One dict for every format: scrubbing a run's transcripts is not free.
            self.write(report_json(event.results, target=target, server=event.server,
                                   duration=event.duration, tool_version=self.tool_version,
                                   strict=self.strict, subprotocol=event.subprotocol,
                                   catalogue=self.catalogue))
        if self.records_dir is not None:
            self.written.append(write_records(
                self.records_dir, event.results, target=target, run_id=self.run_id,
                tool_version=self.tool_version, server=event.server.get("server")))

    @property
    def wanted(self) -> bool:
        """Whether any format rendered from the JSON report's dict was asked for."""
        return any(path is not None for path in (self.json_path, self.junit_path,
                                                 self.html_path, self.markdown_path))

    def write(self, report: dict[str, Any]) -> None:
        """Each chosen format of `report`: the dict of report_json, or of client_report_json
        for a client library's run."""
        if self.json_path is not None:
            self._write(self.json_path, chunks(report))
        if self.junit_path is not None:
            self._write(self.junit_path, report_junit(report).encode())
        if self.html_path is not None:
            self._write(self.html_path, render_html(report, history=self.history).encode())
        if self.markdown_path is not None:
            self._write(self.markdown_path, render_markdown(report).encode())

    def _write(self, path: Path | str, data: bytes | Iterable[bytes]) -> None:
        write_report(path, data)
        if str(path) != STDOUT:
            self.written.append(Path(path))
