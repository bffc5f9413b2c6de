"""The pipeline's jobs at scale: Spark in local mode against pyarrow in one process.

Generates synthetic case-result records (1M and 10M by default; pyarrow writes them as the
staged Parquet the jobs read), then times the matrix, regressions and flaky jobs, each
computed and written as partitioned Parquet, with Spark on local[2] (a child process: one
JVM per measurement) and the same aggregations with pyarrow in this process, the
single-machine reference. Row counts of both must agree. Also measures Spark's start:
PySpark's defaults, this project's quiet fast start, and the same from a class-data-sharing
archive, each in fresh processes (median of --starts), wall time and the JVM's CPU time.

    .venv/bin/python benchmarks/pipeline.py                 # 1M and 10M
    .venv/bin/python benchmarks/pipeline.py --sizes 200000  # a quick look

Needs the `pipeline` extra and a Java 17. Uses --work (default /tmp/stomp-pipeline-bench)
and removes it at the end unless --keep."""

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


def arrow_matrix(table: pa.Table, out: Path) -> int:
    flat = pc.list_flatten(table["statements"])
    parents = pc.list_parent_indices(table["statements"])
    cols = table.select(["broker", "broker_version", "build", "run_id", "version", "outcome",
                         "timestamp"]).take(parents).append_column("statement", flat)
    keys = ["broker", "broker_version", "build", "run_id", "statement", "version"]
    by_run = _indicators(cols).group_by(keys).aggregate(
        [("timestamp", "min"), ("outcome", "count")]
        + [(count_name(o), "sum") for o in SEVERITY])
    by_run = by_run.rename_columns([c.removesuffix("_sum") for c in by_run.column_names])
    by_version = by_run.group_by(["broker", "broker_version", "statement", "version"]).aggregate(
        [("run_id", "count"), ("outcome_count", "sum"), ("timestamp_min", "min"),
         ("timestamp_min", "max")] + [(count_name(o), "sum") for o in SEVERITY])
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
    return timings


# -- Spark, in a child process -------------------------------------------------------------

def _jvm_cpu(spark: Any) -> float:
    pid = spark.sparkContext._gateway.proc.pid
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def spark_worker(data: Path, out: Path, fast_jvm: bool, memory: str) -> dict[str, Any]:
    from pyspark.sql import DataFrame

    from conformance.pipeline import jobs
    from conformance.pipeline.spark import SparkSettings, start, stop

    started = start(SparkSettings(master="local[2]", fast_jvm=fast_jvm, driver_memory=memory,
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
    timings["rows"] = {
        "matrix": sum(spark.read.parquet(str(out / "matrix" / n)).count()
                      for n in ("by_run", "by_version")),
        "regressions": spark.read.parquet(str(out / "regressions")).count(),
        "flaky": spark.read.parquet(str(out / "flaky")).count()}
    stop(started)
    return timings


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
    spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
    first_job = time.perf_counter() - began
    return {"session": session, "first_job": first_job, "jvm_cpu_session": cpu_session,
            "jvm_cpu_total": _jvm_cpu(spark)}


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
    stop(start(SparkSettings(master="local[2]", cds=True, cache_dir=cache)))  # writes it
    cpu1 = os.times()
    jvm = (cpu1.children_user + cpu1.children_system
           - cpu0.children_user - cpu0.children_system)
    print(f"making the class-data archive (a start, a stop): "
          f"{time.perf_counter() - began:.1f} s wall, {jvm:.1f} JVM CPU s")
    samples: dict[str, list[dict[str, float]]] = {m: [] for m in ("default", "tuned", "cds")}
    for _ in range(repeats):
        for mode in samples:  # interleaved: the machine's load drifts
            samples[mode].append(_child("--start-worker", mode, str(cache)))
    print(f"\nSpark start on local[2], median of {repeats} fresh processes "
          "(session = getOrCreate; first job = a tiny groupBy):")
    print(f"{'':28}{'session s':>10}{'first job s':>12}{'JVM CPU s at ready':>20}"
          f"{'JVM CPU s after job':>21}")
    labels = {"default": "PySpark defaults", "tuned": "quiet + fast JVM flags",
              "cds": "quiet + fast JVM + CDS"}
    for mode, runs in samples.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{labels[mode]:28}{med['session']:>10.2f}{med['first_job']:>12.2f}"
              f"{med['jvm_cpu_session']:>20.2f}{med['jvm_cpu_total']:>21.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--work", type=Path, default=Path("/tmp/stomp-pipeline-bench"))
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--starts", type=int, default=3,
                        help="start measurements per mode (0: none)")
    parser.add_argument("--jit", choices=["full", "fast", "both"], default="full",
                        help="Spark's JIT for the jobs: full (both tiers: long jobs), fast "
                             "(the first tier only, the pipeline's default for quick "
                             "starts) or both (default full)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--spark-worker", nargs=4, metavar=("DATA", "OUT", "FAST", "MEM"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--start-worker", nargs=2, metavar=("MODE", "CACHE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.spark_worker:
        data, out, fast, memory = args.spark_worker
        print(json.dumps(spark_worker(Path(data), Path(out), fast == "1", memory)))
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
            data = work / f"records-{size}"
            made = generate(size, data)
            megabytes = sum(p.stat().st_size for p in data.glob("*.parquet")) / 1e6
            print(f"\n{size:,} records ({size // CASES_PER_RUN:,} runs of {CASES_PER_RUN} "
                  f"cases, {BROKERS} brokers): generated in {made:.1f} s, "
                  f"{megabytes:.0f} MB Parquet")
            arrow = run_arrow(data, work / "arrow")
            shutil.rmtree(work / "arrow", ignore_errors=True)
            peers = {}
            for jit in (("full", "fast") if args.jit == "both" else (args.jit,)):
                peers[f"spark, {jit} JIT"] = _child("--spark-worker", str(data),
                                                   str(work / "spark"),
                                                   "1" if jit == "fast" else "0",
                                                   args.driver_memory)
            shutil.rmtree(work / "spark", ignore_errors=True)
            print(f"{'job':14}{'pyarrow s':>11}" + "".join(f"{p + ' s':>18}" for p in peers)
                  + f"{'spark/pyarrow':>15}{'rows (both)':>14}   (spark on local[2])")
            for job in ("matrix", "regressions", "flaky"):
                spark = next(iter(peers.values()))
                if spark["rows"][job] != arrow["rows"][job]:
                    raise SystemExit(f"{job}: spark wrote {spark['rows'][job]} rows, pyarrow "
                                     f"{arrow['rows'][job]}")
                print(f"{job:14}{arrow[job]:>11.2f}"
                      + "".join(f"{p[job]:>18.2f}" for p in peers.values())
                      + f"{spark[job] / arrow[job]:>14.1f}x{arrow['rows'][job]:>14,}")
            total_a = sum(arrow[j] for j in ("matrix", "regressions", "flaky"))
            first = next(iter(peers.values()))
            total_s = sum(first[j] for j in ("matrix", "regressions", "flaky"))
            print(f"{'all three':14}{total_a:>11.2f}{total_s:>18.2f}"
                  f"{total_s / total_a:>{14 + 18 * (len(peers) - 1)}.1f}x   (pyarrow read: "
                  f"{arrow['read']:.2f} s; spark start {first['start']:.1f} s, "
                  f"JVM CPU {first['jvm_cpu']:.0f} s)")
            shutil.rmtree(data, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
