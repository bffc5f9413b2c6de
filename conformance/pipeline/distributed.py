"""The distributed fuzz campaign: seeds x brokers spread over Spark's executors, each task
a whole fuzz campaign (conformance.fuzz.network.campaign) for a time budget, then the findings
bucketed by the pipeline. The same code runs on local[*] and on a cluster: each task is
its own partition, so Spark hands tasks to whichever executor has a free core.

A task's campaign folder is OUTPUT/campaigns/BROKER-seedN (finding files, corpus, state):
running the same campaign again into the same output resumes every task where it stopped.
On a cluster, OUTPUT must be a folder every executor can write (a shared mount), and each
broker must be reachable from every executor.

`fuzz_task` is the seam: (seed, broker, budget, settings) -> TaskResult, run inside an
executor; `run_campaign` takes any function of that shape."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from conformance.files import write_atomic

#: A broker spec: `reference` or `reference+FAULT[,FAULT...]` (the reference broker,
#: started by each task), or `PROFILE@HOST:PORT`.
_SPEC = re.compile(r"(?P<profile>[A-Za-z0-9_.-]+)(?:@(?P<address>\S+)|\+(?P<faults>[\w,.-]+))?")


class CampaignError(Exception):
    """The campaign's flags cannot be used (one line)."""


@dataclass(frozen=True)
class TaskSettings:
    #: where each task's campaign folder goes (OUTPUT/campaigns)
    root: str
    #: inputs in flight per task
    jobs: int = 4
    #: seconds spent minimising each finding
    minimise: float = 2.0
    allow_remote: bool = False


@dataclass
class TaskResult:
    seed: int
    broker: str
    #: the finding records, as JSON lines
    records: list[str] = field(default_factory=list)
    inputs: int = 0
    seconds: float = 0.0
    #: why the task could not fuzz (broker unreachable, bad spec), else None
    error: str | None = None


FuzzTask = Callable[[int, str, float, TaskSettings], TaskResult]


def check_broker(spec: str, *, allow_remote: bool = False) -> None:
    """CampaignError unless `spec` names a broker this campaign can fuzz."""
    _where(spec, allow_remote=allow_remote)


def _where(spec: str, *, allow_remote: bool) -> object:
    from conformance.broker import BrokerConfig
    from conformance.fuzz.network.where import Where
    from conformance.profiles import ProfileError, load_profile
    from conformance.wire.transport import is_loopback, parse_broker

    match = _SPEC.fullmatch(spec)
    if match is None:
        raise CampaignError(f"--broker {spec!r}: use reference, reference+FAULT[,FAULT] or "
                            "PROFILE@HOST:PORT")
    faults = tuple(sorted(set(filter(None, (match["faults"] or "").split(",")))))
    try:
        profile = load_profile(match["profile"])
        address = parse_broker(match["address"]) if match["address"] else None
        BrokerConfig(faults=frozenset(faults))
    except (ValueError, ProfileError) as error:
        raise CampaignError(f"--broker {spec!r}: {error}") from None
    if address is None and match["profile"] != "reference":
        raise CampaignError(f"--broker {spec!r}: only the reference broker is started here; "
                            f"give {match['profile']}@HOST:PORT")
    if address is not None and not allow_remote and not is_loopback(address):
        raise CampaignError(f"--broker {spec!r}: {address.display} is not a loopback address "
                            "(malformed input can crash a broker); add --allow-remote to "
                            "fuzz a broker you own there")
    return Where(address, profile, match["profile"], faults, None, None, None, None)


def folder_name(spec: str, seed: int) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", spec) + f"-seed{seed}"


def fuzz_task(seed: int, broker: str, budget: float, settings: TaskSettings) -> TaskResult:
    """One campaign of `budget` seconds against `broker` with `seed`: the finding records.
    Runs in an executor; never raises for a broker that cannot be fuzzed (the result says
    why), so one dead broker does not fail the other tasks."""
    from conformance.broker.child import ChildBrokerError
    from conformance.fuzz.network.campaign import Campaign, open_folder
    from conformance.fuzz.network.events import Settings
    from conformance.fuzz.network.finding_records import finding_record
    from conformance.fuzz.network.folder import CampaignDirError
    from conformance.fuzz.network.generators import generator
    from conformance.fuzz.network.oracle import Oracle, Unreachable
    from conformance.fuzz.network.where import Where
    from conformance.report.scrub import Scrubber
    from conformance.spec.grammar import VERSIONS

    began = time.monotonic()
    result = TaskResult(seed, broker)
    try:
        where = _where(broker, allow_remote=settings.allow_remote)
        assert isinstance(where, Where)
        versions = tuple(v for v in VERSIONS if v in where.profile.versions)
        gen = generator("grammar", versions)
        folder, state, resumed = open_folder(
            Path(settings.root) / folder_name(broker, seed), seed=seed, broker=where.info,
            generator=gen.name, versions=versions, tool_version=_version())
    except (CampaignError, CampaignDirError, ValueError, OSError) as error:
        result.error = str(error)
        return result

    async def run() -> None:
        async with where.target(versions) as target:
            oracle = Oracle(target)
            campaign = Campaign(oracle=oracle, generator=gen, folder=folder, state=state,
                                settings=Settings(budget=budget, jobs=settings.jobs,
                                                  minimise=settings.minimise),
                                resumed=resumed, passcode=where.secret)
            found = await campaign.run()
            server = None if oracle.server is None else Scrubber(where.secret).text(
                oracle.server)
            result.inputs = campaign.stats.inputs
            result.records = [json.dumps(finding_record(
                f, path=str(folder.finding_path(f.id)), server=server), ensure_ascii=True)
                for f in found]

    try:
        asyncio.run(run())
    except (Unreachable, ChildBrokerError) as error:
        result.error = f"cannot fuzz {broker}: {error}"
    except OSError as error:
        result.error = f"{broker}: {error.strerror or error}"
    finally:
        folder.unlock()
    result.seconds = round(time.monotonic() - began, 3)
    return result


def _version() -> str:
    from conformance import __version__
    return __version__


def run_campaign(spark: SparkSession, *, brokers: Sequence[str], seeds: Sequence[int],
                 budget: float, settings: TaskSettings, task: FuzzTask = fuzz_task
                 ) -> list[TaskResult]:
    """Every (seed, broker) as one Spark task; the results in (broker, seed) order."""
    work = [(seed, broker) for broker in brokers for seed in seeds]
    rdd = spark.sparkContext.parallelize(work, numSlices=len(work))
    results = rdd.map(lambda job: task(job[0], job[1], budget, settings)).collect()
    return sorted(results, key=lambda r: (r.broker, r.seed))


def write_findings(results: Sequence[TaskResult], folder: Path, campaign: str) -> Path:
    """The campaign's finding records as one JSON Lines file: findings-CAMPAIGN.jsonl."""
    lines = [line + "\n" for result in results for line in result.records]
    path = folder / f"findings-{campaign}.jsonl"
    write_atomic(path, "".join(lines).encode("ascii"))
    return path
