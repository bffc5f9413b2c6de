"""`stomp-conformance clients`: the client cases against a STOMP client library through its
driver (the reference driver by default), the console summary and the reports (JSON, JUnit,
HTML, Markdown, through the ReportWriter `run` uses); or with --selftest, the client cases
against the reference driver and each of its faults. Exit 1 when a case failed, 3 when no
case could be graded (the driver never ran)."""

from __future__ import annotations

import argparse
import asyncio
import secrets
import shlex
import sys
import time

from rich.text import Text

from conformance import __version__
from conformance.cli.arguments import positive, seconds
from conformance.cli.exits import Exit, fail
from conformance.cli.options import (
    Verbs,
    case_flags,
    chosen_cases,
    chosen_catalogue,
    report_flags,
    stdout_clash,
)
from conformance.cli.selftest import show_kills
from conformance.clients import REFERENCE_DRIVER, ClientInfo, run_client_cases
from conformance.clients.run import passcode
from conformance.profiles import Profile, ProfileError, load_profile, shipped_clients
from conformance.report import ReportWriter
from conformance.report.console import ConsoleReporter, make_console
from conformance.report.json_report import client_report_json
from conformance.report.scrub import Scrubber, scrub
from conformance.runner.events import RunFinished
from conformance.runner.results import CaseResult, Outcome
from conformance.scenario.model import TRANSPORT_NAMES
from conformance.selftest import client_selftest


def add(verbs: Verbs) -> None:
    verb = verbs.add_parser(
        "clients", help="the client cases against a STOMP client library through its driver",
        description="Run the client cases: a scripted broker faces the client library a "
                    "driver runs (contract: cases/clients/README.md), and what the client "
                    "sends and reports is judged against the spec's client statements.")
    verb.add_argument("--driver", metavar="CMD",
                      help="the driver command, shell-split (default: the reference driver, "
                           f"{REFERENCE_DRIVER.split(' ', 1)[1]})")
    verb.add_argument("--profile", metavar="NAME|FILE",
                      help="the client library's profile: the versions it offers and its known "
                           f"deviations (shipped: {', '.join(shipped_clients())}; or a YAML file)")
    verb.add_argument("--strict", action="store_true",
                      help="certification: grade the profile's known deviations as what they "
                           "are (failed or non-strict), so a failed one exits 1")
    verb.add_argument("--transport", choices=("tcp", "ws"), default="tcp",
                      help="how the client reaches the scripted broker: tcp://127.0.0.1:PORT, "
                           "or ws://127.0.0.1:PORT/ws, STOMP over WebSocket (default tcp)")
    verb.add_argument("--jobs", type=positive, default=4, help="cases run at once (default 4)")
    verb.add_argument("--timeout", type=seconds, default=30.0,
                      help="seconds a case may take (default 30)")
    report_flags(verb)
    verb.add_argument("--selftest", action="store_true",
                      help="instead: the client cases against the reference driver and each "
                           "of its faults (every case must fail under one)")
    verb.add_argument("--full", action="store_true",
                      help="with --selftest: every case under every fault")
    case_flags(verb, json=False)
    verb.set_defaults(run=clients_command)


def clients_command(args: argparse.Namespace) -> Exit:
    driver = args.driver or REFERENCE_DRIVER
    try:
        if not shlex.split(driver):
            return fail(Exit.USAGE, "--driver: the command is empty")
    except ValueError as error:
        return fail(Exit.USAGE, f"--driver: {error}")
    profile: Profile | None = None
    if args.profile:
        if args.selftest:
            return fail(Exit.USAGE, "--profile: the selftest runs the reference driver")
        try:
            profile = load_profile(args.profile, clients=True)
        except ProfileError as error:
            return fail(Exit.USAGE, f"--profile: {error}")
    clash = stdout_clash(args)
    if clash:
        return fail(Exit.USAGE, clash)
    catalogue, cases = chosen_catalogue(args, client=True)
    if not cases:
        return fail(Exit.USAGE, "no client case matches")
    if args.selftest:
        if args.junit or args.html or args.markdown:
            return fail(Exit.USAGE, "--junit, --html, --markdown: the selftest writes no "
                                    "report (--json prints its result)")
        return _selftest(args, driver)
    # a case for another transport is not this run's, as a case not selected is not
    cases = [case for case in cases if args.transport in case.transports]
    if not cases:
        return fail(Exit.USAGE, "no client case chosen runs over "
                                f"{TRANSPORT_NAMES[args.transport]}")
    selection = catalogue.selection(cases, args.transport)  # what the verdict covers
    run_id = secrets.token_hex(3)
    shown = Scrubber(None).text(driver)
    info = ClientInfo(driver=shown, transport=args.transport,
                      profile=profile.name if profile else "")
    console = make_console(stderr=True)
    console.print(f"stomp-conformance: {sum(len(c.versions) for c in cases)} client case runs "
                  f"against {shown} over {TRANSPORT_NAMES[args.transport]}")
    started = time.monotonic()
    results = asyncio.run(run_client_cases(cases, driver, jobs=args.jobs, timeout=args.timeout,
                                           transport=args.transport, info=info,
                                           run_id=run_id, profile=profile,
                                           strict=args.strict))
    duration = time.monotonic() - started
    if info.library:
        console.print(Text(f"client: {info.library} {info.version}", style="dim"))
    # the console shows what the report does: the run's passcode masked
    ConsoleReporter(console, client=True, catalogue=selection).finish(
        RunFinished(scrub(results, None, passcode(run_id)), duration, {}))
    reports = ReportWriter(run_id=run_id, json_path=args.json, junit_path=args.junit,
                           html_path=args.html, markdown_path=args.markdown,
                           strict=args.strict)
    if reports.wanted:
        try:
            reports.write(client_report_json(
                results, client=info.to_json(), duration=duration, tool_version=__version__,
                strict=args.strict, passcodes=(passcode(run_id),), catalogue=selection))
        except OSError as error:
            return fail(Exit.USAGE, f"cannot write a report: {error}")
    for path in reports.written:
        print(f"wrote {path}", file=sys.stderr)
    return _exit(results)


def _exit(results: list[CaseResult]) -> Exit:
    outcomes = [r.outcome for r in results if r.outcome not in (Outcome.SKIPPED,
                                                                 Outcome.UNSUPPORTED)]
    if outcomes and all(o == Outcome.ERROR for o in outcomes):
        return fail(Exit.HARNESS, f"no case could be graded: {results[0].message}")
    return Exit.FAILED if Outcome.FAILED in outcomes or Outcome.ERROR in outcomes else Exit.OK


def _selftest(args: argparse.Namespace, driver: str) -> Exit:
    cases = chosen_cases(args, client=True)
    progress = make_console(stderr=True)
    result = asyncio.run(client_selftest(
        cases, full=args.full, jobs=args.jobs, timeout=args.timeout, driver=driver,
        transport=args.transport,
        progress=lambda text: progress.print(Text(text, style="dim"))))
    return show_kills(result, "the reference driver", "clients selftest",
                      as_json=bool(args.json))
