"""`stomp-conformance compare`: JSON reports of several brokers, or of several client
libraries (or runs), side by side, case run by case run, as Markdown (on stdout by
default), HTML or JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from conformance.cli.exits import Exit, fail
from conformance.cli.options import Verbs
from conformance.files import ReportFileError, write_atomic
from conformance.report.baseline import load_report
from conformance.report.compare import compare, compare_html, compare_markdown, dumps_json


def add(verbs: Verbs) -> None:
    matrix = verbs.add_parser(
        "compare", help="compare JSON reports: brokers (or client libraries) x case runs",
        description="Compare JSON reports of several brokers (of `run`), or of several client "
                    "libraries (of `clients`), or runs, case run by case run. With none of "
                    "--html, --markdown and --json, print the Markdown on stdout.")
    matrix.add_argument("reports", nargs="+", metavar="REPORT.json")
    matrix.add_argument("--html", metavar="PATH", help="write the HTML matrix to PATH")
    matrix.add_argument("--markdown", metavar="PATH", help="write the Markdown matrix to PATH")
    matrix.add_argument("--json", metavar="PATH",
                        help="write the outcomes alone (column x id@version) as JSON to PATH")
    matrix.add_argument("--not-run", metavar="NAME=REASON", type=_not_run, action="append",
                        default=[], help="name a broker (or client) that could not be run, "
                                         "and why (repeatable); the outputs say so")
    matrix.add_argument("--name", metavar="REPORT.json=NAME", type=_named, action="append",
                        default=[], help="name the column of a report given (repeatable): "
                                         "reports/refresh names a client library's for its "
                                         "library, version, language and transport; a column "
                                         "not named is named for its profile")
    matrix.set_defaults(run=compare_command)


def _pair(value: str, shape: str) -> tuple[str, str]:
    name, sep, reason = value.partition("=")
    if not sep or not name.strip() or not reason.strip():
        raise argparse.ArgumentTypeError(f"expected {shape}, got {value!r}")
    return name.strip(), reason.strip()


def _not_run(value: str) -> tuple[str, str]:
    return _pair(value, "NAME=REASON")


def _named(value: str) -> tuple[str, str]:
    return _pair(value, "REPORT.json=NAME")


def compare_command(args: argparse.Namespace) -> Exit:
    try:
        reports = [load_report(path) for path in args.reports]
    except ReportFileError as error:
        return fail(Exit.USAGE, str(error))
    try:
        matrix = compare(reports, args.reports, not_run=args.not_run, names=dict(args.name))
    except ValueError as error:
        return fail(Exit.USAGE, str(error))
    outputs: list[tuple[str | None, Callable[[], bytes]]] = [
        (args.html, lambda: compare_html(matrix).encode("utf-8")),
        (args.markdown, lambda: compare_markdown(matrix).encode("utf-8")),
        (args.json, lambda: dumps_json(matrix))]
    if all(path is None for path, _ in outputs):
        sys.stdout.flush()
        sys.stdout.buffer.write(compare_markdown(matrix).encode("utf-8"))  # whatever the locale
        return Exit.OK
    for path, render in outputs:
        if path is None:
            continue
        try:
            write_atomic(Path(path), render())
        except OSError as error:
            return fail(Exit.USAGE, f"cannot write {path}: {error.strerror or error}")
        print(f"wrote {path}", file=sys.stderr)
    return Exit.OK
