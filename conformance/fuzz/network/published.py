"""The published fuzz report (`stomp-conformance triage`): the triaged buckets of each
broker's campaigns (triage.py) as JSON, Markdown and a single-file HTML page, with what a
reader needs to run the same campaigns again (seed, budget, tool and broker versions) and
to replay each reproducer. Everything a broker said reaches the page through Jinja2's
autoescaping (report/html.py)."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

from conformance import __version__
from conformance.files import write_atomic
from conformance.fuzz.network.triage import CATEGORIES, BrokerResults
from conformance.report.html import render_page
from conformance.report.markdown import cell
from conformance.report.records import timestamp

FORMAT = "stomp-conformance-fuzz-report"
#: categories of buckets that are no bug of the broker's
_NOT_FINDINGS = ("not reproduced", "informational")
SCHEMA_VERSION = 1


def fuzz_report(results: list[BrokerResults], *, folder: str = "") -> dict[str, Any]:
    """The report's dict, the source of the Markdown and the HTML. `folder`: where the
    brokers' folders are, as the report names them (reproducer paths)."""
    counts: dict[str, dict[str, int]] = {}
    uncovered = []
    for broker in results:
        tally = collections.Counter(b.category for b in broker.buckets)
        counts[broker.name] = {c: tally[c] for c in CATEGORIES}
        counts[broker.name]["new"] = sum(1 for b in broker.buckets if not b.known
                                         and b.category not in _NOT_FINDINGS)
        uncovered += [f"{broker.name}: {b.signature}" for b in broker.buckets
                      if not b.cases and b.category not in _NOT_FINDINGS]
    return {"format": FORMAT, "schema_version": SCHEMA_VERSION,
            "tool": {"name": "stomp-conformance", "version": __version__},
            "generated": timestamp(), "folder": folder, "categories": list(CATEGORIES),
            "counts": counts, "uncovered": uncovered,
            "brokers": [b.to_json() for b in results]}


def _reproducer(report: dict[str, Any], broker: str, name: str) -> str:
    folder = report.get("folder") or "."
    return f"{folder}/{broker}/findings/{name}"


def _campaign_line(broker: dict[str, Any]) -> str:
    campaign = broker["campaign"]
    resources = campaign.get("resources") or {}
    line = (f"seed {campaign['seed']}, {campaign['elapsed_s']:.0f} s, "
            f"{campaign['inputs']:,} inputs, STOMP {' '.join(campaign['versions'])}")
    if resources:
        line += (f"; launched {resources.get('starts', 1)} times; RSS "
                 f"{resources.get('baseline_rss', 0) / 2**20:.0f} to "
                 f"{resources.get('peak_rss', 0) / 2**20:.0f} MiB, up to "
                 f"{resources.get('peak_fds', 0)} files and {resources.get('peak_threads', 0)} "
                 f"threads, {resources.get('cpu_s', 0):.0f} CPU s")
    return line


