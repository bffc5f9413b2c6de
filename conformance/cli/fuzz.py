"""The work behind `stomp-conformance fuzz` and `stomp-conformance replay`: checking the
flags (a non-loopback broker is refused without --allow-remote), the broker (the reference
broker in a child process, with --fault switches, when no --broker is given), the campaign or the
replay, and the exit code: 0 nothing found (or no finding graded failed), 1 a finding
graded failed (fuzz) or the finding reproduced (replay), 2 usage or configuration, 3 the
broker could not be reached or the harness failed."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.text import Text

from conformance import __version__
from conformance.broker import BrokerConfig
from conformance.broker.child import ChildBrokerError, reference_process
from conformance.cli.options import tls_options
from conformance.fuzz.network.campaign import Campaign, Settings, open_folder, worst
from conformance.fuzz.network.display import CampaignDisplay
from conformance.fuzz.network.finding_records import finding_record, write_finding_records
from conformance.fuzz.network.findings import BrokerInfo, Finding
from conformance.fuzz.network.folder import CampaignDir, CampaignDirError, load_finding
from conformance.fuzz.network.generators import generator
from conformance.fuzz.network.oracle import Oracle, Unreachable
from conformance.fuzz.network.replay import Replayed, replay
from conformance.profiles import Profile, ProfileError, load_profile
from conformance.report.scrub import Scrubber
from conformance.runner.results import Outcome
from conformance.spec.grammar import VERSIONS, Version
from conformance.wire.target import Target
from conformance.wire.transport import BrokerAddress, TlsOptions, is_loopback, parse_broker

EXIT_OK, EXIT_FOUND, EXIT_USAGE, EXIT_HARNESS = 0, 1, 2, 3
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s?)?")


class UsageError(Exception):
    """A flag or file the user gave cannot be used (one line)."""


def parse_duration(text: str) -> float:
    """Seconds in `90`, `90s`, `10m`, `1h`, `1h30m`, `2m30s`; UsageError otherwise."""
    found = _DURATION.fullmatch(text.strip())
    if not text.strip() or found is None or not any(found.groups()):
        raise UsageError(f"--time: expected a duration like 90s, 10m or 1h, not {text!r}")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in found.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise UsageError(f"--time: the duration must be above 0, not {text!r}")
    return total


def _err(message: str) -> None:
    print(f"stomp-conformance: {message}", file=sys.stderr)


@dataclass
class Where:
    """The broker to fuzz or replay against: given, or the reference broker this command
    starts (its id still reads `reference@embedded`, as findings record it)."""

    address: BrokerAddress | None
    profile: Profile
    profile_name: str
    faults: tuple[str, ...]
    tls: TlsOptions | None
    login: str | None
    passcode: str | None
    vhost: str | None

    @property
    def info(self) -> BrokerInfo:
        if self.address is None:
            suffix = "+" + ",".join(self.faults) if self.faults else ""
            return BrokerInfo(id=f"reference@embedded{suffix}", address="",
                              profile="reference", faults=self.faults, embedded=True)
        return BrokerInfo(id=f"{self.profile.name}@{self.address.display}",
                          address=self.address.display, profile=self.profile_name,
                          tls=self.address.tls)

    @contextlib.asynccontextmanager
    async def target(self, versions: Sequence[Version]) -> AsyncIterator[Target]:
        """The oracle's target, starting the reference broker (in a child process) for the
        block if needed."""
        if self.address is not None:
            yield self._target(self.address, versions)
            return
        async with reference_process(self.faults) as port:
            yield self._target(parse_broker(f"127.0.0.1:{port}"), versions)

    def _target(self, address: BrokerAddress, versions: Sequence[Version]) -> Target:
        return Target(address, self.profile, tls=self.tls, login=self.login,
                      passcode=self.passcode, host=self.vhost, chosen=tuple(versions))

    @property
    def secret(self) -> str | None:
        if self.address is None:
            return None
        return self.passcode or self.address.passcode or self.profile.passcode


def _where(args: argparse.Namespace, *, broker: str | None, profile: str,
           faults: Sequence[str]) -> Where:
    """The broker of the flags; UsageError for a bad one or a refused remote one."""
    try:
        address = parse_broker(broker) if broker else None
        loaded = load_profile(profile)
    except (ValueError, ProfileError) as error:
        raise UsageError(str(error)) from None
    if address is not None:
        if faults:
            raise UsageError("--fault switches faults of the reference broker that this "
                             "command starts: it cannot be used with --broker")
        if not args.allow_remote and not is_loopback(address):
            raise UsageError(f"refusing to send fuzz input to {address.display}: it is not a "
                             "loopback address (malformed input can crash a broker); add "
                             "--allow-remote to fuzz a broker you own there")
    try:
        BrokerConfig(faults=frozenset(faults))
    except ValueError as error:
        raise UsageError(str(error)) from None
    tls = tls_options(args, address)
    return Where(address, loaded, profile, tuple(sorted(set(faults))), tls, args.login,
                 args.passcode, args.vhost)


def _versions(chosen: Sequence[str] | None, profile: Profile) -> tuple[Version, ...]:
    wanted = chosen or [v for v in profile.versions if v in VERSIONS]
    versions = tuple(v for v in VERSIONS if v in wanted)
    if not versions:
        raise UsageError("no STOMP version to fuzz: give --stomp-version")
    return versions


# -- fuzz ----------------------------------------------------------------------------------

def fuzz_command(args: argparse.Namespace) -> int:
    try:
        budget = parse_duration(args.time)
        where = _where(args, broker=args.broker, profile=args.profile, faults=args.fault or ())
        versions = _versions(args.stomp_version, where.profile)
        gen = generator(args.generator, versions, args.mutation)
        folder, state, resumed = open_folder(
            Path(args.corpus), seed=args.seed, broker=where.info, generator=gen.name,
            versions=versions, tool_version=__version__)
    except (UsageError, ValueError, CampaignDirError) as error:
        _err(str(error))
        return EXIT_USAGE
    settings = Settings(budget=budget, jobs=args.jobs, deadline=args.deadline,
                        minimise=args.minimise)
    display = CampaignDisplay()

    async def run() -> tuple[list[Finding], Campaign]:
        async with where.target(versions) as target:
            oracle = Oracle(target, deadline=settings.deadline, grace=settings.grace)
            records = _Records(args.results, state.campaign, oracle, where.secret, folder)
            campaign = Campaign(oracle=oracle, generator=gen, folder=folder, state=state,
                                settings=settings, resumed=resumed, passcode=where.secret,
                                handlers=[display], on_finding=records)
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
    except (Unreachable, ChildBrokerError) as error:
        _err(f"cannot fuzz {where.info.id}: {error}")
        return EXIT_HARNESS
    except OSError as error:
        _err(f"cannot write the campaign's files: {error.strerror or error}")
        return EXIT_USAGE
    finally:
        folder.unlock()
    if args.results:
        print(f"wrote {Path(args.results) / 'findings.jsonl'}", file=sys.stderr)
    if worst(findings) is Outcome.FAILED:
        return EXIT_FOUND
    return EXIT_HARNESS if campaign.stats.harness_errors else EXIT_OK


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


# -- replay --------------------------------------------------------------------------------

def replay_command(args: argparse.Namespace) -> int:
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
        where = _where(args, broker=broker, profile=profile, faults=faults)
        versions = tuple(v for v in VERSIONS if v in _versions(None, where.profile)
                         or v == finding.input.version)
        gen = generator(finding.generator, versions)
    except (UsageError, ValueError, CampaignDirError) as error:
        _err(str(error))
        return EXIT_USAGE
    console = Console(highlight=False)
    console.print(Text(f"{finding.id}: ", style="bold") +
                  Text(f"{finding.kind.value} {finding.statement} ({finding.grade.value}); "
                       f"{finding.input.mutation}, STOMP {finding.input.version}, "
                       f"{len(finding.input.data)} octets in {len(finding.input.chunks)} "
                       f"writes; replaying against {where.info.id}"), soft_wrap=True)

    async def run() -> Replayed:
        async with where.target(versions) as target:
            oracle = Oracle(target, deadline=args.deadline)
            return await replay(finding, oracle, gen, times=args.times)

    try:
        result = asyncio.run(run())
    except (Unreachable, ChildBrokerError) as error:
        _err(f"cannot replay against {where.info.id}: {error}")
        return EXIT_HARNESS
    for n, verdict in enumerate(result.verdicts, 1):
        seen = "; ".join(f"{a.kind.value} {a.statement}" for a in verdict.anomalies) or \
            "no anomaly"
        console.print(f"  try {n}: ended {verdict.ended or '-'}: {seen}", soft_wrap=True)
    if result.reproduced:
        detail = result.matched.detail if result.matched else ""
        console.print(Text(f"reproduced {result.reproduced}/{result.tries}: ",
                           style="bold red") + Text(detail), soft_wrap=True)
        return EXIT_FOUND
    console.print(Text(f"did not reproduce (0/{result.tries})", style="green"))
    return EXIT_OK
