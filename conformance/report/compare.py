"""`compare`: several JSON reports side by side. Rows are case runs (`id [version]`, the
union over the reports, so reports of different catalogues line up), columns are brokers,
or client libraries (the reports of `clients`; one comparison holds one kind), a cell is
the outcome or '—' where a report has no such run; above them, each column's MUST score per
version and outcome counts. A case run differs where the reports that have it disagree; one
only some reports have (a run over TCP lacks the WebSocket-only cases) is counted apart, as
no outcome is no disagreement. Rendered as a single-file HTML page, as Markdown, and as a
compact JSON of outcomes alone (what reports/ commits).

A broker (or client) that could not be run is named with the reason (`not_run`), so a
comparison says what it lacks instead of leaving a column out silently."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
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
#: Characters of a column's name (a profile, a server header, a library) in its head.
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
        """The reports that have this case run disagree on it (a missing cell is no
        outcome, so not a disagreement)."""
        return len({cell for cell in self.cells if cell is not None}) > 1

    @property
    def partial(self) -> bool:
        """Only some of the reports have this case run."""
        return None in self.cells


@dataclass(frozen=True, slots=True)
class Matrix:
    #: a name per column (a broker, or a client library over one transport)
    columns: tuple[str, ...]
    reports: tuple[dict[str, Any], ...]
    rows: tuple[Row, ...]
    #: (name, reason) for each column the comparison should have had and does not
    not_run: tuple[tuple[str, str], ...] = ()
    #: "broker", or "client" when the reports are of client libraries
    party: str = "broker"

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

    @property
    def partial(self) -> list[Row]:
        return [row for row in self.rows if row.partial]

    def tally(self) -> str:
        """'12 of 273 case runs differ; 20 are in only some reports'."""
        partial = len(self.partial)
        line = f"{len(self.differing)} of {len(self.rows)} case runs differ"
        if partial:
            line += f"; {partial} {'is' if partial == 1 else 'are'} in only some reports"
        return line


def transport(report: dict[str, Any]) -> str:
    """The transport a report's run went over: "ws" (ws:// or wss://) or "tcp"."""
    if view.party(report) == "client":
        return str(report["client"]["transport"])
    return "ws" if str(report["broker"]["url"]).startswith(("ws://", "wss://")) else "tcp"


def _own_name(report: dict[str, Any], source: str) -> str:
    """A broker's profile (or server header), a client's profile (or library), else the
    file's name."""
    if view.party(report) == "client":
        client = report["client"]
        return str(client.get("profile") or client["library"] or Path(source).stem)
    return str(report["broker"]["profile"] or report["broker"]["server"] or Path(source).stem)


def _detail(report: dict[str, Any]) -> str:
    """What tells two columns of one name and transport apart: a broker's server header, a
    client's library and version."""
    if view.party(report) == "client":
        return view.library(report["client"])
    return str(report["broker"]["server"] or "")


def column_names(reports: list[dict[str, Any]], sources: list[str],
                 given: Mapping[str, str] | None = None) -> list[str]:
    """A column name per report: the one `given` for its source (reports/refresh names a
    client library's column for its library, version, language and transport), else its
    profile (a broker's server header, or a client's library, when it has none); where two
    share a name, the transport (the same broker, or library, over TCP and WebSocket), then
    the server header (a client's library and version), then the file name, then a number
    tells them apart."""
    given = given or {}
    names = [view.one_line(given.get(s) or _own_name(r, s), limit=NAME)
             for r, s in zip(reports, sources, strict=True)]
    extras = ([transport(r) for r in reports],
              [view.one_line(_detail(r), limit=NAME) for r in reports],
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
            not_run: Sequence[tuple[str, str]] = (),
            names: Mapping[str, str] | None = None) -> Matrix:
    """The matrix of `reports` (loaded JSON reports; `sources` name their files), their
    columns in the order given; `not_run` names the brokers (or clients) that could not be
    run, with why; `names` a column's name by its source, where the caller chooses it.
    ValueError when some reports are of brokers and some of client libraries, or a name is
    given for no report."""
    unknown = sorted(set(names or {}) - set(sources))
    if unknown:
        raise ValueError(f"a column name given for {', '.join(unknown)}, which is no report "
                         "compared")
    parties = [view.party(r) for r in reports]
    if len(set(parties)) > 1:
        client = sources[parties.index("client")]
        broker = sources[parties.index("broker")]
        raise ValueError(f"{client} is a client library's report and {broker} a broker's: "
                         "compare brokers with brokers and clients with clients")
    by_key = [{(c["id"], c["version"]): c for c in r["cases"]} for r in reports]
    keys = sorted({key for cases in by_key for key in cases})
    rows = []
    for key in keys:
        present = [cases[key] for cases in by_key if key in cases]
        rows.append(Row(key[0], key[1], present[0]["area"],
                        tuple(cases[key]["outcome"] if key in cases else None
                              for cases in by_key),
                        tuple(_note(cases[key]) if key in cases else "" for cases in by_key)))
    return Matrix(tuple(column_names(reports, sources, names)), tuple(reports), tuple(rows),
                  tuple(not_run), parties[0] if parties else "broker")