def _stateful_line(broker: dict[str, Any]) -> str:
    stateful = broker.get("stateful") or {}
    if not stateful or "skipped" in stateful:
        return f"not run: {stateful.get('skipped', 'no result')}"
    return (f"seed {stateful.get('seed')}, {stateful.get('budget_s', 0):.0f} s, "
            f"{stateful.get('examples', 0)} sessions at most")


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Fuzzing real brokers", "",
             f"stomp-conformance {report['tool']['version']}, {report['generated']}. Each "
             "broker was launched by the campaign (`fuzz --launch`), its process watched by "
             "the resource oracle, and started again after each crash or hang; each crash and "
             "hang was sent again alone against the restarted broker until one input "
             "reproduced it. Each finding was then replayed against the broker launched "
             "again (`replay --times N --record`): *replayed* says how many of those tries "
             "showed it, and one none showed is not reproduced. Buckets are findings with "
             "one signature; *known* means its "
             "profile declares it or a catalogue case already shows it on that broker.", "",
             "| broker | version | server header | " + " | ".join(report["categories"])
             + " | new |", "|---|---|---|" + "---|" * (len(report["categories"]) + 1)]
    for broker in report["brokers"]:
        row = report["counts"][broker["name"]]
        lines.append(f"| {cell(broker['name'])} | {cell(broker['version'] or '?')} | "
                     f"{cell(broker['server'] or 'none')} | "
                     + " | ".join(str(row[c]) for c in report["categories"])
                     + f" | {row['new']} |")
    lines += ["", "Buckets no catalogue case checks: "
              + (", ".join(f"`{u}`" for u in report["uncovered"]) or "none") + "."]
    for broker in report["brokers"]:
        lines += ["", f"## {broker['name']}", "",
                  f"- grammar campaign: {_campaign_line(broker)}",
                  f"- stateful fuzzer: {_stateful_line(broker)}"]
        if broker["probe"]:
            lines.append("- probes: " + "; ".join(
                f"{p['probe']} {p['grade']} ({p['summary']})" for p in broker["probe"]))
        if not broker["buckets"]:
            lines += ["", "No finding."]
            continue
        lines += ["", "| category | known | signature | grade | found | cases | note |",
                  "|---|---|---|---|---|---|---|"]
        for bucket in broker["buckets"]:
            found = ", ".join(_found(report, broker["name"], f) for f in bucket["findings"])
            cases = _cases(bucket["cases"])
            known = "known" + (f": {', '.join(bucket['deviations'])}"
                               if bucket["deviations"] else "") if bucket["known"] else "new"
            lines.append(f"| {bucket['category']} | {cell(known)} | `{cell(bucket['signature'])}` "
                         f"| {bucket['grade']} | {cell(found)} | {cell(cases)} | "
                         f"{cell(bucket['note'])} |")
    return "\n".join(lines) + "\n"


_CLEAN = {"passed", "unsupported", "informational", "not run"}


def _cases(cases: dict[str, str], shown: int = 3) -> str:
    """The catalogue cases that check the bucket's rule, those that do not pass on this
    broker first: "a (failed), b (known-deviation) and 4 more"."""
    if not cases:
        return "none"
    failing = [f"{c} ({o})" for c, o in cases.items() if o not in _CLEAN]
    if failing:
        more = len(failing) - shown
        return ", ".join(failing[:shown]) + (f" and {more} more" if more > 0 else "")
    names = list(cases)
    more = len(names) - shown
    return (f"{len(names)} check it, none fails here: " + ", ".join(names[:shown])
            + (f" and {more} more" if more > 0 else ""))


def _found(report: dict[str, Any], broker: str, row: dict[str, Any]) -> str:
    if "reproducer" not in row:  # the stateful fuzzer's case
        return f"{row.get('case_id')} ({row.get('replay')})"
    replays = row.get("replays")  # how many of the replays after the campaign showed it
    # what the campaign made of it; the replays after it say the rest
    state = {True: "confirmed", False: "unattributed" if row.get("inputs", 1) > 1
             else "unconfirmed" if replays else "not reproduced",
             None: "not sent again"}[row.get("confirmed")]
    if replays:
        shown, tries = replays["reproduced"], replays["tries"]
        state += (f"; replayed: {shown}/{tries}" if shown == tries else
                  f"; replayed: never in {tries}" if shown == 0 else
                  f"; intermittent: {shown}/{tries} replays")
    return (f"{_reproducer(report, broker, row['reproducer'])} ({state}, "
            f"{row['mutation']} {row['version']}, {row['hits']} hits)")


def html(report: dict[str, Any]) -> str:
    return render_page("fuzz.html.j2", report=report, campaign_line=_campaign_line,
                       stateful_line=_stateful_line, found=_found, cases=_cases)


def write(report: dict[str, Any], *, markdown_path: Path | None = None,
          html_path: Path | None = None, json_path: Path | None = None) -> None:
    if json_path is not None:
        write_atomic(json_path, (json.dumps(report, indent=1, sort_keys=True) + "\n").encode())
    if markdown_path is not None:
        write_atomic(markdown_path, markdown(report).encode())
    if html_path is not None:
        write_atomic(html_path, html(report).encode())
