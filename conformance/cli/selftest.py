"""`stomp-conformance selftest`: the catalogue against the reference broker and each of its
faults (the case x fault kill matrix), or with --variants against each of its legal
configurations. Exit 1 when the selftest fails."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from rich.table import Table
from rich.text import Text

from conformance.broker.variants import VARIANTS, variant
from conformance.cli.arguments import positive
from conformance.cli.exits import Exit, fail
from conformance.cli.options import Verbs, case_flags, chosen_cases
from conformance.report.console import make_console
from conformance.selftest import SelfTest, selftest, selftest_variants


def add(verbs: Verbs) -> None:
    check = verbs.add_parser(
        "selftest", help="the catalogue against the reference broker and its faults",
        description="Run the catalogue against the reference broker (every case must pass) "
                    "and against each of its faults (every case must fail under one).")
    check.add_argument("--full", action="store_true",
                       help="every case under every fault (default: the faults each case's "
                            "fault:NAME tags name)")
    check.add_argument("--jobs", type=positive, default=8)
    check.add_argument("--transport", choices=("tcp", "ws"), default="tcp",
                       help="reach the reference broker over TCP or STOMP over WebSocket "
                            "(default tcp)")
    check.add_argument("--variants", action="store_true",
                       help="instead: run the catalogue against the reference broker under "
                            "each of its legal configurations (every case must pass, be "
                            "informational or unsupported on each)")
    check.add_argument("--variant", action="append", metavar="NAME",
                       help="with --variants: only this configuration (repeatable; see "
                            "--list-variants)")
    check.add_argument("--list-variants", action="store_true",
                       help="list the configurations of --variants and exit")
    check.add_argument("--at-once", type=positive, default=2,
                       help="with --variants: brokers run at once (default 2)")
    case_flags(check)
    check.set_defaults(run=selftest_command)


def selftest_command(args: argparse.Namespace) -> Exit:
    if args.list_variants:
        for known in VARIANTS:
            print(f"{known.name:32} {known.about}")
        return Exit.OK
    if args.variants or args.variant:
        return _variants(args)
    cases = chosen_cases(args)
    console = make_console(stderr=True)
    result = asyncio.run(selftest(cases, full=args.full, jobs=args.jobs,
                                  websocket=args.transport == "ws",
                                  progress=lambda text: console.print(Text(text, style="dim"))))
    return show_kills(result, "the reference broker", "selftest", as_json=args.json)


def show_kills(result: SelfTest, reference: str, name: str, *, as_json: bool = False) -> Exit:
    """A selftest on the console: what does not pass on the `reference`, the case x fault
    kill matrix, the faults that kill nothing, and the one line that sums it up; or, with
    `as_json`, its JSON on standard output."""
    if as_json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return Exit.OK if result.ok else Exit.FAILED
    out = make_console()
    for r in result.not_passing:
        out.print(Text(f"does not pass on {reference}: {r.id} [{r.version}] "
                       f"{r.outcome.value}: {r.message}", style="bold red"), soft_wrap=True)
    out.print("case x fault kill matrix (faults that make the case fail):")
    for case_id in sorted({r.id for r in result.clean}):
        killers = result.killers(case_id)
        out.print(Text(f"  {case_id}: ", style="bold") +
                  Text(", ".join(f if result.on_its_statement(f, case_id)
                                 else f"{f} (on another statement)" for f in killers)
                       if killers else "SURVIVES every fault",
                       style="" if killers else "bold red"))
    for fault in result.idle_faults:
        out.print(Text(idle_fault(result, fault), style="bold red"), soft_wrap=True)
    for fault in result.by_accident:
        out.print(Text(f"fault {fault} is killed only by accident: no case fails on "
                       f"{result.breaks.get(fault, 'its statement')}", style="bold red"))
    faults = len(result.matrix)
    out.print(f"killed on its own statement: {result.own_kills} of {faults}")
    if result.killed_by_others:
        out.print(f"{len(result.killed_by_others)} cases fail only under faults of other "
                  f"statements: {', '.join(result.killed_by_others)}", soft_wrap=True)
    out.print(f"kill rate {result.kill_rate:.1%} ({len(result.survivors)} surviving cases); "
              f"{faults - len(result.idle_faults)} of {faults} faults "
              f"kill at least one case; {name} {'passed' if result.ok else 'FAILED'}")
    return Exit.OK if result.ok else Exit.FAILED


def idle_fault(result: SelfTest, fault: str) -> str:
    """Why a fault kills no case: none fails under it, or none was tried under it (a fault
    is tried on the cases tagged `fault:NAME`, and a new fault on none until one is)."""
    if fault not in result.untried_faults:
        return f"fault {fault} makes no case fail (of the {len(result.matrix[fault])} " \
               f"tried under it)"
    statement = result.breaks.get(fault)
    return f"fault {fault} makes no case fail: no case chosen is tagged fault:{fault}, so " \
           f"none was tried under it (add the tag to the cases that check its statement" \
           f"{f' {statement}' if statement else ''}; --full tries every case under it)"


def _variants(args: argparse.Namespace) -> Exit:
    try:
        chosen = [variant(name) for name in args.variant] if args.variant else list(VARIANTS)
    except ValueError as error:
        return fail(Exit.USAGE, str(error))
    if args.full:
        return fail(Exit.USAGE, "--full is for the fault matrix, not --variants")
    cases = chosen_cases(args)
    console = make_console(stderr=True)
    result = asyncio.run(selftest_variants(
        cases, chosen, jobs=args.jobs, at_once=args.at_once, websocket=args.transport == "ws",
        progress=lambda text: console.print(Text(text, style="dim"))))
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return Exit.OK if result.ok else Exit.FAILED
    out = make_console()
    table = Table("variant", "case runs", "clean", "bad", box=None)
    for run in result.runs:
        table.add_row(run.variant.name, str(len(run.results)),
                      str(len(run.results) - len(run.bad)),
                      Text(str(len(run.bad)), style="bold red" if run.bad else ""))
    out.print(table)
    for name, r in result.bad:
        out.print(Text(f"{name}: {r.id} [{r.version}] {r.outcome.value}: {r.message}",
                       style="bold red"), soft_wrap=True)
    total = sum(len(run.results) for run in result.runs)
    out.print(f"{len(result.runs)} configurations, {total} case runs, {len(result.bad)} bad; "
              f"selftest --variants {'passed' if result.ok else 'FAILED'}")
    return Exit.OK if result.ok else Exit.FAILED
