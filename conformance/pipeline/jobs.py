"""The pipeline's questions, one function each, DataFrame in and DataFrame(s) out, nothing
written: `matrix`, `regressions`, `flaky`, `buckets`, `trends`. `cases` and `findings`
first derive the columns every job shares from the records.

Words: a broker is what the profile names (the part of broker_id before '@': the same
broker whatever port it listened on); a build is what its CONNECTED server header says
(`RabbitMQ/3.13.1`; the broker id when it sent none), and its version is the part after
the '/'. A run is one `run` of the suite (run_id)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from conformance.pipeline.shape import input_shape

#: Outcomes, worst first: a statement's status in a run is its worst case outcome.
SEVERITY = ("failed", "error", "non-strict", "known-deviation", "passed", "unsupported",
            "informational", "skipped")
BAD = ("failed", "error")
#: Outcomes that say nothing about the broker (the case did not run).
NOT_RUN = ("skipped",)


def count_name(outcome: str) -> str:
    return outcome.replace("-", "_")


COUNTS = tuple(count_name(o) for o in SEVERITY)


def _counts() -> list[Column]:
    return [F.sum(F.when(F.col("outcome") == o, 1).otherwise(0)).alias(count_name(o))
            for o in SEVERITY]


def _summed() -> list[Column]:
    return [F.sum(c).alias(c) for c in COUNTS]


def _status() -> Column:
    """The worst outcome with a count above 0, from the count columns."""
    chain = F.when(F.col(COUNTS[0]) > 0, F.lit(SEVERITY[0]))
    for outcome, name in zip(SEVERITY[1:], COUNTS[1:], strict=True):
        chain = chain.when(F.col(name) > 0, F.lit(outcome))
    return chain.otherwise(F.lit(None))


def _pass_rate() -> Column:
    decided = F.col("passed") + F.col("failed") + F.col("error")
    return F.when(decided > 0, F.round(F.col("passed") / decided, 6))


def _severity(outcome: Column) -> Column:
    chain = F.when(outcome == SEVERITY[0], 0)
    for rank, name in enumerate(SEVERITY[1:], start=1):
        chain = chain.when(outcome == name, rank)
    return chain.otherwise(len(SEVERITY))


def _outcome_of(rank: Column) -> Column:
    return F.element_at(F.array(*[F.lit(o) for o in SEVERITY]), rank + 1)


def cases(records: DataFrame) -> DataFrame:
    """Case-result records with broker, build and broker_version."""
    return records.select(
        "run_id", "timestamp", "tool_version", "broker_id", "broker_server", "case_id",
        "version", "statements", "level", "outcome", "duration_ms", *_derived())


def _derived() -> list[Column]:
    """broker, build and broker_version, from broker_id and broker_server: a job that
    groups many records by them groups by those two first and derives them from the few
    rows left (the regular expression then runs once per group, not per record)."""
    version = F.regexp_extract(F.col("broker_server"), r"^[^/\s]+/(\S+)", 1)
    return [F.substring_index("broker_id", "@", 1).alias("broker"),
            F.coalesce(F.col("broker_server"), F.col("broker_id")).alias("build"),
            F.when(F.length(version) > 0, version).otherwise(F.lit("unknown"))
            .alias("broker_version")]


# -- matrix --------------------------------------------------------------------------------

@dataclass
class Matrix:
    #: broker x statement x STOMP version, in each run
    by_run: DataFrame
    #: the same over every run of a broker version
    by_version: DataFrame


def matrix(cases: DataFrame) -> Matrix:
    by_run = matrix_by_run(cases)
    return Matrix(by_run, matrix_by_version(by_run))


def matrix_by_run(cases: DataFrame) -> DataFrame:
    # Grouped where the records of a run meet (the keys hold run_id): one aggregation after
    # the shuffle instead of a partial one before it, which would barely shrink the rows
    # (a statement seldom comes twice in a run) and spill on millions of them.
    exploded = (cases.select("broker", "broker_version", "build", "run_id", "timestamp",
                             F.col("version").alias("stomp_version"), "outcome", "statements")
                .repartition("run_id")
                .select("*", F.explode("statements").alias("statement")).drop("statements"))
    return (exploded.groupBy("broker", "broker_version", "build", "run_id", "statement",
                             "stomp_version")
            .agg(F.min("timestamp").alias("timestamp"),
                 F.count(F.lit(1)).alias("executions"), *_counts())
            .withColumn("status", _status()).withColumn("pass_rate", _pass_rate()))


def matrix_by_version(by_run: DataFrame) -> DataFrame:
    """From by_run (written and read back, the pipeline computes it once)."""
    return (by_run.groupBy("broker", "broker_version", "statement", "stomp_version")
            .agg(F.count(F.lit(1)).alias("runs"),
                 F.sum("executions").alias("executions"), *_summed(),
                 F.sum(F.when(F.col("status").isin(*BAD), 1).otherwise(0))
                 .alias("runs_failing"),
                 F.min("timestamp").alias("first_seen"),
                 F.max("timestamp").alias("last_seen"))
            .withColumn("status", _status()).withColumn("pass_rate", _pass_rate()))


# -- regressions ---------------------------------------------------------------------------

def runs(cases: DataFrame) -> DataFrame:
    """One row per run: when, which build, and the run before it on the same broker."""
    # a few rows per run first (a hash aggregation), then the rest on those
    per_build = (cases.groupBy("broker_id", "broker_server", "run_id")
                 .agg(F.min("timestamp").alias("timestamp"))
                 .select("run_id", "timestamp", *_derived()))
    per_run = per_build.groupBy("broker", "run_id").agg(
        F.min("timestamp").alias("timestamp"), F.max("build").alias("build"),
        F.max("broker_version").alias("broker_version"))
    order = Window.partitionBy("broker").orderBy("timestamp", "run_id")
    return (per_run.withColumn("previous_run_id", F.lag("run_id").over(order))
            .withColumn("previous_timestamp", F.lag("timestamp").over(order))
            .withColumn("previous_build", F.lag("build").over(order)))


def regressions(cases: DataFrame) -> DataFrame:
    """Case runs whose outcome turned from passed to failed or error ('regressed') or back
    ('fixed') since the broker's previous run; a case run twice in one run counts by its
    worst outcome."""
    keys = ["broker", "run_id", "case_id", "version"]
    order = F.broadcast(runs(cases).where(F.col("previous_run_id").isNotNull()))
    none = F.lit(None).cast("int")
    # An outcome ranked after passed (unsupported, skipped, ...) never decides a change:
    # a case run's worst outcome is passed, failed or error without it, or neither.
    ranked = (cases.select(*keys, _severity(F.col("outcome")).alias("r"))
              .where(F.col("r") <= SEVERITY.index("passed")))
    # Each record counts at its own run (rank) and at the broker's next run
    # (previous_rank): one aggregation pairs a case run with the same case in the run
    # before, without joining millions of records with themselves.
    following = order.select("broker", F.col("previous_run_id").alias("run_id"),
                             F.col("run_id").alias("next_run_id"))
    now = ranked.select(*keys, F.col("r").alias("rank"), none.alias("previous_rank"))
    then = (ranked.join(following, ["broker", "run_id"])
            .select("broker", F.col("next_run_id").alias("run_id"), "case_id", "version",
                    none.alias("rank"), F.col("r").alias("previous_rank")))
    # shuffled whole: a partial aggregation first would hardly shrink them
    paired = (now.unionByName(then).repartition("broker", "case_id", "version").groupBy(*keys)
              .agg(F.min("rank").alias("rank"), F.min("previous_rank").alias("previous_rank")))
    now_, then_ = _outcome_of(F.col("rank")), _outcome_of(F.col("previous_rank"))
    change = (F.when((then_ == "passed") & now_.isin(*BAD), F.lit("regressed"))
              .when(then_.isin(*BAD) & (now_ == "passed"), F.lit("fixed")))
    changed = paired.withColumn("change", change).where(F.col("change").isNotNull())
    # the statements of the few case runs that changed, from their records
    joined = (cases.select(*keys, "statements").join(F.broadcast(changed), keys)
              .groupBy(*keys, "rank", "previous_rank", "change")
              .agg(F.first("statements").alias("statements"))
              .join(order, ["broker", "run_id"]))
    return joined.select("broker", "run_id", "timestamp", "build", "broker_version",
                         "previous_run_id", "previous_timestamp", "previous_build", "case_id",
                         "version", "statements", then_.alias("previous_outcome"),
                         now_.alias("outcome"), "change")


def regressed_statements(regressions: DataFrame) -> DataFrame:
    """Which statements regressed in which run: (broker, run_id, statement, cases)."""
    return (regressions.where(F.col("change") == "regressed")
            .select("broker", "run_id", "timestamp", "previous_run_id",
                    F.explode("statements").alias("statement"), "case_id")
            .groupBy("broker", "run_id", "timestamp", "previous_run_id", "statement")
            .agg(F.count(F.lit(1)).alias("cases"),
                 F.array_sort(F.collect_set("case_id")).alias("case_ids")))


# -- flaky ---------------------------------------------------------------------------------

def flaky(cases: DataFrame) -> DataFrame:
    """Cases with more than one outcome on one build (skips not counted), with how often
    the minority outcomes came: flake_rate = 1 - (commonest outcome's share)."""
    keys = ["broker", "build", "broker_version", "case_id", "version"]
    ran = cases.where(~F.col("outcome").isin(*NOT_RUN))
    # the records to a few rows per case and outcome first: a hash aggregation (the sets
    # and arrays of the second one would need slower ones), then the rest on those
    outcomes = (ran.groupBy("broker_id", "broker_server", "case_id", "version", "outcome",
                            "statements")
                .agg(F.count(F.lit(1)).alias("n"), F.min("timestamp").alias("first_seen"),
                     F.max("timestamp").alias("last_seen"))
                .select("*", *_derived()))
    grouped = (outcomes.groupBy(*keys)
               .agg(F.sum("n").alias("executions"),
                    *[F.sum(F.when(F.col("outcome") == o, F.col("n")).otherwise(0))
                      .alias(count_name(o)) for o in SEVERITY],
                    F.array_sort(F.collect_set("outcome")).alias("outcomes"),
                    F.first("statements").alias("statements"),
                    F.min("first_seen").alias("first_seen"),
                    F.max("last_seen").alias("last_seen")))
    commonest = F.greatest(*[F.col(c) for c in COUNTS if c not in NOT_RUN])
    return (grouped.where(F.size("outcomes") > 1)
            .withColumn("flake_rate", F.round(1 - commonest / F.col("executions"), 6))
            .drop(*NOT_RUN))


# -- buckets -------------------------------------------------------------------------------

def findings(records: DataFrame) -> DataFrame:
    """Finding records with broker, signature and the shape of their input (from the
    input's octets; for a record without them, from what the record says of it). A record
    written before findings carried their signature is bucketed by its classification and
    statement as written."""
    shape_udf = F.udf(input_shape, StringType(), useArrow=False)
    coarse = F.concat_ws(" ", F.lit("~"), F.col("version"), F.col("mutation"),
                         F.col("expect"), F.concat(F.lit("octets:"), F.col("input_octets")))
    legacy = F.concat_ws(" ", F.col("classification"), F.col("statement"))
    return (records.withColumn("broker", F.substring_index("broker_id", "@", 1))
            .withColumn("signature", F.coalesce(F.col("signature"), legacy))
            .withColumn("shape", F.coalesce(shape_udf(F.col("input")), coarse)))


def buckets(findings: DataFrame) -> DataFrame:
    """Findings grouped into distinct bugs by their signature (the rule broken and the
    response class: conformance/fuzz/network/findings.py), with a stable bucket_id, where
    and when each bug showed, the input shapes and statement wordings it showed through, and
    its smallest reproducer."""
    smallest = F.struct("input_octets", "finding_id")  # ties broken by id: a stable example
    return (findings.groupBy("signature", "classification")
            .agg(F.count(F.lit(1)).alias("findings"), F.sum("hits").alias("hits"),
                 F.array_sort(F.collect_set("statement")).alias("statements"),
                 F.array_sort(F.collect_set("broker_id")).alias("brokers"),
                 F.array_sort(F.collect_set("broker_server")).alias("builds"),
                 F.slice(F.array_sort(F.collect_set("mutation")), 1, 20).alias("mutations"),
                 F.size(F.collect_set("shape")).alias("shapes"),
                 F.size(F.collect_set("seed")).alias("seeds"),
                 F.array_sort(F.collect_set("grade")).alias("grades"),
                 F.min("timestamp").alias("first_seen"), F.max("timestamp").alias("last_seen"),
                 F.min("input_octets").alias("smallest_input_octets"),
                 F.min_by("finding_id", smallest).alias("example_finding"),
                 F.min_by("replay", smallest).alias("example_replay"),
                 F.min_by("shape", smallest).alias("shape"))
            .withColumn("statement", F.split("signature", " ").getItem(1))
            .withColumn("bucket_id", F.substring(F.sha2(F.col("signature"), 256), 1, 12)))


# -- trends --------------------------------------------------------------------------------

@dataclass
class Trends:
    #: one point per run: counts, pass rate, statements failing
    runs: DataFrame
    #: per broker and day (UTC)
    daily: DataFrame


def trends(cases: DataFrame, by_run: DataFrame) -> Trends:
    """Conformance over time, from the cases and the matrix's by_run (statements failing)."""
    per_run = (cases.groupBy("broker", "run_id")
               .agg(F.min("timestamp").alias("timestamp"), F.max("build").alias("build"),
                    F.max("broker_version").alias("broker_version"),
                    F.max("tool_version").alias("tool_version"),
                    F.count(F.lit(1)).alias("executions"), *_counts(),
                    F.sum(F.when((F.col("level") == "must") & F.col("outcome").isin(*BAD), 1)
                          .otherwise(0)).alias("must_failing"),
                    F.round(F.sum("duration_ms") / 1000, 3).alias("duration_s"))
               .withColumn("pass_rate", _pass_rate()))
    failing = (by_run.where(F.col("status").isin(*BAD))
               .groupBy("broker", "run_id")
               .agg(F.countDistinct("statement").alias("statements_failing")))
    points = (per_run.join(failing, ["broker", "run_id"], "left")
              .fillna(0, subset=["statements_failing"]))
    daily = (points.withColumn("day", F.to_date("timestamp"))
             .groupBy("broker", "day")
             .agg(F.count(F.lit(1)).alias("runs"), F.sum("executions").alias("executions"),
                  *_summed(), F.sum("must_failing").alias("must_failing"),
                  F.max("statements_failing").alias("most_statements_failing"),
                  F.array_sort(F.collect_set("build")).alias("builds"))
             .withColumn("pass_rate", _pass_rate()))
    return Trends(points, daily)
