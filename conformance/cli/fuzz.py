"""`stomp-conformance fuzz`: grammar-driven input against a broker (the reference broker in a
child process, with --fault switches, when no --broker is given; a non-loopback broker is
refused without --allow-remote), each finding saved in the campaign folder as it is found.
Exit 0 when nothing is found (or no finding is graded failed), 1 when a finding is graded
failed, 2 usage or configuration, 3 the broker could not be reached or the harness failed.

The fuzzer's modules load when the verb runs, not for `stomp-conformance --help`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from conformance import __version__
from conformance.cli.arguments import positive, seconds
from conformance.cli.exits import Exit, fail
from conformance.cli.options import Verbs, broker_flags, where_from_flags
from conformance.fuzz.network.finding_records import finding_record, write_finding_records
from conformance.profiles import Profile
from conformance.report.scrub import Scrubber
from conformance.runner.results import Outcome
from conformance.spec.grammar import VERSIONS, Version

if TYPE_CHECKING:
    from conformance.fuzz.network.campaign import Campaign
    from conformance.fuzz.network.findings import Finding
    from conformance.fuzz.network.folder import CampaignDir
    from conformance.fuzz.network.oracle import Oracle
    from conformance.fuzz.network.process import BrokerProcess


def add(verbs: Verbs) -> None:
    fuzz = verbs.add_parser(
        "fuzz", help="fuzz a broker with grammar-driven input",
        description="Send inputs built from the spec's grammar (valid sessions and inputs that "
                    "each break one rule) to a broker, judge each answer, check that it stays "
                    "alive, and save each finding (reproducer, answer, grade, YAML case) in "
                    "--corpus DIR as it is found. A campaign stopped at any point resumes from "
                    "DIR. Exit 1 when a finding is graded failed, 0 otherwise.")
    broker_flags(fuzz, "reference")
    fuzz.add_argument("--time", default="60s", metavar="DURATION",
                      help="how long to fuzz: 90s, 10m, 1h (default 60s)")
    fuzz.add_argument("--seed", type=int, help="the campaign's seed (default: a random one)")
    fuzz.add_argument("--corpus", default="fuzz-campaign", metavar="DIR",
                      help="the campaign folder: state, corpus, findings (default "
                           "./fuzz-campaign; an existing campaign there is resumed)")
    fuzz.add_argument("--jobs", type=positive, default=16,
                      help="inputs under way at once (default 16)")
    fuzz.add_argument("--minimise", type=float, default=10.0, metavar="SECONDS",
                      help="seconds spent minimising each finding (default 10; 0: none)")
    fuzz.add_argument("--stomp-version", action="append", choices=VERSIONS,
                      help="fuzz this version only (repeatable; default: the profile's)")
    fuzz.add_argument("--mutation", action="append", metavar="NAME",
                      help="use only this mutation (repeatable; default: all)")
    fuzz.add_argument("--generator", default="grammar", help="what draws the inputs "
                      "(default grammar)")
    fuzz.add_argument("--results", metavar="DIR",
                      help="write JSON Lines finding records for the pipeline into "
                           "DIR/findings.jsonl")
    launch_flags(fuzz)
    leaks = fuzz.add_argument_group("the resource oracle (with --launch)")
    leaks.add_argument("--hang-after", type=seconds, default=10.0, metavar="SECONDS",
                       help="a broker whose process lives but takes no connection this long "
                            "hangs (default 10; also how long an unlaunched broker that went "
                            "down is awaited)")
    leaks.add_argument("--leak-rss", type=positive, default=512, metavar="MIB",
                       help="RSS growth over the broker's baseline that is a leak when it "
                            "lasts --leak-window (default 512 MiB)")
    leaks.add_argument("--leak-fds", type=positive, default=1000, metavar="N",
                       help="growth in open file descriptors that is a leak (default 1000)")
    leaks.add_argument("--leak-threads", type=positive, default=500, metavar="N",
                       help="growth in threads that is a leak (default 500)")
    leaks.add_argument("--leak-window", type=seconds, default=30.0, metavar="SECONDS",
                       help="how long growth must last to be a leak (default 30)")
    fuzz.set_defaults(run=fuzz_command)


def launch_flags(verb: argparse.ArgumentParser) -> None:
    verb.add_argument("--launch", metavar="COMMAND",
                      help="start the broker with COMMAND (a shell command that runs it in the "
                           "foreground at --broker's address), watch its process, and start it "
                           "again after it dies or hangs; it is stopped at the end")
    verb.add_argument("--launch-timeout", type=seconds, default=180.0, metavar="SECONDS",
                      help="how long the launched broker may take to take connections "
                           "(default 180)")


@contextlib.asynccontextmanager
async def launched(args: argparse.Namespace, oracle: Oracle, log: Path
                   ) -> AsyncIterator[BrokerProcess | None]:
    """The broker --launch starts (None without it), up and taking connections; stopped on
    the way out. LaunchError when it does not come up."""
    from conformance.fuzz.network.process import BrokerProcess

    if not args.launch:
        yield None
        return
    process = BrokerProcess(args.launch, log, oracle.alive, timeout=args.launch_timeout)
    try:
        await process.start()
        yield process
    finally:
        await process.stop()


def fuzz_versions(chosen: Sequence[str] | None, profile: Profile) -> tuple[Version, ...]:
    """The versions given, or the profile's; UsageError when none is left."""
    from conformance.fuzz.network.where import UsageError

    wanted = chosen or [v for v in profile.versions if v in VERSIONS]
    versions = tuple(v for v in VERSIONS if v in wanted)
    if not versions:
        raise UsageError("no STOMP version to fuzz: give --stomp-version")
    return versions


