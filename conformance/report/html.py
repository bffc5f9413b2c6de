"""The single-file HTML report, rendered from the JSON report dict (so a saved report.json
renders the same page). It needs no network: CSS and the filter script are inline.

Everything the broker sent (or a client library reported) reaches the page through Jinja2's
autoescaping, and the page's Content-Security-Policy lets only its own script run (by hash),
so a `<script>` in an ERROR body is text twice over."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from conformance.files import write_atomic
from conformance.report import view
from conformance.report.history import history_view
from conformance.report.rendering import pieces, show_hidden

#: Octets of one record shown on the page; the JSON report keeps them all.
RECORD_LIMIT = 16 * 1024
#: Records of one case shown on the page (byte-at-a-time cases have thousands).
RECORDS_LIMIT = 2000
_ARROWS = {"out": "\u2192", "in": "\u2190", "close": "\u00d7", "note": "\u00b7"}
#: The tooltip of each transcript mark (others are `\xHH` octets).
_MARKS = {"^@": "NUL (octet 0)", "^M": "CR (octet 13)", "\u21b5": "LF (octet 10)"}


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("conformance.report", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True)


@cache
def script_hash() -> str:
    """The CSP source of the inline script, which base.html.j2 includes verbatim."""
    script = environment().get_template("filters.js.j2").render()
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


def render_page(template: str, **context: Any) -> str:
    return environment().get_template(template).render(script_hash=script_hash(), **context)


def _record(record: dict[str, Any]) -> dict[str, Any]:
    data = record.get("data", "").encode("latin-1")
    note = show_hidden(record.get("note", ""))
    if len(data) > RECORD_LIMIT:
        note = f"{note}; " if note else ""
        note += f"{len(data) - RECORD_LIMIT:,} more octets not shown (see the JSON report)"
        data = data[:RECORD_LIMIT]
    return {"t": f"+{record['t']:.6f}", "dir": record["dir"], "arrow": _ARROWS[record["dir"]],
            "conn": record["conn"], "pieces": pieces(data), "note": note}


def _transcript(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    shown = [_record(r) for r in records[:RECORDS_LIMIT]]
    if len(records) > RECORDS_LIMIT:
        shown.append({"t": "", "dir": "note", "arrow": _ARROWS["note"], "conn": "", "pieces": [],
                      "note": f"{len(records) - RECORDS_LIMIT:,} more records not shown"})
    return shown


def _case(case: dict[str, Any]) -> dict[str, Any]:
    where = f"{case['file']}:{case['line']}" if case["file"] else ""
    if case["step_line"] and case["step_line"] != case["line"]:
        where += f" (decided at line {case['step_line']})"
    return {
        "id": case["id"], "title": show_hidden(case["title"]), "version": case["version"],
        "outcome": case["outcome"], "level": case["level"], "area": case["area"],
        "duration": f"{case['duration_ms']:,.0f} ms", "broken": case["statement"],
        "statements": view.statement_texts(case["statements"]),
        "message": show_hidden(case["message"]), "expected": show_hidden(case["expected"]),
        "observed": show_hidden(case["observed"]), "deviation": show_hidden(case["deviation"]),
        "violations": [show_hidden(v) for v in case["violations"]], "where": where,
        "records": len(case["transcript"]), "transcript": _transcript(case["transcript"]),
    }


def _bars(report: dict[str, Any]) -> list[dict[str, Any]]:
    bars = []
    for area, counts in view.area_counts(report).items():
        total = sum(counts.values())
        bars.append({"area": area, "total": total, "segments": [
            (outcome, n, f"{100 * n / total:.3f}") for outcome, n in counts.items() if n]})
    return bars


def stamp(when: datetime | None) -> str:
    """When the page was made (the JSON report holds the run's duration, not its date)."""
    return (when or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def render_html(report: dict[str, Any], *, generated: datetime | None = None,
                history: dict[str, Any] | None = None) -> str:
    """The page for `report` (a dict from report_json or client_report_json, or a saved JSON
    report loaded), with the history sections when given a loaded report-data.json."""
    bars = _bars(report)
    return render_page(
        "report.html.j2", report=report, generated=stamp(generated),
        level_lines=view.level_lines(report), counts=view.outcome_counts(report),
        verdict=view.verdict(report), catalogue=view.catalogue_line(report), bars=bars,
        areas=[bar["area"] for bar in bars],
        outcomes=view.OUTCOMES, marks=_MARKS, cases=[_case(c) for c in report["cases"]],
        subject=view.subject(report), show=show_hidden,
        history=history_view(history) if history is not None else None)


def render_history(history: dict[str, Any]) -> str:
    """The history sections alone, as a page."""
    return render_page("history_page.html.j2", history=history_view(history))


def write_html(path: Path | str, report: dict[str, Any],
               history: dict[str, Any] | None = None) -> None:
    """Write the HTML page of `report` to `path` atomically."""
    write_atomic(Path(path), render_html(report, history=history).encode("utf-8"))
