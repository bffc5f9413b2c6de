"""Reports of a run: JSON (the source of the others), JUnit XML, pipeline records, and the
transcript rendering they share. Every writer scrubs the passcode out first."""

from __future__ import annotations

from conformance.report.handler import ReportWriter
from conformance.report.json_report import report_json, schema, write_json
from conformance.report.junit import report_junit, write_junit
from conformance.report.records import case_records, write_records
from conformance.report.scrub import scrub
from conformance.report.transcript import render_record, render_transcript

__all__ = [
    "ReportWriter", "case_records", "render_record", "render_transcript", "report_json",
    "report_junit", "schema", "scrub", "write_json", "write_junit", "write_records",
]
