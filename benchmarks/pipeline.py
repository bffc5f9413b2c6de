"""The pipeline's jobs at scale: Spark in local mode against pyarrow in one process.

Generates synthetic case-result records (1M and 10M by default; pyarrow writes them as the
staged Parquet the jobs read), then times the matrix, regressions and flaky jobs, each
computed and written as partitioned Parquet, with Spark on local[2] and on local[1] (child
processes: one JVM per measurement) and the same aggregations with pyarrow in this process,
the single-machine reference. Row counts of all must agree. Prints Spark's ratio to pyarrow
and local[1]'s to local[2] (the scaling from one core to two), and the Parquet writers alone
(by_run as written, read back and written again: Spark's time less its read alone, the
floor of the matrix job's time). Measures apart the ingestion the jobs' input comes from:
the same records as JSON Lines read with their schema, checked and staged as Parquet, as
`pipeline` does. Also measures Spark's start: PySpark's defaults,
this project's quiet fast start, and the same from a class-data-sharing archive (made, as
a first `pipeline --cds` run makes it, by a session that ran a job), each in fresh
processes (median of --starts), wall time and the JVM's CPU time. With --rounds N, pyarrow
and Spark take turns N times and each ratio is the median of the rounds' (a machine's load
drifts by more than the changes measured).

    .venv/bin/python benchmarks/pipeline.py                 # 1M and 10M
    .venv/bin/python benchmarks/pipeline.py --sizes 200000  # a quick look

Needs the `pipeline` extra and a Java 17. Uses --work (default /tmp/stomp-pipeline-bench;
10M records need about 5 GB there, the JSON Lines most of it) and removes it at the end
unless --keep."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.pipeline.jobs import BAD, NOT_RUN, SEVERITY, count_name  # noqa: E402

CASES_PER_RUN = 250
BROKERS = 5
BUILDS = 4
STATEMENTS = 120
CHUNK = 1_000_000
BASE_MS = 1_700_000_000_000


# -- synthetic records ---------------------------------------------------------------------

def _chunk(start: int, size: int, runs: int) -> pa.Table:
    """Records start..start+size: run = i // CASES_PER_RUN on broker run % BROKERS, its
    build rising with time; a few cases flaky, a few failing on one broker, some skipped."""
    i = pa.array(range(start, start + size), pa.int64())
    run = pc.divide(i, CASES_PER_RUN)
    case = pc.subtract(i, pc.multiply(run, CASES_PER_RUN))
    broker = pc.subtract(run, pc.multiply(pc.divide(run, BROKERS), BROKERS))
    build = pc.min_element_wise(pc.divide(pc.multiply(run, BUILDS), max(runs, 1)), BUILDS - 1)
    names = pa.array([f"b{b}" for b in range(BROKERS)])
    broker_name = pc.take(names, broker)
    version = pc.take(pa.array(["1.0", "1.1", "1.2"]),
                      pc.subtract(case, pc.multiply(pc.divide(case, 3), 3)))
    statements = pa.array([[f"s.{(c * 7 + k) % STATEMENTS}" for k in range(1 + c % 3)]
                           for c in range(CASES_PER_RUN)], pa.list_(pa.string()))
    roll = pc.random(size)
    flaky_case = pc.equal(pc.subtract(case, pc.multiply(pc.divide(case, 25), 25)), 0)
    broken = pc.equal(pc.subtract(case, pc.multiply(pc.divide(case, 37), 37)), broker)
    skipped = pc.equal(pc.subtract(case, pc.multiply(pc.divide(case, 40), 40)), 1)
    outcome = pc.if_else(skipped, "skipped", pc.if_else(
        broken, "failed", pc.if_else(
            pc.and_(flaky_case, pc.less(roll, 0.2)), "failed",
            pc.if_else(pc.less(roll, 0.001), "error", "passed"))))
    stamp = pc.cast(pc.add(pc.multiply(run, 600_000), BASE_MS), pa.int64())
    server = pc.binary_join_element_wise(
        pc.take(pa.array([f"Broker{b}" for b in range(BROKERS)]), broker),
        pc.binary_join_element_wise("1.", pc.cast(build, pa.string()), ""), "/")
    return pa.table({
        "schema_version": pa.repeat(pa.scalar(1, pa.int64()), size),
        "kind": pa.repeat(pa.scalar("case_result"), size),
        "timestamp": pc.cast(pc.cast(stamp, pa.timestamp("ms", tz="UTC")),
                             pa.timestamp("us", tz="UTC")),
        "tool_version": pa.repeat(pa.scalar("0.1.0"), size),
        "broker_id": pc.binary_join_element_wise(broker_name, "127.0.0.1:61613", "@"),
        "broker_server": server,
        "run_id": pc.binary_join_element_wise("run", pc.cast(run, pa.string()), "-"),
        "case_id": pc.binary_join_element_wise("case", pc.cast(case, pa.string()), "-"),
        "version": version,
        "statements": pc.take(statements, case),
        "area": pa.repeat(pa.scalar("area"), size),
        "level": pa.repeat(pa.scalar("must"), size),
        "outcome": outcome,
        "duration_ms": pc.multiply(roll, 50.0),
        "message": pa.repeat(pa.scalar(""), size),
    })


def generate(count: int, folder: Path) -> float:
    began = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    runs = -(-count // CASES_PER_RUN)
    for n, start in enumerate(range(0, count, CHUNK)):
        table = _chunk(start, min(CHUNK, count - start), runs)
        pq.write_table(table, folder / f"part-{n:05d}.parquet", row_group_size=256 * 1024)
    return time.perf_counter() - began


# -- pyarrow, one process ------------------------------------------------------------------

def _derived(table: pa.Table) -> pa.Table:
    broker = pc.replace_substring_regex(table["broker_id"], "@.*$", "")
    build = pc.coalesce(table["broker_server"], table["broker_id"])
    found = pc.extract_regex(table["broker_server"], r"^[^/\s]+/(?P<v>\S+)")
    version = pc.coalesce(pc.struct_field(found, [0]), pa.scalar("unknown"))
    return (table.append_column("broker", broker).append_column("build", build)
            .append_column("broker_version", version))


def _indicators(table: pa.Table) -> pa.Table:
    for outcome in SEVERITY:
        table = table.append_column(count_name(outcome),
                                    pc.cast(pc.equal(table["outcome"], outcome), pa.int64()))
    return table


def _write(table: pa.Table, folder: Path, partition: str = "broker") -> int:
    shutil.rmtree(folder, ignore_errors=True)
    pq.write_to_dataset(table, folder, partition_cols=[partition])
    return table.num_rows


def _graded(table: pa.Table) -> pa.Table:
    """The aggregates' columns without their "_sum" suffix, with status (the worst outcome
    counted) and pass_rate from the counts, as the job has them."""
    table = table.rename_columns([c.removesuffix("_sum") for c in table.column_names])
    status = pa.nulls(table.num_rows, pa.string())
    for outcome in reversed(SEVERITY):
        status = pc.if_else(pc.greater(table[count_name(outcome)], 0), outcome, status)
    decided = pc.cast(pc.add(pc.add(table["passed"], table["failed"]), table["error"]),
                      pa.float64())
    rate = pc.if_else(pc.greater(decided, 0),
                      pc.round(pc.divide(pc.cast(table["passed"], pa.float64()), decided), 6),
                      pa.scalar(None, pa.float64()))
    return table.append_column("status", status).append_column("pass_rate", rate)


def arrow_matrix(table: pa.Table, out: Path) -> int:
    flat = pc.list_flatten(table["statements"])
    parents = pc.list_parent_indices(table["statements"])
    cols = table.select(["broker", "broker_version", "build", "run_id", "version", "outcome",
                         "timestamp"]).take(parents).append_column("statement", flat)
    keys = ["broker", "broker_version", "build", "run_id", "statement", "version"]
    by_run = _indicators(cols).group_by(keys).aggregate(
        [("timestamp", "min"), ("outcome", "count")]
        + [(count_name(o), "sum") for o in SEVERITY])
    by_run = _graded(by_run)
    failing = pc.cast(pc.greater(pc.add(by_run["failed"], by_run["error"]), 0), pa.int64())
    by_version = by_run.append_column("failing", failing).group_by(
        ["broker", "broker_version", "statement", "version"]).aggregate(
        [("run_id", "count"), ("outcome_count", "sum"), ("failing", "sum"),
         ("timestamp_min", "min"), ("timestamp_min", "max")]
        + [(count_name(o), "sum") for o in SEVERITY])
    by_version = _graded(by_version)
    return _write(by_run, out / "by_run") + _write(by_version, out / "by_version")


def arrow_regressions(table: pa.Table, out: Path) -> int:
    rank = pc.index_in(table["outcome"], value_set=pa.array(SEVERITY))
    per_case = (table.select(["broker", "run_id", "case_id", "version"])
                .append_column("rank", rank)
                .group_by(["broker", "run_id", "case_id", "version"])
                .aggregate([("rank", "min")]))
    runs = (table.group_by(["broker", "run_id"]).aggregate([("timestamp", "min"),
                                                            ("build", "max")])
            .sort_by([("broker", "ascending"), ("timestamp_min", "ascending"),
                      ("run_id", "ascending")]))
    shifted = {name: pa.concat_arrays([pa.nulls(1, runs[name].type),
                                       runs[name].combine_chunks()[:-1]])
               for name in ("broker", "run_id")}
    same = pc.equal(runs["broker"], shifted["broker"])
    runs = runs.append_column("previous_run_id",
                              pc.if_else(same, shifted["run_id"], pa.scalar(None, pa.string())))
    runs = runs.filter(pc.is_valid(runs["previous_run_id"]))
    before = per_case.rename_columns(["broker", "previous_run_id", "case_id", "version",
                                      "previous_rank"])
    joined = (per_case.join(runs.select(["broker", "run_id", "previous_run_id"]),
                            ["broker", "run_id"])
              .join(before, ["broker", "previous_run_id", "case_id", "version"]))
    passed = SEVERITY.index("passed")
    bad = pa.array([SEVERITY.index(o) for o in BAD], pa.int32())
    now, then = joined["rank_min"], joined["previous_rank"]
    regressed = pc.and_(pc.equal(then, passed), pc.is_in(now, value_set=bad))
    fixed = pc.and_(pc.is_in(then, value_set=bad), pc.equal(now, passed))
    changed = joined.filter(pc.or_(regressed, fixed))
    return _write(changed, out)


def arrow_flaky(table: pa.Table, out: Path) -> int:
    ran = table.filter(pc.invert(pc.is_in(table["outcome"], value_set=pa.array(NOT_RUN))))
    counts = [count_name(o) for o in SEVERITY if o not in NOT_RUN]
    grouped = (_indicators(ran).group_by(["broker", "build", "broker_version", "case_id",
                                          "version"])
               .aggregate([("outcome", "count"), ("outcome", "count_distinct"),
                           ("timestamp", "min"), ("timestamp", "max")]
                          + [(c, "sum") for c in counts]))
    flaky = grouped.filter(pc.greater(grouped["outcome_count_distinct"], 1))
    commonest = pc.max_element_wise(*[flaky[f"{c}_sum"] for c in counts])
    rate = pc.subtract(1.0, pc.divide(pc.cast(commonest, pa.float64()),
                                      pc.cast(flaky["outcome_count"], pa.float64())))
    return _write(flaky.append_column("flake_rate", rate), out)


def arrow_rewrite(written: Path, out: Path) -> tuple[float, int]:
    """The writer alone: a table as written, read back, then written again (timed)."""
    table = pq.read_table(written)
    began = time.perf_counter()
    rows = _write(table, out)
    return time.perf_counter() - began, rows


def run_arrow(data: Path, out: Path) -> dict[str, Any]:
    columns = ["timestamp", "broker_id", "broker_server", "run_id", "case_id", "version",
               "statements", "outcome"]
    timings: dict[str, Any] = {}
    began = time.perf_counter()
    table = _derived(pq.read_table(data, columns=columns))
    timings["read"] = time.perf_counter() - began
    rows: dict[str, int] = {}
    jobs: dict[str, Callable[[pa.Table, Path], int]] = {
        "matrix": arrow_matrix, "regressions": arrow_regressions, "flaky": arrow_flaky}
    for name, job in jobs.items():
        began = time.perf_counter()
        rows[name] = job(table, out / name)
        timings[name] = time.perf_counter() - began
    timings["rows"] = rows
    timings["rewrite"], timings["rewrite_rows"] = arrow_rewrite(out / "matrix" / "by_run",
                                                                out / "rewrite")
    return timings


# -- Spark, in a child process -------------------------------------------------------------

def _jvm_cpu(spark: Any) -> float:
    pid = spark.sparkContext._gateway.proc.pid
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def spark_worker(data: Path, out: Path, master: str, fast_jvm: bool, memory: str
                 ) -> dict[str, Any]:
    from pyspark.sql import DataFrame

    from conformance.pipeline import jobs
    from conformance.pipeline.spark import SparkSettings, start, stop

    started = start(SparkSettings(master=master, fast_jvm=fast_jvm, driver_memory=memory,
                                  cache_dir=out / "cache"))
    spark = started.spark
    cases = jobs.cases(spark.read.parquet(str(data)))

    def write(frame: DataFrame, where: Path) -> None:
        frame.write.mode("overwrite").partitionBy("broker").parquet(str(where))

    def matrix() -> None:  # as the pipeline does: by_version from by_run as written
        by_run = jobs.matrix_by_run(cases)
        write(by_run, out / "matrix" / "by_run")
        write(jobs.matrix_by_version(spark.read.schema(by_run.schema).parquet(
            str(out / "matrix" / "by_run"))), out / "matrix" / "by_version")

    work: dict[str, Callable[[], None]] = {
        "matrix": matrix,
        "regressions": lambda: write(jobs.regressions(cases), out / "regressions"),
        "flaky": lambda: write(jobs.flaky(cases), out / "flaky"),
    }
    timings: dict[str, Any] = {"start": started.seconds}
    for name, job in work.items():
        began = time.perf_counter()
        job()
        timings[name] = time.perf_counter() - began
    timings["jvm_cpu"] = _jvm_cpu(spark)
    # the writer alone: by_run as written, read and written again, less reading it alone
    written = spark.read.parquet(str(out / "matrix" / "by_run"))
    began = time.perf_counter()
    written.write.format("noop").mode("overwrite").save()
    read = time.perf_counter() - began
    began = time.perf_counter()
    write(written, out / "rewrite")
    timings["rewrite"] = time.perf_counter() - began - read
    timings["rows"] = {
        "matrix": sum(spark.read.parquet(str(out / "matrix" / n)).count()
                      for n in ("by_run", "by_version")),
        "regressions": spark.read.parquet(str(out / "regressions")).count(),
        "flaky": spark.read.parquet(str(out / "flaky")).count()}
    stop(started)
    return timings


def ingest_worker(data: Path, out: Path, fast_jvm: bool, memory: str) -> dict[str, Any]:
    """The records as JSON Lines (written first, not timed), then staged as `pipeline`
    stages its input: read with the schema, each record checked, written as Parquet, the
    bad ones counted, the good ones counted."""
    from conformance.pipeline.load import stage
    from conformance.pipeline.schemas import TIMESTAMP_FORMAT
    from conformance.pipeline.spark import SparkSettings, start, stop

    started = start(SparkSettings(master="local[2]", fast_jvm=fast_jvm, driver_memory=memory,
                                  cache_dir=out / "cache"))
    spark = started.spark
    (spark.read.parquet(str(data)).write.mode("overwrite")
     .option("timestampFormat", TIMESTAMP_FORMAT).json(str(out / "json")))
    files = sorted((out / "json").glob("part-*.json"))
    cpu = _jvm_cpu(spark)
    began = time.perf_counter()
    staged = stage(spark, files, "case_result", out / "staged")
    records, bad = staged.good, staged.bad
    seconds = time.perf_counter() - began
    result = {"seconds": seconds, "records": records, "bad": bad,
              "json_mb": sum(f.stat().st_size for f in files) / 1e6,
              "jvm_cpu": _jvm_cpu(spark) - cpu}
    stop(started)
    return result


def start_worker(mode: str, cache: Path) -> dict[str, float]:
    """One Spark start: `default` (PySpark's builder, local[2], nothing else), `tuned`
    (this project's session, no archive) or `cds` (tuned, from the archive)."""
    began = time.perf_counter()
    if mode == "default":
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.master("local[2]").getOrCreate()
        session = time.perf_counter() - began
    else:
        from conformance.pipeline.spark import SparkSettings, start
        started = start(SparkSettings(master="local[2]", cds=mode == "cds", cache_dir=cache))
        spark, session = started.spark, started.seconds
    cpu_session = _jvm_cpu(spark)
    began = time.perf_counter()
    _first_job(spark)
    first_job = time.perf_counter() - began
    return {"session": session, "first_job": first_job, "jvm_cpu_session": cpu_session,
            "jvm_cpu_total": _jvm_cpu(spark)}


def _first_job(spark: Any) -> None:
    spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()


def _child(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure_starts(work: Path, repeats: int) -> None:
    cache = work / "start-cache"
    from conformance.pipeline.spark import SparkSettings, start, stop
    began = time.perf_counter()
    cpu0 = os.times()
    started = start(SparkSettings(master="local[2]", cds=True, cache_dir=cache))
    _first_job(started.spark)
    stop(started)  # writes the archive
    cpu1 = os.times()
    jvm = (cpu1.children_user + cpu1.children_system
           - cpu0.children_user - cpu0.children_system)
    print(f"making the class-data archive (a start, a first job, a stop): "
          f"{time.perf_counter() - began:.1f} s wall, {jvm:.1f} JVM CPU s")
    samples: dict[str, list[dict[str, float]]] = {m: [] for m in ("default", "tuned", "cds")}
    for _ in range(repeats):
        for mode in samples:  # interleaved: the machine's load drifts
            samples[mode].append(_child("--start-worker", mode, str(cache)))
    print(f"\nSpark start on local[2], median of {repeats} fresh processes "
          "(session = getOrCreate; first job = a tiny groupBy):")
    print(f"{'':28}{'session s':>10}{'first job s':>12}{'start to job s':>15}"
          f"{'JVM CPU s at ready':>20}{'JVM CPU s after job':>21}")
    labels = {"default": "PySpark defaults", "tuned": "quiet + fast JVM flags",
              "cds": "quiet + fast JVM + CDS"}
    for mode, runs in samples.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        both = statistics.median(r["session"] + r["first_job"] for r in runs)
        print(f"{labels[mode]:28}{med['session']:>10.2f}{med['first_job']:>12.2f}"
              f"{both:>15.2f}{med['jvm_cpu_session']:>20.2f}{med['jvm_cpu_total']:>21.2f}")


JOBS = ("matrix", "regressions", "flaky")


def measure_size(size: int, work: Path, args: argparse.Namespace) -> None:
    data = work / f"records-{size}"
    made = generate(size, data)
    megabytes = sum(p.stat().st_size for p in data.glob("*.parquet")) / 1e6
    print(f"\n{size:,} records ({size // CASES_PER_RUN:,} runs of {CASES_PER_RUN} "
          f"cases, {BROKERS} brokers): generated in {made:.1f} s, {megabytes:.0f} MB Parquet")
    masters = ("local[2]", "local[1]") if args.scaling else ("local[2]",)
    fast = "1" if args.jit == "fast" else "0"
    # rounds of pyarrow then each Spark master: a ratio is taken within a round (the same
    # minutes of a machine whose load drifts), and the median of the rounds' is printed
    arrows: list[dict[str, Any]] = []
    sparks: dict[str, list[dict[str, Any]]] = {master: [] for master in masters}
    for _ in range(args.rounds):
        arrows.append(run_arrow(data, work / "arrow"))
        shutil.rmtree(work / "arrow", ignore_errors=True)
        for master in masters:
            sparks[master].append(_child("--spark-worker", str(data), str(work / "spark"),
                                         master, fast, args.driver_memory))
            shutil.rmtree(work / "spark", ignore_errors=True)
    for master, peers in sparks.items():
        for arrow, peer in zip(arrows, peers, strict=True):
            for job in JOBS:
                if peer["rows"][job] != arrow["rows"][job]:
                    raise SystemExit(f"{job}: spark {master} wrote {peer['rows'][job]} rows, "
                                     f"pyarrow {arrow['rows'][job]}")
    for result in (*arrows, *(r for peers in sparks.values() for r in peers)):
        result["all three"] = sum(result[j] for j in JOBS)
    two, one = sparks["local[2]"], sparks.get("local[1]")
    rounds = f"median of {args.rounds} rounds; ratios within a round" if args.rounds > 1 else ""
    w = 24 if args.rounds > 1 else 15  # a ratio's column, its spread beside it
    print(f"{'job':14}{'pyarrow s':>11}{'spark local[2] s':>18}{'spark/pyarrow':>{w}}"
          + (f"{'spark local[1] s':>18}{'local[1]/[2]':>{w}}" if one else "")
          + f"{'rows (all)':>14}   ({args.jit} JIT{'; ' + rounds if rounds else ''})")

    def median(runs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    def ratio(tops: list[dict[str, Any]], bottoms: list[dict[str, Any]], key: str) -> str:
        each = sorted(t[key] / b[key] for t, b in zip(tops, bottoms, strict=True))
        spread = f" ({each[0]:.2f}-{each[-1]:.2f})" if len(each) > 1 else ""
        return f"{statistics.median(each):.2f}x{spread}"

    for job in (*JOBS, "all three"):
        rows = f"{arrows[0]['rows'][job]:,}" if job in JOBS else ""
        print(f"{job:14}{median(arrows, job):>11.2f}{median(two, job):>18.2f}"
              f"{ratio(two, arrows, job):>{w}}"
              + (f"{median(one, job):>18.2f}{ratio(one, two, job):>{w}}" if one else "")
              + f"{rows:>14}")
    print(f"(pyarrow read: {median(arrows, 'read'):.2f} s, not in its times; spark start: "
          + ", ".join(f"{m} {median(p, 'start'):.1f} s" for m, p in sparks.items())
          + "; JVM CPU, start and jobs: "
          + ", ".join(f"{m} {median(p, 'jvm_cpu'):.0f} s" for m, p in sparks.items()) + ")")
    print(f"the writer alone, by_run's {arrows[0]['rewrite_rows']:,} rows written again: "
          f"pyarrow {median(arrows, 'rewrite'):.2f} s, "
          + ", ".join(f"spark {m} {median(p, 'rewrite'):.2f} s ({ratio(p, arrows, 'rewrite')})"
                      for m, p in sparks.items()))
    if args.ingest:
        ingest = _child("--ingest-worker", str(data), str(work / "ingest"), fast,
                        args.driver_memory)
        shutil.rmtree(work / "ingest", ignore_errors=True)
        if ingest["records"] != size or ingest["bad"]:
            raise SystemExit(f"ingestion staged {ingest['records']} records of {size}, "
                             f"{ingest['bad']} bad")
        print(f"ingestion, JSON Lines to staged Parquet (spark local[2]): "
              f"{ingest['json_mb']:,.0f} MB of JSON in {ingest['seconds']:.1f} s, "
              f"{size / ingest['seconds']:,.0f} records/s, JVM CPU {ingest['jvm_cpu']:.0f} s")
    shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--work", type=Path, default=Path("/tmp/stomp-pipeline-bench"))
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--starts", type=int, default=3,
                        help="start measurements per mode (0: none)")
    parser.add_argument("--jit", choices=["full", "fast"], default="full",
                        help="Spark's JIT for the jobs: full (both tiers, the second for "
                             "long-running code: long jobs; default) or fast (the first tier "
                             "only, the pipeline's default for quick starts)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds of pyarrow then Spark per size; with more than one, the "
                             "medians and the spread of the ratios (default: 1)")
    parser.add_argument("--scaling", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the jobs on local[1] (default: yes)")
    parser.add_argument("--ingest", action=argparse.BooleanOptionalAction, default=True,
                        help="also measure the ingestion of JSON Lines (default: yes)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--spark-worker", nargs=5,
                        metavar=("DATA", "OUT", "MASTER", "FAST", "MEM"), help=argparse.SUPPRESS)
    parser.add_argument("--ingest-worker", nargs=4, metavar=("DATA", "OUT", "FAST", "MEM"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--start-worker", nargs=2, metavar=("MODE", "CACHE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.spark_worker:
        data, out, master, fast, memory = args.spark_worker
        print(json.dumps(spark_worker(Path(data), Path(out), master, fast == "1", memory)))
        return
    if args.ingest_worker:
        data, out, fast, memory = args.ingest_worker
        print(json.dumps(ingest_worker(Path(data), Path(out), fast == "1", memory)))
        return
    if args.start_worker:
        print(json.dumps(start_worker(args.start_worker[0], Path(args.start_worker[1]))))
        return
    work: Path = args.work
    shutil.rmtree(work, ignore_errors=True)
    try:
        if args.starts > 0:
            measure_starts(work, args.starts)
        for size in args.sizes:
            measure_size(size, work, args)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
