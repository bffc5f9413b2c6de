"""Reports of a run: JSON (the source of the others), JUnit XML, pipeline records, the
single-file HTML page and the Markdown summary, the transcript rendering they share, and
`compare`, which lines up saved JSON reports. Every writer scrubs the passcode out first."""

from __future__ import annotations

from conformance.report.handler import ReportWriter
from conformance.report.html import render_html, write_html
from conformance.report.json_report import report_json, schema, write_json
from conformance.report.junit import report_junit, write_junit
from conformance.report.markdown import render_markdown, write_markdown
from conformance.report.records import case_records, write_records
from conformance.report.rendering import render_record, render_transcript
from conformance.report.scrub import scrub

__all__ = [
    "ReportWriter", "case_records", "render_html", "render_markdown", "render_record",
    "render_transcript", "report_json", "report_junit", "schema", "scrub", "write_html",
    "write_json", "write_junit", "write_markdown", "write_records",
]
