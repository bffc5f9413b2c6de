"""`compare`: several JSON reports side by side. Rows are case runs (`id [version]`, the
union over the reports, so reports of different catalogues line up), columns are brokers,
a cell is the outcome or '—' where a report has no such run; above them, each broker's
MUST score per version and outcome counts. Rendered as a single-file HTML page, as
Markdown, and as a compact JSON of outcomes alone (what reports/ commits).

A broker that could not be run is named with the reason (`not_run`), so a comparison says
what it lacks instead of leaving a column out silently."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from conformance.report import view
from conformance.report.html import render_page, stamp
from conformance.report.json_report import dumps
from conformance.report.markdown import SYMBOLS, cell, code, fit, table
from conformance.report.rendering import show_hidden

MISSING = "\u2014"
#: Characters of a broker's name (a profile, or its server header) in a column head.
NAME = 60
#: Characters of the message a cell of the HTML matrix shows on hover.
TIP = 300
#: Version of the compact JSON (compare --json).
SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    version: str
    area: str
    #: one per broker: the outcome, or None where that report has no such case run
    cells: tuple[str | None, ...]
    #: one per broker: the case's message (or the profile's reason for a known deviation)
    notes: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.id} [{self.version}]"

    @property
    def key(self) -> str:
        """`id@version`, as profiles name a deviation at one version."""
        return f"{self.id}@{self.version}"

    @property
    def differs(self) -> bool:
        return len(set(self.cells)) > 1


@dataclass(frozen=True, slots=True)
class Matrix:
    brokers: tuple[str, ...]
    reports: tuple[dict[str, Any], ...]
    rows: tuple[Row, ...]
    #: (broker, reason) for each broker the comparison should have had and does not
    not_run: tuple[tuple[str, str], ...] = ()

    @property
    def versions(self) -> list[str]:
        return sorted({v for r in self.reports for v in r["summary"]["versions"]})

    def scores(self) -> list[tuple[str, list[str | None]]]:
        """Per version: each broker's MUST passed/total, None where none ran."""
        return [(version, [view.must_score(r, version) for r in self.reports])
                for version in self.versions]

    def counts(self) -> list[tuple[str, list[int]]]:
        """Per outcome any broker had: each broker's count of it."""
        counts = [view.outcome_counts(r) for r in self.reports]
        return [(outcome, [c[outcome] for c in counts]) for outcome in view.OUTCOMES
                if any(c[outcome] for c in counts)]

    @property
    def differing(self) -> list[Row]:
        return [row for row in self.rows if row.differs]


def transport(report: dict[str, Any]) -> str:
    """The transport a report's run went over: "ws" (ws:// or wss://) or "tcp"."""
    return "ws" if str(report["broker"]["url"]).startswith(("ws://", "wss://")) else "tcp"


def broker_names(reports: list[dict[str, Any]], sources: list[str]) -> list[str]:
    """A column name per report: its profile (or server header); where two share a name,
    the transport (the same broker over TCP and WebSocket), then the server header, then
    the file name, then a number tells them apart."""
    names = [view.one_line(r["broker"]["profile"] or r["broker"]["server"] or Path(s).stem,
                           limit=NAME) for r, s in zip(reports, sources, strict=True)]
    extras = ([transport(r) for r in reports],
              [view.one_line(r["broker"]["server"] or "", limit=NAME) for r in reports],
              [Path(s).stem for s in sources])
    for extra in extras:
        shared = Counter(names)
        pairs = Counter(zip(names, extra, strict=True))
        names = [f"{n} ({e})" if shared[n] > 1 and e and pairs[n, e] == 1 else n
                 for n, e in zip(names, extra, strict=True)]
    seen: Counter[str] = Counter()
    unique = []
    for name in names:
        seen[name] += 1
        unique.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return unique


def _note(case: dict[str, Any]) -> str:
    return str(case["deviation"] or case["message"])


def compare(reports: list[dict[str, Any]], sources: list[str], *,
            not_run: Sequence[tuple[str, str]] = ()) -> Matrix:
    """The matrix of `reports` (loaded JSON reports; `sources` name their files);
    `not_run` names the brokers that could not be run, with why."""
    by_key = [{(c["id"], c["version"]): c for c in r["cases"]} for r in reports]
    keys = sorted({key for cases in by_key for key in cases})
    rows = []
    for key in keys:
        present = [cases[key] for cases in by_key if key in cases]
        rows.append(Row(key[0], key[1], present[0]["area"],
                        tuple(cases[key]["outcome"] if key in cases else None
                              for cases in by_key),
                        tuple(_note(cases[key]) if key in cases else "" for cases in by_key)))
    return Matrix(tuple(broker_names(reports, sources)), tuple(reports), tuple(rows),
                  tuple(not_run))


