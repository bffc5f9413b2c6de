"""The verbs that read the catalogue without a broker: `spec` (the normative statements),
`list` and `show` (the cases), `coverage` (statements x cases)."""

from __future__ import annotations

import argparse
import json
import sys

from rich.text import Text

from conformance.cli.exits import Exit, fail
from conformance.cli.options import Verbs, case_flags, chosen_cases
from conformance.report.console import make_console
from conformance.selftest import coverage
from conformance.spec import Level, Party, Statement, catalogue
from conformance.spec.grammar import VERSIONS


def add_spec(verbs: Verbs) -> None:
    spec = verbs.add_parser("spec", help="list the normative statements of the spec",
                            description="List the catalogue of normative statements.")
    spec.add_argument("--json", action="store_true", help="print JSON on stdout, nothing else")
    spec.add_argument("--level", type=_level,
                      help="a key word (MUST, 'MUST NOT', SHOULD, ...) or must/should/may")
    spec.add_argument("--party", choices=[p.value for p in Party])
    spec.add_argument("--section", help="part of a section heading, e.g. 'heart'")
    spec.add_argument("--stomp-version", dest="version", choices=VERSIONS)
    spec.add_argument("--observable", action=argparse.BooleanOptionalAction, default=None,
                      help="only statements a client can (or cannot) observe on the wire")
    spec.set_defaults(run=spec_command)


def add_coverage(verbs: Verbs) -> None:
    verb = verbs.add_parser(
        "coverage", help="statements x cases: what the catalogue covers",
        description="Which observable statements the cases cover, per STOMP version.")
    case_flags(verb)
    verb.set_defaults(run=coverage_command)


def add_list(verbs: Verbs) -> None:
    verb = verbs.add_parser("list", help="list the cases", description="List the cases.")
    case_flags(verb)
    verb.set_defaults(run=list_command)


def add_show(verbs: Verbs) -> None:
    text = "show a case, its statements' text and its steps"
    verb = verbs.add_parser("show", help=text, description=text[0].upper() + text[1:] + ".")
    verb.add_argument("case", help="a case id")
    case_flags(verb)
    verb.set_defaults(run=show_command)


def _level(value: str) -> str:
    known = {level.value for level in Level} | {"must", "should", "may"}
    if value.upper() not in known and value.lower() not in known:
        raise argparse.ArgumentTypeError(
            f"unknown level {value!r}: use must, should, may or a key word such as 'MUST NOT'")
    return value


def _statements(args: argparse.Namespace) -> list[Statement]:
    """The statements the flags select (a statement that binds both parties binds each)."""
    return catalogue().select(level=args.level, party=args.party, section=args.section,
                              version=args.version, observable=args.observable)


def spec_command(args: argparse.Namespace) -> Exit:
    statements = _statements(args)
    if args.json:
        json.dump([s.to_json() for s in statements], sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return Exit.OK
    console = make_console()
    colour = {"must": "bold red", "should": "yellow", "may": "cyan"}
    for s in statements:
        line = Text(s.id, style="bold")
        line.append(f"  {s.level.value}", style=colour[s.level.strength])
        line.append(f"  {s.party.value}  {','.join(s.versions)}"
                    f"{'  observable' if s.observable else ''}")
        console.print(line)
        console.print(Text(f"    {s.quote}", style="dim"))
    console.print(f"{len(statements)} statements")
    return Exit.OK


def list_command(args: argparse.Namespace) -> Exit:
    cases = chosen_cases(args)
    if args.json:
        json.dump([{"id": c.id, "title": c.title, "level": c.level,
                    "statements": list(c.statements), "versions": list(c.versions),
                    "transports": list(c.transports), "tags": list(c.tags),
                    "file": c.file, "line": c.line} for c in cases],
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
        return Exit.OK
    console = make_console()
    for c in cases:
        console.print(Text(f"{c.id}  ", style="bold") + Text(f"{c.level}  {','.join(c.versions)}  "
                                                             f"{c.title}"))
    console.print(f"{len(cases)} cases")
    return Exit.OK


def show_command(args: argparse.Namespace) -> Exit:
    found = [c for c in chosen_cases(args) if c.id == args.case]
    if not found:
        return fail(Exit.USAGE, f"no case {args.case!r} (see `stomp-conformance list`)")
    case = found[0]
    console = make_console()
    console.print(Text(case.id, style="bold"), Text(f"  {case.title}"))
    console.print(f"{case.file}:{case.line}  level {case.level}  versions "
                  f"{', '.join(case.versions)}  tags {', '.join(case.tags) or '-'}")
    for statement_id in case.statements:
        statement = catalogue()[statement_id]
        console.print(Text(f"  {statement.id} ({statement.level.value}): ", style="bold"),
                      Text(statement.quote))
    for step in case.steps:
        console.print(Text(f"  line {step.line}: {step.kind} {json.dumps(step.args)}"))
    return Exit.OK


def coverage_command(args: argparse.Namespace) -> Exit:
    """The broker cases' coverage (which decides the exit code), then the client cases'."""
    report = coverage(chosen_cases(args))
    clients = coverage(chosen_cases(args, client=True), client=True)
    if args.json:
        json.dump({**report.to_json(), "clients": clients.to_json()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        console = make_console()
        for statement, version in report.uncovered:
            console.print(Text(f"not covered  {statement} [STOMP {version}]", style="yellow"))
        for orphan in report.orphans:
            console.print(Text(f"no statement  {orphan}", style="yellow"))
        for statement, version in clients.uncovered:
            console.print(Text(f"not covered by a client case  {statement} [STOMP {version}]",
                               style="dim"))
        console.print(f"{len(report.covered)} of {len(report.covered) + len(report.uncovered)} "
                      f"observable statement-version pairs covered ({report.rate:.1%}); "
                      f"{len(report.orphans)} cases name no statement")
        console.print(f"clients: {len(clients.covered)} of "
                      f"{len(clients.covered) + len(clients.uncovered)} client-observable "
                      f"statement-version pairs covered by client cases ({clients.rate:.1%})")
    return Exit.OK if not report.uncovered and not report.orphans else Exit.FAILED
