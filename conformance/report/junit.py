"""JUnit XML, in the shape Jenkins' JUnit plugin (and GitLab, GitHub test reporters) read:
one testsuite per spec area, one testcase per case and version. Failed and non-strict are
failures, a harness error an error; informational and known deviations pass with a note in
system-out, so that they show without failing a build. Rendered from the JSON report's dict,
a broker's or a client's, as the other formats are (so a saved report renders the same).

junit-xml builds the elements; their attributes are then cut to the lists of the xunit
plugin's junit-10.xsd, which Jenkins validates against before reading a file (junit-xml's
`disabled` count, on every suite and on the root, is not in it)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from junit_xml import TestCase, TestSuite, to_xml_report_string

from conformance.files import write_atomic
from conformance.report import view
from conformance.report.rendering import escape_text, render_transcript
from conformance.runner.results import Outcome
from conformance.spec import catalogue
from conformance.wire.transcript import Record

#: the attributes junit-10.xsd allows on each element
ALLOWED = {
    "testsuites": ("name", "time", "tests", "failures", "errors"),
    "testsuite": ("name", "tests", "failures", "errors", "group", "time", "skipped",
                  "timestamp", "hostname", "id", "package", "file", "log", "url"),
    "testcase": ("name", "time", "classname", "group"),
}

_NOTED = {Outcome.INFORMATIONAL: "informational (a MAY or implementation-defined behaviour)",
          Outcome.KNOWN_DEVIATION: "known deviation declared by the profile"}


def _line(text: str) -> str:
    """One line for an attribute: XML parsers turn line breaks in attributes into spaces."""
    return escape_text(" ".join(text.split()))


def _statement(c: dict[str, Any]) -> str:
    return str(c["statement"] or (c["statements"][0] if c["statements"] else ""))


def _failure_text(c: dict[str, Any]) -> str:
    statement = _statement(c)
    known = catalogue()
    lines = [known[statement].quote if statement in known else f"(statement {statement!r} "
             "is not in the catalogue)"]
    if c["expected"] or c["observed"]:
        lines += [f"expected: {c['expected']}", f"observed: {c['observed']}"]
    elif c["message"]:
        lines.append(c["message"])
    if c["step_line"]:
        lines.append(f"at {c['file'] or c['id']}:{c['step_line']}")
    lines += [f"violation: {v}" for v in c["violations"]]
    return escape_text("\n".join(lines))


def _records(records: list[dict[str, Any]]) -> list[Record]:
    """A report's transcript records (octets as latin-1 characters) as Records again."""
    return [Record(r["t"], r["dir"], r["conn"], r.get("data", "").encode("latin-1"),
                   r.get("note", "")) for r in records]


def _system_out(c: dict[str, Any]) -> str | None:
    parts = []
    outcome = Outcome(c["outcome"])
    if outcome in _NOTED:
        note = c["deviation"] or c["message"]
        parts.append(escape_text(_NOTED[outcome] + (f": {note}" if note else "")))
    if c["transcript"]:
        parts.append(render_transcript(_records(c["transcript"])))
    return "\n\n".join(parts) or None


def _case(c: dict[str, Any]) -> TestCase:
    outcome = Outcome(c["outcome"])
    case = TestCase(f"{c['id']} [STOMP {c['version']}]", classname=f"stomp.{c['area']}",
                    # Whole milliseconds: junit-xml writes a suite's total with str(), which
                    # gives an exponent (no xs:decimal, some readers refuse it) below 0.0001.
                    # No file or line attributes: Jenkins' schema for testcase has none; the
                    # failure text names the YAML file and line instead.
                    elapsed_sec=round(c["duration_ms"] / 1000, 3), stdout=_system_out(c))
    if outcome in (Outcome.FAILED, Outcome.NON_STRICT):
        case.add_failure_info(message=_line(f"{_statement(c)}: {c['message']}"),
                              output=_failure_text(c), failure_type=outcome.value)
    elif outcome == Outcome.ERROR:
        case.add_error_info(message=_line(c["message"] or "the case could not run"),
                            output=escape_text(c["message"]) or None, error_type="error")
    elif outcome in (Outcome.SKIPPED, Outcome.UNSUPPORTED):
        case.add_skipped_info(message=_line(f"{outcome.value}: {c['message']}"
                                            if c["message"] else outcome.value))
    return case


def report_junit(report: dict[str, Any]) -> str:
    """The JUnit XML document of `report` (a dict from report_json or client_report_json,
    scrubbed already, or a saved JSON report loaded); each suite's properties name what the
    report judges, as the HTML page's header does."""
    areas: dict[str, list[dict[str, Any]]] = {}
    for c in report["cases"]:
        areas.setdefault(c["area"], []).append(c)
    properties = {label: escape_text(value) for label, value in view.subject(report).meta}
    suites = [TestSuite(area, [_case(c) for c in cases], properties=properties)
              for area, cases in sorted(areas.items())]
    # junit-xml also drops the octets XML 1.0 cannot carry: start from its flat text
    root = ET.fromstring(to_xml_report_string(suites, prettyprint=False, encoding="utf-8"))
    for element in root.iter():
        allowed = ALLOWED.get(element.tag)
        if allowed is not None:
            for name in set(element.attrib) - set(allowed):
                del element.attrib[name]
    # a plain decimal (the schema's time pattern has no exponent), summed per suite
    root.set("time", f"{sum(float(s.get('time', 0)) for s in root):.3f}")
    for suite in root:
        suite.set("time", f"{float(suite.get('time', 0)):.3f}")
    ET.indent(root, space="\t")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") \
        + "\n"


def write_junit(path: Path | str, report: dict[str, Any]) -> None:
    """Write the JUnit XML of `report` to `path` atomically."""
    write_atomic(Path(path), report_junit(report).encode("utf-8"))
