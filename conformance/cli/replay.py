"""`stomp-conformance replay`: fuzz findings' reproducers sent again and judged. Without
--broker, against the broker they were found on (the reference broker started again with
the same faults, over the transport they were found on unless --transport says). Several
findings (files, or folders of them) are replayed in one session and must be of one broker.
--record writes how many tries reproduced each into its file, where the published report
reads it. Exit 1 when one reproduces, 0 when none does, 2 usage, 3 harness."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Sequence
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
    from rich.console import Console

    from conformance.fuzz.network.findings import Finding
    from conformance.fuzz.network.replay import Replayed


def add(verbs: Verbs) -> None:
    again = verbs.add_parser(
        "replay", help="replay fuzz findings",
        description="Send findings' reproducers again and judge the answers. Without "
                    "--broker, against the broker they were found on (the reference broker, "
                    "started with the same faults). Exit 1 when one reproduces, 0 when none "
                    "does.")
    again.add_argument("findings", nargs="+", metavar="FINDING.json|DIR",
                       help="a finding file, or a folder of them (a campaign's findings/)")
    broker_flags(again, None)
    again.add_argument("--times", type=positive, default=1,
                       help="how many times to send each (default 1)")
    again.add_argument("--record", action="store_true",
                       help="write how many of the tries reproduced each finding into its "
                            "file (the published report shows it; an intermittent finding's "
                            "replay command then asks for enough tries to show it)")
    launch_flags(again)
    again.set_defaults(run=replay_command)


def _paths(given: Sequence[str]) -> list[Path]:
    """The finding files named, a folder standing for the *.json in it; ValueError for
    a path that is neither, or a folder with none."""
    paths: list[Path] = []
    for name in given:
        path = Path(name)
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise ValueError(f"{path}: no finding files (*.json) in the folder")
            paths += found
        elif path.exists():
            paths.append(path)
        else:
            raise ValueError(f"{path}: no such file or folder")
    return paths


def replay_command(args: argparse.Namespace) -> Exit:
    from conformance.broker.child import ChildBrokerError
    from conformance.fuzz.network.folder import CampaignDirError, load_finding
    from conformance.fuzz.network.generators import generator
    from conformance.fuzz.network.oracle import Kind, Oracle, Unreachable
    from conformance.fuzz.network.process import LaunchError
    from conformance.fuzz.network.replay import replay
    from conformance.fuzz.network.where import UsageError

    console = make_console()
    try:
        paths, findings = [], []
        for path in _paths(args.findings):
            finding = load_finding(path)
            if finding.kind is Kind.LEAK:  # the campaign's samples over a window show it
                console.print(f"{finding.id}: not replayed: a leak shows in the resource "
                              "samples of a campaign, not in a replay", soft_wrap=True)
                continue
            paths.append(path)
            findings.append(finding)
        if not findings:
            return Exit.OK
        recorded = findings[0].broker
        if args.broker is None and any(f.broker.id != recorded.id for f in findings):
            raise UsageError("the findings were found on more than one broker: replay each "
                             "broker's apart, or name one with --broker")
        if args.record and (args.broker not in (None, recorded.address) or args.fault
                            is not None and set(args.fault) != set(recorded.faults)):
            raise UsageError("--record keeps what the broker a finding was found on does: "
                             "replay against that broker (no other --broker or --fault)")
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
                         or any(v == f.input.version for f in findings))
        generators = [generator(f.generator, versions) for f in findings]
    except (UsageError, ValueError, CampaignDirError) as error:
        return fail(Exit.USAGE, str(error))

    async def run() -> list[Replayed]:
        out: list[Replayed] = []
        async with where.target(versions) as target:
            oracle = Oracle(target, deadline=args.deadline)
            log = Path(tempfile.gettempdir()) / f"stomp-conformance-replay-{findings[0].id}.log"
            async with launched(args, oracle, log) as process:
                for finding, gen in zip(findings, generators, strict=True):
                    _heading(console, finding, where.info.id)
                    result = await replay(finding, oracle, gen, times=args.times,
                                          process=process)
                    _show(console, result)
                    out.append(result)
        return out

    try:
        results = asyncio.run(run())
    except (Unreachable, ChildBrokerError, LaunchError) as error:
        return fail(Exit.HARNESS, f"cannot replay against {where.info.id}: {error}")
    if args.record:
        from conformance.fuzz.network.folder import record_replays
        try:
            for path, finding, result in zip(paths, findings, results, strict=True):
                record_replays(path, finding, result.tries, result.reproduced)
        except CampaignDirError as error:
            return fail(Exit.HARNESS, str(error))
    if len(findings) > 1 or args.record:
        every = sum(r.reproduced == r.tries for r in results)
        none = sum(r.reproduced == 0 for r in results)
        many = "s" if len(findings) > 1 else ""
        console.print(f"{len(findings)} finding{many}, {args.times} tries each: {every} reproduced "
                      f"every time, {len(findings) - every - none} some of the times, "
                      f"{none} never" + (" (recorded in their files)" if args.record else ""))
    return Exit.FAILED if any(r.reproduced for r in results) else Exit.OK


def _heading(console: Console, finding: Finding, where: str) -> None:
    console.print(Text(f"{finding.id}: ", style="bold") +
                  Text(f"{finding.kind.value} {finding.statement} ({finding.grade.value}); "
                       f"{finding.input.mutation}, STOMP {finding.input.version}, "
                       f"{len(finding.input.data)} octets in {len(finding.input.chunks)} "
                       f"writes; replaying against {where}"), soft_wrap=True)


def _show(console: Console, result: Replayed) -> None:
    for n, verdict in enumerate(result.judgements, 1):
        seen = "; ".join(f"{a.kind.value} {a.statement}" for a in verdict.anomalies) or \
            "no anomaly"
        console.print(f"  try {n}: ended {verdict.ended or '-'}: {seen}", soft_wrap=True)
    if result.reproduced:
        detail = result.matched.detail if result.matched else ""
        console.print(Text(f"reproduced {result.reproduced}/{result.tries}: ",
                           style="bold red") + Text(detail), soft_wrap=True)
    else:
        console.print(Text(f"did not reproduce (0/{result.tries})", style="green"))
