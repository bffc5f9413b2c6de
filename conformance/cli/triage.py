"""`stomp-conformance triage`: the findings of fuzz campaigns against real brokers, each
broker's in a folder of its own (what `reports/refresh fuzz` writes), bucketed, triaged and
written as the published fuzz report (JSON, Markdown, HTML). Exit 0 when written, 2 when a
folder or a file given cannot be read."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from conformance.cli.exits import Exit, fail
from conformance.cli.options import Verbs


def add(verbs: Verbs) -> None:
    triage = verbs.add_parser(
        "triage", help="triage fuzz campaigns against brokers into a report",
        description="Bucket the findings in each BROKER_DIR (a grammar campaign's state.json "
                    "and findings/, and stateful.json and probe.json when there) by signature; "
                    "sort each bucket into crash, hang, leak, violation, deviation (declared by "
                    "the broker's profile), not reproduced or informational; mark it known or "
                    "new; name the catalogue cases that check its rule; write the report.")
    triage.add_argument("folders", nargs="+", metavar="BROKER_DIR")
    triage.add_argument("--comparison", metavar="FILE",
                        help="a `compare --json` report: a bucket whose rule a case does not "
                             "pass on that broker is known")
    triage.add_argument("--notes", metavar="FILE",
                        help="YAML notes by broker and signature, shown beside each bucket")
    triage.add_argument("--json", metavar="PATH")
    triage.add_argument("--markdown", metavar="PATH")
    triage.add_argument("--html", metavar="PATH")
    triage.set_defaults(run=triage_command)


def triage_command(args: argparse.Namespace) -> Exit:
    from conformance.fuzz.network import published
    from conformance.fuzz.network.triage import read_notes, triage

    folders = [Path(f) for f in args.folders]
    try:
        comparison = json.loads(Path(args.comparison).read_text("utf-8")) \
            if args.comparison else None
        notes = read_notes(Path(args.notes) if args.notes else None)
        results = triage(folders, comparison=comparison, notes=notes)
    except (OSError, ValueError) as error:
        return fail(Exit.USAGE, f"cannot triage: {error}")
    common = {str(f.parent) for f in folders}
    report = published.fuzz_report(results, folder=common.pop() if len(common) == 1 else "")
    paths = {"json_path": args.json, "markdown_path": args.markdown, "html_path": args.html}
    try:
        published.write(report, **{k: Path(v) for k, v in paths.items() if v})
    except OSError as error:
        return fail(Exit.USAGE, f"cannot write the report: {error.strerror or error}")
    if not any(paths.values()):
        print(published.markdown(report), end="")
    return Exit.OK
