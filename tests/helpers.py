"""Test helpers: feed a byte stream to a parser in a given chunking and record the
outcome; run the command line."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

from conformance.codec import Frame, Heartbeat, Parser, StompError
from conformance.profiles import load_profile
from conformance.report.compare import MARKS, MISSING
from conformance.report.markdown import cell
from conformance.runner.engine import Engine
from conformance.runner.events import RunEvent
from conformance.runner.results import CaseResult
from conformance.scenario import load_file
from conformance.spec.grammar import Version
from conformance.wire.target import Target
from conformance.wire.transport import parse_broker

Outcome = tuple[list[tuple[object, ...]], tuple[str, str | None, int | None] | None]

#: The STOMP specifications (CC BY 2.5, stomp.github.io), which the statement catalogue quotes
SPEC = Path(__file__).resolve().parent / "data" / "spec"


def spec_text(version: str) -> str:
    """The text of the STOMP `version` specification."""
    return (SPEC / f"stomp-specification-{version}.md").read_text("utf-8")


def event_key(event: Frame | Heartbeat) -> tuple[object, ...]:
    if isinstance(event, Heartbeat):
        return ("heartbeat", event.offset, event.eol)
    return ("frame", event.command, tuple(event.headers), event.body, event.offset, event.size,
            tuple((v.statement, v.offset) for v in event.violations))


def run(chunks: Iterable[bytes], *, version: Version = "1.2", strict: bool = True,
        eof: bool = False) -> Outcome:
    """Every event, and the error (class, statement, offset) if one was raised."""
    parser = Parser(version=version, strict=strict)
    events: list[tuple[object, ...]] = []
    try:
        for chunk in chunks:
            events += [event_key(e) for e in parser.feed(chunk)]
        if eof:
            parser.eof()
    except StompError as error:
        events += [event_key(e) for e in getattr(error, "events", [])]
        return events, (type(error).__name__, error.statement, error.offset)
    return events, None


def split(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i:i + 1] for i in range(len(data))]


def cli(*args: str, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`stomp-conformance ARGS` in a child process (with `env` added to the environment),
    given `timeout` seconds."""
    return subprocess.run([sys.executable, "-m", "conformance", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


HEAD = """\
- id: {id}
  title: a test case
  statements: [{statements}]
  versions: [{versions}]
{extra}  steps:
"""


RECEIPT_RULE = {"1.0": "receipt.receipt-id-required-v10",
                "1.1": "receipt.receipt-id-required-v11", "1.2": "receipt.receipt-id-required"}


def case(steps: str, *, id: str = "t.case", statements: str = "", extra: str = "",
         versions: str = '"1.2"') -> str:
    """A one-case YAML document with `steps` (YAML list text); by default it cites the
    RECEIPT rule of each of its versions."""
    statements = statements or ", ".join(rule for version, rule in RECEIPT_RULE.items()
                                         if version in versions)
    head = HEAD.format(id=id, statements=statements, extra=extra, versions=versions)
    return head + textwrap.indent(textwrap.dedent(steps).strip("\n") + "\n", "    ")


def run_cases(tmp_path: Path, port: int, *texts: str, profile: str = "reference",
              events: list[RunEvent] | None = None, **options: float) -> list[CaseResult]:
    """Run YAML cases through the engine against 127.0.0.1:port."""
    path = tmp_path / "cases.yaml"
    path.write_text("".join(texts))
    target = Target(parse_broker(f"127.0.0.1:{port}"), load_profile(profile))
    engine = Engine(target, **options)  # type: ignore[arg-type]
    handlers = [events.append] if events is not None else []
    return asyncio.run(engine.run(load_file(path), handlers))


def changed_runs(column: str, committed: set[str], current: set[str]) -> str:
    """What a committed comparison's column lacks of the current catalogue (`id@version`
    case runs) and what it still has that the catalogue dropped; '' when they agree."""
    said = [f"{what} {', '.join(sorted(runs)[:10])}{' ...' if len(runs) > 10 else ''}"
            for what, runs in (("new in the catalogue:", current - committed),
                               ("no longer in the catalogue:", committed - current)) if runs]
    return f"{column}: {'; '.join(said)}" if said else ""


def check_comparison_files(stem: str, columns: str, runs: int) -> None:
    """reports/STEM.md and reports/STEM.html show the comparison of reports/STEM.json (its
    `columns` key: brokers or clients): a column head each, those not run, and in the last
    Markdown table each of the `runs` case runs with a symbol per column's outcome."""
    reports = Path(__file__).resolve().parents[1] / "reports"
    data = json.loads((reports / f"{stem}.json").read_text("utf-8"))
    markdown = (reports / f"{stem}.md").read_text("utf-8")
    page = (reports / f"{stem}.html").read_text("utf-8")
    assert re.search(rf"^\*\*\d+ of {runs} case runs differ(; \d+ (is|are) in only some "
                     r"reports)?\*\*", markdown, re.M)
    assert f"{len(data[columns])} reports" in page and f"&middot; {runs} case runs" in page
    header = "|  | " + " | ".join(cell(c["name"]) for c in data[columns]) + " |"
    assert header in markdown.splitlines()
    for name in data["not_run"]:
        assert f"Not run: **{name}**" in markdown and f"<strong>{name}</strong>" in page
    table = markdown.split("<details>")[-1] if "<details>" in markdown else markdown
    rows = {line.split(" | ")[0].strip("| `"): line.split(" | ")[1:]
            for line in table.splitlines() if line.startswith("| `")}
    assert len(rows) == runs and "Cut to fit" not in markdown
    for label, cells in rows.items():
        case_id, version = label.removesuffix("]").split(" [")
        key = f"{case_id}@{version}"
        assert [cell.removesuffix(" |") for cell in cells] == [
            MARKS[c["outcomes"][key]] if key in c["outcomes"] else MISSING
            for c in data[columns]], label
