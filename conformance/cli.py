"""The `stomp-conformance` command line. Each verb is a small function; exit codes follow
the contract: 0 conformant, 1 a conformance failure, 2 usage or configuration error,
3 broker unreachable or the harness could not run."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text

from conformance import __version__
from conformance.spec import Level, Party, catalogue
from conformance.spec.grammar import VERSIONS

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_HARNESS = 0, 1, 2, 3


def _spec(args: argparse.Namespace) -> int:
    statements = catalogue().select(level=args.level, party=args.party, section=args.section,
                                    version=args.version, observable=args.observable)
    if args.json:
        json.dump([s.to_json() for s in statements], sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return EXIT_OK
    console = Console(highlight=False)
    colour = {"must": "bold red", "should": "yellow", "may": "cyan"}
    for s in statements:
        line = Text(s.id, style="bold")
        line.append(f"  {s.level.value}", style=colour[s.level.strength])
        line.append(f"  {s.party.value}  {','.join(s.versions)}"
                    f"{'  observable' if s.observable else ''}")
        console.print(line)
        console.print(Text(f"    {s.quote}", style="dim"))
    console.print(f"{len(statements)} statements")
    return EXIT_OK


def _level(value: str) -> str:
    known = {level.value for level in Level} | {"must", "should", "may"}
    if value.upper() not in known and value.lower() not in known:
        raise argparse.ArgumentTypeError(
            f"unknown level {value!r}: use must, should, may or a key word such as 'MUST NOT'")
    return value


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="stomp-conformance",
        description="Conformance suite and fuzzer for STOMP 1.0, 1.1 and 1.2 brokers.")
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = top.add_subparsers(dest="verb", metavar="VERB", required=True)

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
    spec.set_defaults(run=_spec)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except BrokenPipeError:  # `stomp-conformance spec | head`
        return EXIT_OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