#: The symbol of each outcome alone: a matrix cell is narrow.
MARKS = {outcome: symbol.split(" ")[0] for outcome, symbol in SYMBOLS.items()}


def compare_markdown(matrix: Matrix) -> str:
    """The matrix as Markdown within a GitHub comment's size: scores and counts per broker,
    the case runs that differ, then every case run in a folded block."""
    head = ["", *(cell(name) for name in matrix.brokers)]
    summary = [[f"MUST, STOMP {version}", *(s or MISSING for s in row)]
               for version, row in matrix.scores()]
    summary += [[SYMBOLS[outcome], *map(str, row)] for outcome, row in matrix.counts()]

    def rows(chosen: list[Row]) -> list[str]:
        return table(["case run", *head[1:]], [
            [code(r.label), *(MARKS[c] if c else MISSING for c in r.cells)] for r in chosen])

    differing = matrix.differing
    legend = " \u00b7 ".join([*(SYMBOLS[o] for o in view.OUTCOMES),
                              f"{MISSING} not in that report"])
    lines = [f"### STOMP conformance: {len(matrix.brokers)} brokers compared", "",
             *table(head, summary), ""]
    lines += [f"Not run: **{cell(name)}**: {cell(reason)}" for name, reason in matrix.not_run]
    lines += [*([""] if matrix.not_run else []),
              f"**{len(differing)} of {len(matrix.rows)} case runs differ** ({legend})"]
    if len(differing) == len(matrix.rows):  # one table says it all
        return fit([*lines, "", *rows(differing)])
    if differing:
        lines += ["", *rows(differing)]
    lines += ["", f"<details><summary>All {len(matrix.rows)} case runs</summary>", "",
              *rows(list(matrix.rows))]
    return fit(lines, closing=["", "</details>"])


def compare_html(matrix: Matrix, *, generated: datetime | None = None) -> str:
    brokers = [{"name": name, "url": r["broker"]["url"], "profile": r["broker"]["profile"],
                "server": show_hidden(r["broker"]["server"] or ""),
                "tool": f"{r['tool']['name']} {r['tool']['version']}"}
               for name, r in zip(matrix.brokers, matrix.reports, strict=True)]
    present = {c for row in matrix.rows for c in row.cells if c}
    tips = {row.key: [view.one_line(note, limit=TIP) for note in row.notes]
            for row in matrix.rows}
    return render_page("compare.html.j2", matrix=matrix, brokers=brokers, tips=tips,
                       generated=stamp(generated),
                       outcomes=[o for o in view.OUTCOMES if o in present], missing=MISSING,
                       areas=sorted({row.area for row in matrix.rows}),
                       has_missing=any(None in row.cells for row in matrix.rows),
                       not_run=[(name, show_hidden(reason)) for name, reason in matrix.not_run])


def compare_json(matrix: Matrix) -> dict[str, Any]:
    """Per broker, its report's header and the outcome of each case run (`id@version`);
    the brokers not run, with why. Small enough to commit and diff."""
    brokers = []
    scores = matrix.scores()
    for column, (name, report) in enumerate(zip(matrix.brokers, matrix.reports, strict=True)):
        broker = report["broker"]
        brokers.append({
            "name": name, "profile": broker["profile"], "url": broker["url"],
            "transport": transport(report), "server": broker["server"],
            "versions": broker["versions"], "tool": report["tool"],
            "must": {version: row[column] for version, row in scores
                     if row[column] is not None},
            "outcomes": {row.key: row.cells[column] for row in matrix.rows
                         if row.cells[column] is not None},
        })
    return {"schema_version": SCHEMA_VERSION, "brokers": brokers,
            "not_run": dict(matrix.not_run)}


def dumps_json(matrix: Matrix) -> bytes:
    """compare_json as UTF-8, one key a line (so a refreshed comparison diffs by case run)."""
    return dumps(compare_json(matrix), indent=1)
