"""`stomp-conformance stateful`: the stateful fuzzer (conformance.fuzz.stateful) against a
broker, the reference broker in this process by default (with --fault switches); a
non-loopback broker is refused without --allow-remote, as by `fuzz`. The smallest failing
session found is written into --output as a case file, which `run --cases FILE` replays
against any broker. Exit 1 when a failing session is found, 0 when none is, 2 usage or
configuration, 3 the broker could not be reached.

A verb of its own rather than a `fuzz --generator`: it explores sessions under Hypothesis
within a number of examples, keeps no campaign folder and writes a case, not findings, so
most of `fuzz`'s flags would not apply. Hypothesis loads when the verb runs, not for
`stomp-conformance --help`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
from pathlib import Path

from rich.text import Text

from conformance.broker import BrokerConfig
from conformance.cli.arguments import positive
from conformance.cli.exits import Exit, fail
from conformance.cli.options import Verbs, broker_flags, where_from_flags
from conformance.files import write_atomic
from conformance.report.console import make_console
from conformance.wire.target import HarnessError, Target


def add(verbs: Verbs) -> None:
    stateful = verbs.add_parser(
        "stateful", help="fuzz a broker with whole sessions checked against a delivery model",
        description="Run random sessions (connect, subscribe in each ack mode, send, ack, "
                    "nack, transactions, disconnect, reconnect) against a broker and check "
                    "every frame it sends against the spec's delivery model; shrink the first "
                    "failing session to the smallest that still fails and write it into "
                    "--output DIR as a case file (`run --cases FILE` replays it). Exit 1 when "
                    "a failing session is found, 0 otherwise.")
    broker_flags(stateful, "reference", deadline=False)
    stateful.add_argument("--seed", type=int, help="the exploration's seed (default: a random "
                                                   "one, printed)")
    stateful.add_argument("--examples", type=positive, default=50, metavar="N",
                          help="sessions to try at most (default 50)")
    stateful.add_argument("--time", default="60s", metavar="DURATION",
                          help="how long to explore, shrinking included: 90s, 10m, 1h "
                               "(default 60s)")
    stateful.add_argument("--shrink-time", metavar="DURATION",
                          help="how long to shrink the first failing session at most "
                               "(default: what --time leaves)")
    stateful.add_argument("--output", default="fuzz-cases", metavar="DIR",
                          help="where the smallest failing session is written as a case file "
                               "(default ./fuzz-cases)")
    stateful.add_argument("--no-refusals", action="store_true",
                          help="send only well-formed sessions, none of the frames a broker "
                               "must refuse or ignore (so that its known answer to those does "
                               "not hide everything else)")
    stateful.add_argument("--json", metavar="PATH",
                          help="write the exploration (seed, budget, broker) and what it found "
                               "as JSON to PATH (`triage` reads it)")
    stateful.set_defaults(run=stateful_command)


def stateful_command(args: argparse.Namespace) -> Exit:
    from conformance.fuzz.network.where import UsageError, parse_duration

    try:
        budget = parse_duration(args.time)
        shrink = None if args.shrink_time is None else \
            parse_duration(args.shrink_time, "--shrink-time")
        where = where_from_flags(args, broker=args.broker, profile=args.profile,
                                 faults=args.fault or ())
    except UsageError as error:
        return fail(Exit.USAGE, str(error))
    from conformance.fuzz.stateful.explore import run_stateful
    from conformance.fuzz.stateful.harness import IN_PROCESS, StatefulOptions

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    target = None
    options = IN_PROCESS  # the reference broker in this process answers at once
    if where.address is not None:
        target = Target(where.address, where.profile, tls=where.tls, login=args.login,
                        passcode=args.passcode, host=args.vhost)
        options = StatefulOptions()
    options = dataclasses.replace(options, refusals=not args.no_refusals, shrink=shrink)
    err = make_console(stderr=True)
    err.print(Text(f"exploring {where.info.id} with seed {seed}: at most {args.examples} "
                   f"sessions in {budget:g} s", style="dim"))
    try:
        found = run_stateful(target, seed=seed, max_examples=args.examples, deadline=budget,
                             cases_dir=Path(args.output), options=options,
                             broker=BrokerConfig(port=0, faults=frozenset(where.faults)),
                             websocket=where.websocket)
    except HarnessError as error:
        return fail(Exit.HARNESS, f"cannot explore {where.info.id}: {error}")
    except OSError as error:
        return fail(Exit.USAGE, f"cannot write the case: {error.strerror or error}")
    if args.json:
        summary = {"seed": seed, "budget_s": budget, "examples": args.examples,
                   "broker": where.info.id, "refusals": not args.no_refusals,
                   "findings": [f.to_json() for f in found]}
        try:
            write_atomic(Path(args.json), json.dumps(summary, indent=1).encode() + b"\n")
        except OSError as error:
            return fail(Exit.USAGE, f"cannot write {args.json}: {error.strerror or error}")
    out = make_console()
    if not found:
        out.print(Text(f"no failing session (seed {seed})", style="green"))
        return Exit.OK
    finding = found[0]
    out.print(Text("found ", style="bold") + Text(f"({finding.level}) ", style="bold red") +
              Text(f"{finding.kind} ", style="bold") +
              Text(f"{', '.join(finding.statements)} [STOMP {finding.version}, "
                   f"{finding.steps} steps, seed {seed}]\n    {finding.detail}"))
    out.print(f"wrote {finding.case_file}; replayed against the same broker: "
              f"{finding.replay}; `stomp-conformance run --cases {finding.case_file}` "
              "replays it against any broker")
    return Exit.FAILED
