"""The Markdown summary, short enough for a pull-request comment: the certification verdict
first, the level line of each version, the outcome counts, and a table of the case runs that
did not pass. `fit` keeps a document within GitHub's comment limit, whatever the broker sent.

Broker text (and what a client library reported) lands in table cells, so it goes through
`cell`: one line, hidden characters shown, every Markdown and HTML character that could end
the cell, start a tag or a link, or mention someone made inert."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conformance.files import write_atomic
from conformance.report import view
from conformance.runner.results import SEVERITY, Outcome

#: Rows of the table of case runs that did not pass; the rest are counted.
ROWS = 50
#: Characters of a message in that table.
MESSAGE = 120
#: Characters of the server header, the profile, the URL, a client's library and its driver
#: command in a summary.
HEADER = 200
#: GitHub refuses a comment body longer than this many characters.
COMMENT_LIMIT = 65_536
#: A short symbol and word per outcome (the compare matrix uses them too).
SYMBOLS = {"passed": "\u2705 passed", "failed": "\u274c failed",
           "non-strict": "\u26a0\ufe0f non-strict", "known-deviation": "\U0001f536 known-deviation",
           "informational": "\u2139\ufe0f informational", "unsupported": "\u2796 unsupported",
           "error": "\U0001f4a5 error", "skipped": "\u23ed\ufe0f skipped"}
# CommonMark lets a backslash make any ASCII punctuation literal; these are the ones that can
# end a table cell (|), open code (`), emphasis, a link, an HTML tag or an entity.
_MARKUP = re.compile(r"[\\`*_\[\]<>|~&]")


def cell(text: str, *, limit: int = 0) -> str:
    """`text` (broker-supplied, say) as inert Markdown on one line."""
    line = _MARKUP.sub(r"\\\g<0>", view.one_line(text, limit=limit))
    # A zero-width space after @ stops GitHub from notifying whoever the broker names.
    return line.replace("@", "@\u200b")


def code(text: str) -> str:
    """An id as a code span; text a code span cannot hold goes through `cell` instead."""
    if not text or "`" in text or text != view.one_line(text):
        return cell(text)
    return "`" + text.replace("|", "\\|") + "`"


def size(text: str) -> int:
    """Characters as GitHub may count them: UTF-16 code units, never fewer than code points
    (an emoji counts two)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def fit(lines: Sequence[str], *, limit: int = COMMENT_LIMIT,
        closing: Sequence[str] = ()) -> str:
    """`lines`, then `closing`, as one document of at most `limit` characters: when they do
    not fit, the lines are cut at a line and a note says how many were left out (`closing`,
    the end of an open block, is always kept)."""
    whole = "\n".join([*lines, *closing]) + "\n"
    if size(whole) <= limit:
        return whole
    tail = "\n".join(["", *closing]) + "\n"
    kept: list[str] = []
    used = size(tail) + 200  # room for the note
    for line in lines:
        used += size(line) + 1
        if used > limit:
            break
        kept.append(line)
    note = (f"_Cut to fit a GitHub comment ({limit:,} characters): {len(lines) - len(kept):,} "
            "more lines; see the HTML or JSON report._")
    return "\n".join([*kept, "", note]) + tail


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head),
            *("| " + " | ".join(row) + " |" for row in rows)]


def _not_passing(report: dict[str, Any]) -> list[dict[str, Any]]:
    cases = [c for c in report["cases"] if c["outcome"] != "passed"]
    # Worst first; skipped and unsupported (severity 0) last.
    return sorted(cases, key=lambda c: -SEVERITY[Outcome(c["outcome"])])


def render_markdown(report: dict[str, Any]) -> str:
    """The summary of `report` (a dict from report_json or client_report_json, or a saved
    JSON report loaded)."""
    subject, summary = view.subject(report), report["summary"]
    brief = "".join(f" \u00b7 {label} {code(view.one_line(value, limit=HEADER))}"
                    for label, value in subject.brief)
    # The certification line first: what a reader of the comment wants before anything.
    lines = [f"**{cell(view.verdict(report)[1])}**", "",
             f"### {subject.heading}: {cell(subject.name, limit=HEADER)} {subject.joiner} "
             f"{cell(subject.place, limit=HEADER)}", "",
             f"{cell(report['tool']['name'])} {cell(report['tool']['version'])}{brief} \u00b7 "
             f"{summary['total']} case runs in {summary['duration_s']:.1f} s", ""]
    catalogue = view.catalogue_line(report)
    if catalogue is not None:  # what the verdict was given on
        lines += [f"Catalogue: {cell(catalogue)}", ""]
    lines += [f"- {line}" for line in view.level_lines(report)]
    counts = [f"{SYMBOLS[o]} {n}" for o, n in view.outcome_counts(report).items() if n]
    lines += ["", " \u00b7 ".join(counts) or "no case ran"]
    failing = _not_passing(report)
    if failing:
        rows = [[code(c["id"]), c["version"], SYMBOLS[c["outcome"]],
                 code(c["statement"] or (c["statements"] or [""])[0]),
                 cell(c["message"] or c["deviation"], limit=MESSAGE)] for c in failing[:ROWS]]
        lines += ["", *table(["case", "version", "outcome", "statement", "message"], rows)]
        if len(failing) > ROWS:
            lines += ["", f"_and {len(failing) - ROWS} more not passing: see the HTML or JSON "
                          "report._"]
    return fit(lines)


def write_markdown(path: Path | str, report: dict[str, Any]) -> None:
    """Write the Markdown summary of `report` to `path` atomically."""
    write_atomic(Path(path), render_markdown(report).encode("utf-8"))
