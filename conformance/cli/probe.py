"""`stomp-conformance probe`: the limit and segmentation probes (conformance.probes) against
a broker, the reference broker in this process by default; a non-loopback broker is refused
without --allow-remote, as the probes send hostile input. Exit 0 when no verdict is failed,
1 when one is, 2 for a usage or configuration mistake, 3 when the broker cannot be reached."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from rich.console import Console
from rich.text import Text

from conformance.broker import BrokerConfig, embedded
from conformance.cli.arguments import seconds
from conformance.cli.exits import Exit, fail
from conformance.cli.options import Verbs, broker_flags, tls_options, websocket_chosen
from conformance.probes import PROBES, Grade, ProbeOptions, ProbeResult, run_probes
from conformance.profiles import ProfileError, load_profile
from conformance.spec.grammar import VERSIONS
from conformance.wire.stream import TransportError
from conformance.wire.target import HarnessError, Target
from conformance.wire.transport import is_loopback, parse_broker

_STYLE = {Grade.PASSED: "green", Grade.FAILED: "bold red", Grade.NON_STRICT: "yellow",
          Grade.FINDING: "magenta", Grade.INFORMATIONAL: "cyan"}


def add(verbs: Verbs) -> None:
    probing = verbs.add_parser(
        "probe", help="probe a broker's size limits and its handling of cut, slow and "
                      "batched frames",
        description="Find the broker's header count, header line and body limits (grown, "
                    "then bisected to the exact value), send frames cut at every octet, "
                    "dribble a frame an octet at a time, and write many frames at once; "
                    "each probe gets a verdict. Exit 1 when a verdict is failed, 0 otherwise.")
    broker_flags(probing, "reference", deadline=False)
    probing.add_argument("--probe", action="append", metavar="NAME",
                         help="run this probe only (repeatable): header-count, header-line, "
                              "body, split, slow-loris, many-frames (default: all)")
    probing.add_argument("--stomp-version", choices=VERSIONS, default="1.2")
    probing.add_argument("--budget", type=seconds, default=60.0,
                         help="seconds each probe may take (default 60)")
    probing.add_argument("--within", type=seconds, default=5.0,
                         help="seconds an answer may take (default 5)")
    probing.add_argument("--slow-budget", type=seconds, default=40.0,
                         help="seconds slow-loris dribbles each of its two frames (default 40)")
    probing.add_argument("--slow-interval", type=seconds, default=1.0,
                         help="seconds between the octets slow-loris sends (default 1)")
    probing.add_argument("--json", action="store_true",
                         help="print the verdicts as JSON on stdout, nothing else")
    probing.set_defaults(run=probe_command)


def probe_command(args: argparse.Namespace) -> Exit:
    # never wrapped by rich, on a terminal either: each verdict stays one line
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        address = parse_broker(args.broker) if args.broker else None
        profile = load_profile(args.profile)
        options = ProbeOptions(version=args.stomp_version, budget=args.budget,
                               within=args.within, slow_budget=args.slow_budget,
                               slow_interval=args.slow_interval)
        config = BrokerConfig(port=0, faults=frozenset(args.fault or ()))
        websocket = websocket_chosen(args, address)
    except (ValueError, ProfileError) as error:
        return fail(Exit.USAGE, str(error))
    unknown = sorted(set(args.probe or ()) - set(PROBES))
    if unknown:
        return fail(Exit.USAGE,
                    f"unknown probe {', '.join(unknown)}: choose from {', '.join(PROBES)}")
    if address is not None and args.fault:
        return fail(Exit.USAGE,
                    "--fault switches on a fault of the embedded broker: leave out --broker")
    if address is not None and not args.allow_remote and not is_loopback(address):
        return fail(Exit.USAGE, f"{address.display} is not on this machine: the probes send "
                                "hostile input; add --allow-remote if that broker is yours "
                                "to probe")
    tls = tls_options(args, address)
    chosen = args.probe or PROBES

    def progress(text: str) -> None:
        if not args.json:
            err.print(text, style="dim", markup=False)

    async def go() -> list[ProbeResult]:
        if address is None:
            async with embedded(config, websocket=websocket) as server:
                where = Target(parse_broker(server.url(websocket=websocket)), profile, tls=tls,
                               login=args.login, passcode=args.passcode, host=args.vhost)
                return await run_probes(where, probes=chosen, options=options,
                                        progress=progress)
        target = Target(address, profile, tls=tls, login=args.login, passcode=args.passcode,
                        host=args.vhost)
        return await run_probes(target, probes=chosen, options=options, progress=progress)

    try:
        verdicts = asyncio.run(go())
    except (HarnessError, TransportError) as error:
        return fail(Exit.HARNESS, str(error))
    if args.json:
        json.dump([v.to_json() for v in verdicts], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        out = Console(highlight=False, soft_wrap=True)
        where = address.display if address is not None else \
            "the reference broker" + (" over WebSocket" if websocket else "")
        out.print(f"probes against {where} (STOMP {options.version}):", markup=False)
        for verdict in verdicts:
            line = Text(f"{verdict.grade.value:14}", style=_STYLE[verdict.grade])
            line.append(f"{verdict.probe:13}", style="bold")
            line.append(f"{verdict.summary}  ({verdict.duration_s:.1f} s)")
            if verdict.statements:
                line.append(f"  [{', '.join(verdict.statements)}]", style="dim")
            out.print(line)
    return Exit.FAILED if any(v.grade is Grade.FAILED for v in verdicts) else Exit.OK
