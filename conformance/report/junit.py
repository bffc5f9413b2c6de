"""JUnit XML, in the shape Jenkins' JUnit plugin (and GitLab, GitHub test reporters) read:
one testsuite per spec area, one testcase per case and version. Failed and non-strict are
failures, a harness error an error; informational and known deviations pass with a note in
system-out, so that they show without failing a build.

junit-xml builds the elements; their attributes are then cut to the lists of the xunit
plugin's junit-10.xsd, which Jenkins validates against before reading a file (junit-xml's
`disabled` count, on every suite and on the root, is not in it)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from junit_xml import TestCase, TestSuite, to_xml_report_string

from conformance.files import write_atomic
from conformance.report.rendering import escape_text, render_transcript
from conformance.report.scrub import scrub
from conformance.runner.results import CaseResult, Outcome
from conformance.spec import catalogue

if TYPE_CHECKING:
    from conformance.wire.target import Target

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


def _statement(r: CaseResult) -> str:
    return r.statement or (r.statements[0] if r.statements else "")


def _failure_text(r: CaseResult) -> str:
    statement = _statement(r)
    known = catalogue()
    lines = [known[statement].quote if statement in known else f"(statement {statement!r} "
             "is not in the catalogue)"]
    if r.expected or r.observed:
        lines += [f"expected: {r.expected}", f"observed: {r.observed}"]
    elif r.message:
        lines.append(r.message)
    if r.step_line:
        lines.append(f"at {r.file or r.id}:{r.step_line}")
    lines += [f"violation: {v}" for v in r.violations]
    return escape_text("\n".join(lines))


def _system_out(r: CaseResult) -> str | None:
    parts = []
    if r.outcome in _NOTED:
        note = r.deviation or r.message
        parts.append(escape_text(_NOTED[r.outcome] + (f": {note}" if note else "")))
    if r.transcript:
        parts.append(render_transcript(r.transcript))
    return "\n\n".join(parts) or None


def _case(r: CaseResult) -> TestCase:
    case = TestCase(f"{r.id} [STOMP {r.version}]", classname=f"stomp.{r.area}",
                    # Whole milliseconds: junit-xml writes a suite's total with str(), which
                    # gives an exponent (no xs:decimal, some readers refuse it) below 0.0001.
                    # No file or line attributes: Jenkins' schema for testcase has none; the
                    # failure text names the YAML file and line instead.
                    elapsed_sec=round(r.duration_ms / 1000, 3), stdout=_system_out(r))
    if r.outcome in (Outcome.FAILED, Outcome.NON_STRICT):
        case.add_failure_info(message=_line(f"{_statement(r)}: {r.message}"),
                              output=_failure_text(r), failure_type=r.outcome.value)
    elif r.outcome == Outcome.ERROR:
        case.add_error_info(message=_line(r.message or "the case could not run"),
                            output=escape_text(r.message) or None, error_type="error")
    elif r.outcome in (Outcome.SKIPPED, Outcome.UNSUPPORTED):
        case.add_skipped_info(message=_line(f"{r.outcome.value}: {r.message}"
                                            if r.message else r.outcome.value))
    return case


def report_junit(results: list[CaseResult], *, target: Target) -> str:
    """The JUnit XML document, with the target's passcode scrubbed out."""
    clean = scrub(results, target)
    areas: dict[str, list[CaseResult]] = {}
    for r in clean:
        areas.setdefault(r.area, []).append(r)
    properties = {"broker": target.address.display, "profile": target.profile.name}
    suites = [TestSuite(area, [_case(r) for r in cases], properties=properties)
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


def write_junit(path: Path | str, results: list[CaseResult], *, target: Target) -> None:
    """Write the JUnit XML of `results` to `path` atomically."""
    write_atomic(Path(path), report_junit(results, target=target).encode("utf-8"))
