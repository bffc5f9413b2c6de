"""`stomp-conformance run`: the cases against a broker (the reference broker in this process
by default), the reports, and the exit code: 1 when a case failed (or, with --baseline,
regressed), 3 when the broker refused every CONNECT or a case could not run."""

from __future__ import annotations

import argparse
import asyncio
import sys

from rich.text import Text

from conformance.broker import embedded
from conformance.cli.arguments import positive, seconds
from conformance.cli.exits import Exit, fail
from conformance.cli.options import (
    Verbs,
    case_flags,
    chosen_catalogue,
    report_flags,
    session_flags,
    stdout_clash,
    tls_flags,
    tls_options,
    transport_flag,
    websocket_chosen,
)
from conformance.files import ReportFileError
from conformance.profiles import ProfileError, load_profile
from conformance.report import ReportWriter
from conformance.report.baseline import BaselineDiff, compare_baseline, load_report
from conformance.report.console import ConsoleReporter, make_console
from conformance.report.history import load_history
from conformance.runner.engine import Engine
from conformance.runner.results import CaseResult, Outcome, Refusal
from conformance.scenario.model import TRANSPORT_NAMES
from conformance.wire.target import HarnessError, Target
from conformance.wire.transport import BrokerAddress, parse_broker


def add(verbs: Verbs) -> None:
    run = verbs.add_parser("run", help="run the cases against a broker",
                           description="Run the conformance cases against a broker.",
                           usage="%(prog)s [--broker URL] [--profile NAME] [--cases PATH] "
                                 "[reports] [selection] [options] (see --help)")
    run.add_argument("--broker", metavar="URL",
                     help="HOST:PORT, stomp://HOST:PORT, stomp+ssl://HOST:PORT, "
                          "ws://HOST:PORT/PATH or wss://HOST:PORT/PATH (default: the "
                          "reference broker, started in this process)")
    transport_flag(run)
    session_flags(run, "reference")
    run.add_argument("--jobs", type=positive, default=8, help="cases run at once (default 8)")
    run.add_argument("--timeout", type=seconds, default=30.0,
                     help="seconds a case may take (default 30)")
    run.add_argument("--deadline", type=seconds, help="seconds the whole run may take")
    run.add_argument("--transcript-budget", type=positive, default=16, metavar="MIB",
                     help="MiB of transcripts the run keeps for its reports, in all (default "
                          "16; a case keeps its first 256 KiB and last 64 KiB, and only its "
                          "first 16 KiB and last 4 KiB once the budget is spent)")
    tls_flags(run)
    report_flags(run)
    run.add_argument("--history", metavar="PATH",
                     help="add trend, regression, flaky-case and fuzz-bug sections to the HTML "
                          "report from the report-data.json of `stomp-conformance pipeline` "
                          "(the file, or the pipeline's output folder)")
    run.add_argument("--baseline", metavar="PATH",
                     help="an earlier JSON report: exit 1 only on regressions (cases that "
                          "passed there and fail now), and list new passes")
    run.add_argument("--results", metavar="DIR",
                     help="write JSON Lines result records for the pipeline into DIR")
    run.add_argument("--strict", action="store_true",
                     help="certification: grade the profile's known deviations as what they "
                          "are (failed or non-strict), so a failed one exits 1; with "
                          "--baseline these grades are compared. Without it they are "
                          "known-deviation and keep exit 0")
    case_flags(run, json=False)  # --json names the report's file here
    run.set_defaults(run=run_command)


def run_command(args: argparse.Namespace) -> Exit:
    try:
        address = parse_broker(args.broker) if args.broker else None
        profile = load_profile(args.profile)
        websocket = websocket_chosen(args, address)
    except (ValueError, ProfileError) as error:
        return fail(Exit.USAGE, str(error))
    tls = tls_options(args, address)
    catalogue, cases = chosen_catalogue(args)
    if not cases:
        return fail(Exit.USAGE, "no case matches")
    transport = "ws" if websocket else "tcp"
    if not any(transport in case.transports for case in cases):
        return fail(Exit.USAGE, f"no case chosen runs over {TRANSPORT_NAMES[transport]}")
    # what the verdict covers: every report is told, so that none certifies a selection
    selection = catalogue.selection(cases, transport)
    if args.history and not args.html:
        return fail(Exit.USAGE, "--history adds sections to the HTML report: give --html too")
    clash = stdout_clash(args)
    if clash:
        return fail(Exit.USAGE, clash)
    flag = "--baseline"
    try:  # both read before the run starts, so a bad file costs no run
        baseline = load_report(args.baseline) if args.baseline else None
        flag = "--history"
        history = load_history(args.history) if args.history else None
    except ReportFileError as error:
        return fail(Exit.USAGE, f"{flag}: {error}")

    async def run() -> list[CaseResult]:
        if address is not None:
            return await go(address)
        async with embedded(websocket=websocket) as broker:  # the reference broker, here
            return await go(parse_broker(broker.url(websocket=websocket)))

    async def go(where: BrokerAddress) -> list[CaseResult]:
        target = Target(where, profile, tls=tls, login=args.login, passcode=args.passcode,
                        host=args.vhost)
        engine = Engine(target, jobs=args.jobs, case_timeout=args.timeout,
                        deadline=args.deadline, strict=args.strict,
                        transcripts=args.transcript_budget << 20)
        reports.run_id = engine.run_id
        return await engine.run(cases, [ConsoleReporter(catalogue=selection), reports])

    reports = ReportWriter(run_id="", json_path=args.json, junit_path=args.junit,
                           records_dir=args.results, html_path=args.html,
                           markdown_path=args.markdown, history=history, strict=args.strict,
                           catalogue=selection)
    try:
        results = asyncio.run(run())
    except HarnessError as error:
        return fail(Exit.HARNESS, str(error))
    except OSError as error:
        return fail(Exit.USAGE, f"cannot write a report: {error}")
    for path in reports.written:
        print(f"wrote {path}", file=sys.stderr)
    refused = [r for r in results if r.setup_refused]
    if refused and all(r.setup_refused for r in results
                       if r.outcome not in (Outcome.SKIPPED, Outcome.UNSUPPORTED)):
        why = refused[0].message  # "STOMP 1.2: a CONNECT ... got ERROR (...)"
        line = why.partition(": ")[2] if refused[0].setup_refused is Refusal.SILENT else \
            f"every CONNECT was refused: {why}"
        return fail(Exit.HARNESS, line)
    outcomes = {r.outcome for r in results}
    failed = Outcome.FAILED in outcomes
    if baseline is not None:
        failed = _gate(compare_baseline(results, baseline), args.baseline)
    if failed:
        return Exit.FAILED
    return Exit.HARNESS if Outcome.ERROR in outcomes else Exit.OK


def _gate(diff: BaselineDiff, where: str) -> bool:
    """Print what changed since the baseline; True when something regressed."""
    console = make_console(stderr=True)
    for name in diff.regressions:
        console.print(Text(f"regression (passed in the baseline): {name}", style="bold red"))
    for name in diff.new_passes:
        console.print(Text(f"new pass (not passing in the baseline): {name}", style="green"))
    for name in diff.new_failing:
        console.print(Text(f"failing, not in the baseline: {name}", style="yellow"))
    console.print(f"baseline {where}: {len(diff.regressions)} regressions, "
                  f"{len(diff.new_passes)} new passes, {len(diff.still_failing)} still failing"
                  f", {len(diff.new_failing)} new failing", soft_wrap=True)
    return bool(diff.regressions)
