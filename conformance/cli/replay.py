"""`stomp-conformance replay`: a fuzz finding's reproducer sent again and judged. Without
--broker, against the broker it was found on (the reference broker started again with the
same faults, over the transport it was found on unless --transport says). Exit 1 when it
reproduces, 0 when it does not, 2 usage, 3 harness."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from conformance.cli.arguments import positive
from conformance.cli.exits import Exit, fail
from conformance.cli.fuzz import fuzz_versions, launch_flags, launched
from conformance.cli.options import Verbs, broker_flags, where_from_flags
from conformance.report.console import make_console
from conformance.spec.grammar import VERSIONS

if TYPE_CHECKING:
    from conformance.fuzz.network.replay import Replayed


def add(verbs: Verbs) -> None:
    again = verbs.add_parser(
        "replay", help="replay a fuzz finding",
        description="Send a finding's reproducer again and judge the answer. Without "
                    "--broker, against the broker it was found on (the reference broker, started "
                    "with the same faults). Exit 1 when it reproduces, 0 when it does not.")
    again.add_argument("finding", metavar="FINDING.json")
    broker_flags(again, None)
    again.add_argument("--times", type=positive, default=1,
                       help="how many times to send it (default 1)")
    launch_flags(again)
    again.set_defaults(run=replay_command)


def replay_command(args: argparse.Namespace) -> Exit:
    from conformance.broker.child import ChildBrokerError
    from conformance.fuzz.network.folder import CampaignDirError, load_finding
    from conformance.fuzz.network.generators import generator
    from conformance.fuzz.network.oracle import Oracle, Unreachable
    from conformance.fuzz.network.process import LaunchError
    from conformance.fuzz.network.replay import replay
    from conformance.fuzz.network.where import UsageError

    try:
        path = Path(args.finding)
        finding = load_finding(path)
        recorded = finding.broker
        if args.broker is None and not recorded.embedded:
            broker: str | None = recorded.address
        else:
            broker = args.broker
        faults = args.fault if args.fault is not None else \
            (recorded.faults if broker is None else ())
        profile = args.profile or (recorded.profile if broker == recorded.address or
                                   broker is None else "reference")
        where = where_from_flags(args, broker=broker, profile=profile, faults=faults,
                                 websocket=broker is None and recorded.transport == "ws")
        versions = tuple(v for v in VERSIONS if v in fuzz_versions(None, where.profile)
                         or v == finding.input.version)
        gen = generator(finding.generator, versions)
    except (UsageError, ValueError, CampaignDirError) as error:
        return fail(Exit.USAGE, str(error))
    console = make_console()
    console.print(Text(f"{finding.id}: ", style="bold") +
                  Text(f"{finding.kind.value} {finding.statement} ({finding.grade.value}); "
                       f"{finding.input.mutation}, STOMP {finding.input.version}, "
                       f"{len(finding.input.data)} octets in {len(finding.input.chunks)} "
                       f"writes; replaying against {where.info.id}"), soft_wrap=True)

    async def run() -> Replayed:
        async with where.target(versions) as target:
            oracle = Oracle(target, deadline=args.deadline)
            log = Path(tempfile.gettempdir()) / f"stomp-conformance-replay-{finding.id}.log"
            async with launched(args, oracle, log) as process:
                return await replay(finding, oracle, gen, times=args.times, process=process)

    try:
        result = asyncio.run(run())
    except (Unreachable, ChildBrokerError, LaunchError) as error:
        return fail(Exit.HARNESS, f"cannot replay against {where.info.id}: {error}")
    for n, verdict in enumerate(result.judgements, 1):
        seen = "; ".join(f"{a.kind.value} {a.statement}" for a in verdict.anomalies) or \
            "no anomaly"
        console.print(f"  try {n}: ended {verdict.ended or '-'}: {seen}", soft_wrap=True)
    if result.reproduced:
        detail = result.matched.detail if result.matched else ""
        console.print(Text(f"reproduced {result.reproduced}/{result.tries}: ",
                           style="bold red") + Text(detail), soft_wrap=True)
        return Exit.FAILED
    console.print(Text(f"did not reproduce (0/{result.tries})", style="green"))
    return Exit.OK
