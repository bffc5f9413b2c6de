"""The `probe` verb's handler and its printing, until the command line holds them: it
starts the reference broker when no --broker is given, and runs the probes against it."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from rich.console import Console
from rich.text import Text

from conformance.broker import BrokerConfig, embedded
from conformance.cli.options import tls_options
from conformance.probes import PROBES, run_probes
from conformance.probes.results import Grade
from conformance.probes.results import ProbeResult as ProbeVerdict
from conformance.probes.session import ProbeOptions
from conformance.profiles import ProfileError, load_profile
from conformance.wire.target import HarnessError, Target
from conformance.wire.transport import TransportError, is_loopback, parse_broker

_STYLE = {Grade.PASSED: "green", Grade.FAILED: "bold red", Grade.NON_STRICT: "yellow",
          Grade.FINDING: "magenta", Grade.INFORMATIONAL: "cyan"}


def probe_command(args: argparse.Namespace) -> int:
    """`stomp-conformance probe`: 0 when no verdict is failed, 1 when one is, 2 for a usage
    or configuration mistake, 3 when the broker cannot be reached."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)

    def usage(message: str) -> int:
        print(f"stomp-conformance: {message}", file=sys.stderr)
        return 2

    try:
        address = parse_broker(args.broker) if args.broker else None
        profile = load_profile(args.profile)
        options = ProbeOptions(version=args.stomp_version, budget=args.budget,
                               within=args.within, slow_budget=args.slow_budget,
                               slow_interval=args.slow_interval)
        config = BrokerConfig(port=0, faults=frozenset(args.fault or ()))
    except (ValueError, ProfileError) as error:
        return usage(str(error))
    unknown = sorted(set(args.probe or ()) - set(PROBES))
    if unknown:
        return usage(f"unknown probe {', '.join(unknown)}: choose from {', '.join(PROBES)}")
    if address is not None and args.fault:
        return usage("--fault switches on a fault of the embedded broker: leave out --broker")
    if address is not None and not args.allow_remote and not is_loopback(address):
        return usage(f"{address.display} is not on this machine: the probes send hostile "
                     "input; add --allow-remote if that broker is yours to probe")
    tls = tls_options(args, address)
    chosen = args.probe or PROBES

    def progress(text: str) -> None:
        if not args.json:
            err.print(text, style="dim", markup=False)

    async def go() -> list[ProbeVerdict]:
        if address is None:
            async with embedded(config) as server:
                where = Target(parse_broker(f"127.0.0.1:{server.port}"), profile, tls=tls,
                               login=args.login, passcode=args.passcode, host=args.vhost)
                return await run_probes(where, probes=chosen, options=options,
                                        progress=progress)
        target = Target(address, profile, tls=tls, login=args.login, passcode=args.passcode,
                        host=args.vhost)
        return await run_probes(target, probes=chosen, options=options, progress=progress)

    try:
        verdicts = asyncio.run(go())
    except (HarnessError, TransportError) as error:
        print(f"stomp-conformance: {error}", file=sys.stderr)
        return 3
    if args.json:
        json.dump([v.to_json() for v in verdicts], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        out = Console(highlight=False, soft_wrap=True)
        where = address.display if address is not None else "the reference broker"
        out.print(f"probes against {where} (STOMP {options.version}):", markup=False)
        for verdict in verdicts:
            line = Text(f"{verdict.grade.value:14}", style=_STYLE[verdict.grade])
            line.append(f"{verdict.probe:13}", style="bold")
            line.append(f"{verdict.summary}  ({verdict.duration_s:.1f} s)")
            if verdict.statements:
                line.append(f"  [{', '.join(verdict.statements)}]", style="dim")
            out.print(line)
    return 1 if any(v.grade is Grade.FAILED for v in verdicts) else 0
