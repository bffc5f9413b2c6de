"""The `stomp-conformance` command line: the parser, assembled from one module per verb
(each declares its flags in `add` and names its handler), and `main`. Exit codes follow
the contract in cli/exits.py: 0 conformant, 1 a conformance failure, 2 usage or
configuration error, 3 broker unreachable or the harness could not run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from conformance import __version__
from conformance.cli import (
    broker,
    catalogue,
    clients,
    compare,
    fuzz,
    pipeline,
    probe,
    replay,
    run,
    selftest,
    stateful,
    triage,
)
from conformance.cli.exits import Exit, fail
from conformance.scenario import CaseLoadError

#: the verbs' order in --help
VERBS = (catalogue.add_spec, run.add, broker.add, fuzz.add, replay.add, stateful.add,
         triage.add, probe.add, pipeline.add, compare.add, clients.add, catalogue.add_coverage,
         selftest.add, catalogue.add_list, catalogue.add_show)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="stomp-conformance",
        description="Conformance suite and fuzzer for STOMP 1.0, 1.1 and 1.2 brokers.")
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = top.add_subparsers(dest="verb", metavar="VERB", required=True)
    for add in VERBS:
        add(verbs)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except CaseLoadError as error:
        return fail(Exit.USAGE, str(error))
    except BrokenPipeError:  # `stomp-conformance spec | head`
        return Exit.OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