#: The symbol of each outcome alone: a matrix cell is narrow.
MARKS = {outcome: symbol.split(" ")[0] for outcome, symbol in SYMBOLS.items()}


def compare_markdown(matrix: Matrix) -> str:
    """The matrix as Markdown within a GitHub comment's size: scores and counts per column,
    the case runs that differ, then every case run in a folded block."""
    head = ["", *(cell(name) for name in matrix.columns)]
    summary = [["library", *(cell(view.library(r["client"]), limit=NAME)
                             for r in matrix.reports)]] if matrix.party == "client" else []
    summary += [[f"MUST, STOMP {version}", *(s or MISSING for s in row)]
                for version, row in matrix.scores()]
    summary += [[SYMBOLS[outcome], *map(str, row)] for outcome, row in matrix.counts()]

    def rows(chosen: list[Row]) -> list[str]:
        return table(["case run", *head[1:]], [
            [code(r.label), *(MARKS[c] if c else MISSING for c in r.cells)] for r in chosen])

    differing = matrix.differing
    legend = " \u00b7 ".join([*(SYMBOLS[o] for o in view.OUTCOMES),
                              f"{MISSING} not in that report"])
    kind = "client libraries" if matrix.party == "client" else "brokers"
    lines = [f"### {view.heading(matrix.party)}: {len(matrix.columns)} {kind} compared", "",
             *table(head, summary), ""]
    lines += [f"Not run: **{cell(name)}**: {cell(reason)}" for name, reason in matrix.not_run]
    lines += [*([""] if matrix.not_run else []),
              f"**{matrix.tally()}** ({legend})"]
    if len(differing) == len(matrix.rows):  # one table says it all
        return fit([*lines, "", *rows(differing)])
    if differing:
        lines += ["", *rows(differing)]
    lines += ["", f"<details><summary>All {len(matrix.rows)} case runs</summary>", "",
              *rows(list(matrix.rows))]
    return fit(lines, closing=["", "</details>"])


def _column_rows(matrix: Matrix) -> tuple[list[str], list[list[str]]]:
    """The head and a row per column of the HTML page's table of what each column is."""
    tools = [f"{r['tool']['name']} {r['tool']['version']}" for r in matrix.reports]
    if matrix.party == "client":
        return (["Library", "Driver", "Profile", "Transport", "Tool"],
                [[view.library(r["client"]), r["client"]["driver"],
                  r["client"].get("profile") or "(none)", view.transport_name(transport(r)),
                  tool] for r, tool in zip(matrix.reports, tools, strict=True)])
    return (["Broker", "Profile", "Server", "Tool"],
            [[r["broker"]["url"], r["broker"]["profile"],
              r["broker"]["server"] or "(no server header)", tool]
             for r, tool in zip(matrix.reports, tools, strict=True)])


def compare_html(matrix: Matrix, *, generated: datetime | None = None) -> str:
    head, described = _column_rows(matrix)
    columns = [{"name": name, "cells": [show_hidden(text) for text in texts]}
               for name, texts in zip(matrix.columns, described, strict=True)]
    present = {c for row in matrix.rows for c in row.cells if c}
    tips = {row.key: [view.one_line(note, limit=TIP) for note in row.notes]
            for row in matrix.rows}
    return render_page("compare.html.j2", matrix=matrix, columns=columns, head=head,
                       client=matrix.party == "client", heading=view.heading(matrix.party),
                       tips=tips, generated=stamp(generated),
                       outcomes=[o for o in view.OUTCOMES if o in present], missing=MISSING,
                       areas=sorted({row.area for row in matrix.rows}),
                       has_missing=any(None in row.cells for row in matrix.rows),
                       not_run=[(name, show_hidden(reason)) for name, reason in matrix.not_run])


def _column(report: dict[str, Any]) -> dict[str, Any]:
    """What compare --json says of a column's report, before its scores."""
    if view.party(report) == "client":
        client = report["client"]
        return {"profile": client.get("profile"), "library": client["library"],
                "version": client["version"], "driver": client["driver"],
                "transport": transport(report), "versions": client["versions"],
                "tool": report["tool"]}
    broker = report["broker"]
    return {"profile": broker["profile"], "url": broker["url"],
            "transport": transport(report), "server": broker["server"],
            "versions": broker["versions"], "tool": report["tool"]}


def compare_json(matrix: Matrix) -> dict[str, Any]:
    """Per column (`brokers`, or `clients` for client libraries), its report's header and
    the outcome of each case run (`id@version`); those not run, with why. Small enough to
    commit and diff."""
    columns = []
    scores = matrix.scores()
    for column, (name, report) in enumerate(zip(matrix.columns, matrix.reports, strict=True)):
        columns.append({
            "name": name, **_column(report),
            "must": {version: row[column] for version, row in scores
                     if row[column] is not None},
            "outcomes": {row.key: row.cells[column] for row in matrix.rows
                         if row.cells[column] is not None},
        })
    return {"schema_version": SCHEMA_VERSION,
            ("clients" if matrix.party == "client" else "brokers"): columns,
            "not_run": dict(matrix.not_run)}


def dumps_json(matrix: Matrix) -> bytes:
    """compare_json as UTF-8, one key a line (so a refreshed comparison diffs by case run)."""
    return dumps(compare_json(matrix), indent=1)