def fuzz_command(args: argparse.Namespace) -> Exit:
    from conformance.broker.child import ChildBrokerError
    from conformance.fuzz.network.campaign import Campaign, open_folder
    from conformance.fuzz.network.display import CampaignDisplay
    from conformance.fuzz.network.events import Settings
    from conformance.fuzz.network.findings import worst
    from conformance.fuzz.network.folder import CampaignDirError
    from conformance.fuzz.network.generators import generator
    from conformance.fuzz.network.oracle import Oracle, Unreachable
    from conformance.fuzz.network.process import LaunchError, Resources, Thresholds
    from conformance.fuzz.network.where import UsageError, parse_duration

    try:
        budget = parse_duration(args.time)
        where = where_from_flags(args, broker=args.broker, profile=args.profile,
                                 faults=args.fault or ())
        versions = fuzz_versions(args.stomp_version, where.profile)
        gen = generator(args.generator, versions, args.mutation)
        broker = dataclasses.replace(where.info, launch=args.launch or "")
        folder, state, resumed = open_folder(
            Path(args.corpus), seed=args.seed, broker=broker, generator=gen.name,
            versions=versions, tool_version=__version__)
    except (UsageError, ValueError, CampaignDirError) as error:
        return fail(Exit.USAGE, str(error))
    settings = Settings(budget=budget, jobs=args.jobs, deadline=args.deadline,
                        minimise=args.minimise, recovery=args.hang_after)
    display = CampaignDisplay()

    async def run() -> tuple[list[Finding], Campaign]:
        async with where.target(versions) as target:
            oracle = Oracle(target, deadline=settings.deadline, grace=settings.grace)
            records = _Records(args.results, state.campaign, oracle, where.secret, folder)
            async with launched(args, oracle, folder.root / "broker.log") as process:
                resources = None if process is None else Resources(Thresholds(
                    rss=args.leak_rss * 2**20, fds=args.leak_fds, threads=args.leak_threads,
                    window=args.leak_window))
                campaign = Campaign(oracle=oracle, generator=gen, folder=folder, state=state,
                                    settings=settings, resumed=resumed, passcode=where.secret,
                                    handlers=[display], on_finding=records, process=process,
                                    resources=resources)
                loop = asyncio.get_running_loop()
                for signum in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(signum, campaign.stop)
                try:
                    findings = await campaign.run()
                finally:
                    for signum in (signal.SIGINT, signal.SIGTERM):
                        loop.remove_signal_handler(signum)
            records(findings)
            return findings, campaign

    try:
        findings, campaign = asyncio.run(run())
    except (Unreachable, ChildBrokerError, LaunchError) as error:
        return fail(Exit.HARNESS, f"cannot fuzz {where.info.id}: {error}")
    except OSError as error:
        return fail(Exit.USAGE, f"cannot write the campaign's files: {error.strerror or error}")
    finally:
        folder.unlock()
    if args.results:
        print(f"wrote {Path(args.results) / 'findings.jsonl'}", file=sys.stderr)
    if worst(findings) is Outcome.FAILED:
        return Exit.FAILED
    return Exit.HARNESS if campaign.stats.harness_errors else Exit.OK


class _Records:
    """Writes findings.jsonl into --results DIR each time a finding is saved."""

    def __init__(self, folder: str | None, campaign: str, oracle: Oracle,
                 passcode: str | None, store: CampaignDir) -> None:
        self.folder, self.campaign, self.oracle, self.store = folder, campaign, oracle, store
        self.scrubber = Scrubber(passcode)

    def __call__(self, findings: list[Finding]) -> None:
        if self.folder is None:
            return
        server = self.oracle.server
        server = None if server is None else self.scrubber.text(server)
        records = [finding_record(f, path=str(self.store.finding_path(f.id)), server=server)
                   for f in sorted(findings, key=lambda f: f.found_at)]
        write_finding_records(Path(self.folder), records, self.campaign)
