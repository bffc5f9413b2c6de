"""`stomp-conformance pipeline JOB`: the Spark jobs over record files, and the distributed
fuzz campaign. Importing this module does not import Spark: `stomp-conformance --help`
works without PySpark, and a pipeline verb without it says how to install it.

Exit codes: 0 done; 1 (fuzz) a finding graded failed; 2 bad flags or bad input (one
line); 3 Spark could not start or a job failed (one line; Spark's own log is named)."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from conformance.cli.arguments import positive
from conformance.cli.exits import Exit, say
from conformance.cli.options import Verbs
from conformance.pipeline import JOBS
from conformance.report.console import make_console
from conformance.report.history import PAGE

if TYPE_CHECKING:
    from conformance.pipeline.spark import SparkSettings, Started

INSTALL = "pip install 'stomp-conformance[pipeline]'"
_DESCRIPTIONS = {
    "matrix": "broker x statement x STOMP version: outcome counts and status per run and "
              "per broker version",
    "regressions": "case runs that turned from passed to failed (or back) since the "
                   "broker's previous run, and the statements they cover",
    "flaky": "cases with mixed outcomes on one broker build",
    "buckets": "fuzz findings grouped into distinct bugs by their signature: the rule "
               "broken and the broker's response class",
    "trends": "conformance over time: one point per run, and per day",
}


def _conf(value: str) -> tuple[str, str]:
    key, equals, setting = value.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {value!r}")
    return key.strip(), setting


def _spark_flags(verb: argparse.ArgumentParser) -> None:
    spark = verb.add_argument_group("Spark")
    spark.add_argument("--master", default="local[*]", metavar="URL",
                       help="local[N], local[*] (default) or a cluster: spark://HOST:PORT, "
                            "yarn, k8s://...")
    spark.add_argument("--driver-memory", metavar="SIZE", help="the driver's heap, e.g. 4g")
    spark.add_argument("--shuffle-partitions", type=positive, metavar="N",
                       help="default: twice the cores in local mode, the cluster's otherwise")
    spark.add_argument("--conf", type=_conf, action="append", default=[], metavar="KEY=VALUE",
                       help="any Spark setting (repeatable)")
    spark.add_argument("--full-jit", action="store_true",
                       help="let the driver's JIT use both tiers (local mode: slower to "
                            "start, faster on millions of records); default: the first tier "
                            "only")
    spark.add_argument("--cds", action="store_true",
                       help="start the driver's JVM from a class-data-sharing archive in "
                            "the user's cache; the first run with --cds makes it (about 45 "
                            "CPU-seconds, once), later ones start faster")


def add(verbs: Verbs) -> None:
    top = verbs.add_parser(
        "pipeline", help="Spark jobs over result and finding records",
        description="Spark jobs over the JSON Lines records of `run --results` and `fuzz "
                    "--results`, written as Parquet partitioned by broker, plus "
                    "report-data.json for the HTML report; and a fuzz campaign spread over "
                    "Spark's executors. Local mode unless --master names a cluster.")
    jobs = top.add_subparsers(dest="pipeline_job", metavar="JOB", required=True)
    for name in (*JOBS, "all"):
        text = _DESCRIPTIONS.get(name, "every job")
        job = jobs.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        job.add_argument("--input", nargs="+", action="extend", required=True, metavar="PATH",
                         help="folders (searched through) or files of records: "
                              "results-*.jsonl, findings*.jsonl")
        job.add_argument("--output", required=True, metavar="DIR",
                         help="where the Parquet tables and report-data.json go")
        job.add_argument("--skip-bad", action="store_true",
                         help="skip bad records (counted) instead of stopping")
        _spark_flags(job)
        job.set_defaults(run=_jobs_command, jobs=JOBS if name == "all" else (name,))

    fuzz = jobs.add_parser(
        "fuzz", help="a fuzz campaign over seeds x brokers on Spark's executors",
        description="Fuzz every broker with every seed, each pair a Spark task with its own "
                    "campaign folder (OUTPUT/campaigns; a second run resumes them), then "
                    "bucket the findings. Exit 1 when a finding is graded failed.")
    fuzz.add_argument("--broker", action="append", metavar="SPEC",
                      help="reference, reference+FAULT[,FAULT] (the reference broker, started "
                           "by each task) or PROFILE@HOST:PORT (repeatable; default reference)")
    fuzz.add_argument("--seeds", type=positive, default=2, metavar="N",
                      help="seeds per broker (default 2)")
    fuzz.add_argument("--first-seed", type=int, default=0, metavar="N",
                      help="the first seed (default 0): seeds N, N+1, ...")
    fuzz.add_argument("--time", default="60s", metavar="DURATION",
                      help="each task's budget: 90s, 10m, 1h (default 60s)")
    fuzz.add_argument("--jobs", type=positive, default=4,
                      help="inputs under way at once in each task (default 4)")
    fuzz.add_argument("--minimise", type=float, default=5.0, metavar="SECONDS",
                      help="seconds spent minimising each finding (default 5)")
    fuzz.add_argument("--allow-remote", action="store_true",
                      help="send fuzz input to brokers that are not on this machine")
    fuzz.add_argument("--output", required=True, metavar="DIR")
    _spark_flags(fuzz)
    fuzz.set_defaults(run=_fuzz_command)


def _settings(args: argparse.Namespace) -> SparkSettings:
    from conformance.pipeline.spark import SparkSettings

    return SparkSettings(master=args.master, driver_memory=args.driver_memory,
                         shuffle_partitions=args.shuffle_partitions, cds=args.cds,
                         fast_jvm=not args.full_jit,
                         conf=tuple(args.conf))


def _spark_ready() -> bool:
    try:
        importlib.import_module("pyspark")
        importlib.import_module("pyarrow")
    except ImportError as missing:
        say(f"the pipeline needs {missing.name or 'PySpark'}: {INSTALL}")
        return False
    return True


def _output(path: str) -> Path | None:
    out = Path(path)
    if out.exists() and not out.is_dir():
        say(f"--output {path}: not a folder")
        return None
    return out


def _start(args: argparse.Namespace, console: Console) -> Started | None:
    from conformance.pipeline.spark import SparkStartError, start

    settings = _settings(args)
    try:
        started = start(settings)
    except SparkStartError as error:
        say(str(error))
        return None
    archive = {"used": "class-data archive used", "writing": "writing a class-data archive "
               "for faster starts, once", "off": "no class-data archive"}[started.cds]
    console.print(Text(f"spark {settings.master}: started in {started.seconds:.1f} s "
                       f"({archive})", style="dim"))
    return started


def _failed(error: Exception, log: Path) -> Exit:
    from conformance.pipeline.spark import first_line

    say(f"the pipeline failed: {first_line(error)} (Spark's log: {log})")
    return Exit.HARNESS


def _jobs_command(args: argparse.Namespace) -> Exit:
    if not _spark_ready():
        return Exit.USAGE
    from conformance.pipeline.load import RecordsError, find_inputs
    from conformance.pipeline.runner import check, run_jobs
    from conformance.pipeline.spark import stop

    output = _output(args.output)
    if output is None:
        return Exit.USAGE
    try:
        inputs = find_inputs(args.input)
        check(inputs, args.jobs)
    except RecordsError as error:
        say(str(error))
        return Exit.USAGE
    console = make_console(stderr=True)
    started = _start(args, console)
    if started is None:
        return Exit.HARNESS
    try:
        outcome = run_jobs(started.spark, inputs, output, args.jobs, skip_bad=args.skip_bad,
                           progress=lambda text: console.print(Text(text, style="dim")))
    except RecordsError as error:
        say(str(error))
        return Exit.USAGE
    except Exception as error:  # Spark's errors come in many classes: one line for all
        return _failed(error, started.settings.log_file)
    finally:
        stop(started)
    out = Console(highlight=False, soft_wrap=True)
    for note in outcome.notes:
        out.print(Text(note, style="yellow"))
    records = ", ".join(f"{n} {kind}" for kind, n in sorted(outcome.records.items()))
    skipped = f"; {outcome.skipped_bad} bad skipped" if outcome.skipped_bad else ""
    out.print(f"records: {records}{skipped}")
    for name, path, rows in outcome.written:
        out.print(f"{name}: {rows} row{'' if rows == 1 else 's'} in {path}")
    if outcome.report_data is not None:
        out.print(f"report data: {outcome.report_data}, shown by "
                  f"{outcome.report_data.with_name(PAGE)}")
    return Exit.OK


def _fuzz_command(args: argparse.Namespace) -> Exit:
    if not _spark_ready():
        return Exit.USAGE
    from conformance.fuzz.network.where import UsageError, parse_duration
    from conformance.pipeline.distributed import (
        CampaignError,
        TaskSettings,
        check_broker,
        run_campaign,
        write_findings,
    )
    from conformance.pipeline.load import RecordsError, find_inputs
    from conformance.pipeline.runner import run_jobs
    from conformance.pipeline.spark import stop

    brokers = list(dict.fromkeys(args.broker or ["reference"]))
    output = _output(args.output)
    if output is None:
        return Exit.USAGE
    try:
        budget = parse_duration(args.time)
        for spec in brokers:
            check_broker(spec, allow_remote=args.allow_remote)
    except (UsageError, CampaignError) as error:
        say(str(error))
        return Exit.USAGE
    if args.minimise < 0:
        say("--minimise: expected seconds, 0 or more")
        return Exit.USAGE
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    console = make_console(stderr=True)
    started = _start(args, console)
    if started is None:
        return Exit.HARNESS
    settings = TaskSettings(root=str(output.resolve() / "campaigns"), jobs=args.jobs,
                            minimise=args.minimise, allow_remote=args.allow_remote)
    console.print(Text(f"fuzzing {len(brokers)} broker(s) x {len(seeds)} seed(s), "
                       f"{budget:g} s each", style="dim"))
    out = Console(highlight=False, soft_wrap=True)
    try:
        results = run_campaign(started.spark, brokers=brokers, seeds=seeds, budget=budget,
                               settings=settings)
        for r in results:
            text = (f"{r.broker} seed {r.seed}: {r.error}" if r.error else
                    f"{r.broker} seed {r.seed}: {len(r.records)} findings from {r.inputs} "
                    f"inputs in {r.seconds:.1f} s")
            out.print(Text(text, style="red" if r.error else ""))
        found = write_findings(results, output / "findings", "campaign")
        out.print(f"findings: {found}")
        outcome = None
        if any(r.records for r in results):
            outcome = run_jobs(started.spark, find_inputs([found]), output, ("buckets",),
                               progress=lambda text: console.print(Text(text, style="dim")))
    except RecordsError as error:
        say(str(error))
        return Exit.USAGE
    except OSError as error:
        say(f"cannot write the campaign's files: {error.strerror or error}")
        return Exit.USAGE
    except Exception as error:  # Spark's errors come in many classes: one line for all
        return _failed(error, started.settings.log_file)
    finally:
        stop(started)
    if outcome is not None:
        for name, path, rows in outcome.written:
            out.print(f"{name}: {rows} distinct bugs in {path}")
        if outcome.report_data is not None:
            out.print(f"report data: {outcome.report_data}, shown by "
                      f"{outcome.report_data.with_name(PAGE)}")
    if any(r.error for r in results):
        return Exit.HARNESS
    failed = any(json.loads(line).get("grade") == "failed" for r in results
                 for line in r.records)
    return Exit.FAILED if failed else Exit.OK
