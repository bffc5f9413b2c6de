"""The pipeline's questions, one function each, DataFrame in and DataFrame(s) out, nothing
written: `matrix`, `regressions`, `flaky`, `buckets`, `trends`. `cases` and `findings`
first derive the columns every job shares from the records.

Words: a broker is what the profile names (the part of broker_id before '@': the same
broker whatever port it listened on); a build is what its CONNECTED server header says
(`RabbitMQ/3.13.1`; the broker id when it sent none), and its version is the part after
the '/'. A run is one `run` of the suite (run_id)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from conformance.pipeline import runs
from conformance.pipeline.runs import RUN
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


def _rank() -> Column:
    """A record's outcome as its rank in SEVERITY (unknown ones last), computed once per
    record: the aggregates after it compare ints, not the outcome's string."""
    return _severity(F.col("outcome")).alias("rank")


def cases(records: DataFrame) -> DataFrame:
    """Case-result records with broker, build and broker_version."""
    return records.select(
        "run_id", "timestamp", "tool_version", "broker_id", "broker_server", "case_id",
        "version", "statements", "level", "outcome", "duration_ms", *runs.derived())


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
    # A record's broker, build and run are one long: a hash of its broker_id, broker_server
    # and run_id, where that tells apart every such triple and each stands for a row of its
    # own (else by the strings, derived per record): the records carry no string they do
    # not need through the shuffle, derive nothing per record (the regular expression runs
    # on a row per run) and hash a long key, not four strings; the names come back by a
    # join of the few rows per run.
    table = runs.of(cases)
    unique = table.by_hash and table.by_names
    key: list[Column | str] = [runs.build_hash().alias("h")] if unique else list(RUN)
    by = ["h"] if unique else RUN
    # Grouped where the records of a run meet (the keys hold run_id): one aggregation after
    # the shuffle instead of a partial one before it, which would barely shrink the rows
    # (a statement seldom comes twice in a run) and spill on millions of them. The outcome
    # as its rank, once per record: an int through the shuffle, and each statement's counts
    # compare ints.
    exploded = (cases.select(*key, "timestamp", F.col("version").alias("stomp_version"),
                             _rank(), "statements")
                .repartition(*by)
                .select("*", F.explode("statements").alias("statement")).drop("statements"))
    grouped = (exploded.groupBy(*by, "statement", "stomp_version")
               .agg(F.min("timestamp").alias("timestamp"),
                    F.count(F.lit(1)).alias("executions"),
                    *[F.sum(F.when(F.col("rank") == i, 1).otherwise(0)).alias(name)
                      for i, name in enumerate(COUNTS)]))
    if unique:
        grouped = grouped.join(F.broadcast(table.frame("builds").select("h", *RUN)), "h")
    return (grouped.select(*RUN, "statement", "stomp_version", "timestamp", "executions",
                           *COUNTS)
            .withColumn("status", _status()).withColumn("pass_rate", _pass_rate()))


def matrix_by_version(by_run: DataFrame) -> DataFrame:
    """From by_run (written and read back, the pipeline computes it once)."""
    return (by_run.groupBy("broker", "broker_version", "statement", "stomp_version")
            .agg(F.count(F.lit(1)).alias("runs"),
                 F.sum("executions").alias("executions"), *_summed(),
                 # a run's status is failed or error where it counted either (BAD are
                 # the worst two): by the counts, the status column is not read
                 F.sum(F.when(sum((F.col(count_name(o)) for o in BAD), F.lit(0)) > 0, 1)
                       .otherwise(0)).alias("runs_failing"),
                 F.min("timestamp").alias("first_seen"),
                 F.max("timestamp").alias("last_seen"))
            .withColumn("status", _status()).withColumn("pass_rate", _pass_rate()))


# -- regressions ---------------------------------------------------------------------------

#: Runs per block: a case's states in 64 runs of its broker in a row are one row of bit sets
#: (bit i: the block's run i), so that the records shrink to a few rows per case in one
#: hash aggregation, and a case run meets the same case in the run before by a shift.
BLOCK = 64
#: What a case run's records make of it, by the ranks of their outcomes (bit sets over its
#: block's runs): any record ("ran": the statements of a changed case run are its
#: records'); the worst outcome failed, error, another ranked before passed, or passed (an
#: outcome ranked after passed, unsupported, skipped, ..., decides nothing).
_STATES: dict[str, tuple[int, ...]] = {"ran": (), "failed": (0,), "error": (1,),
                                       "neither": (2, 3), "passed": (4,)}


def _zero() -> Column:
    return F.lit(0).cast("long")


def _bit(name: str, index: str) -> Column:
    return F.expr(f"shiftright({name}, {index}) & 1 = 1")


def _states() -> list[Column]:
    """What a block's records make of its case: _STATES as bit sets over its runs, from
    each record's `rank` (_rank)."""
    rank = F.col("rank")
    bit = F.expr(f"shiftleft(1L, seq % {BLOCK})")
    return [F.bit_or(F.when(rank.isin(*ranks), bit).otherwise(_zero()) if ranks else bit)
            .alias(name) for name, ranks in _STATES.items()]


def _block_key() -> Column:
    return F.expr(f"shiftleft(cast(b AS long), 32) | (seq div {BLOCK})").alias("bb")


def _record_blocks(cases: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The runs, and the records of each case and block of its broker's runs, by
    statements too (the statements of a case run that changed come from its records)."""
    table = runs.of(cases)
    return table.frame("order"), (
        cases.select("broker_id", "run_id", "case_id", "version", "statements",
                     _rank())
        .join(F.broadcast(table.frame("lookup_by_names")), ["broker_id", "run_id"])
        .groupBy(_block_key(), "case_id", "version", "statements").agg(*_states()))


#: The outcomes flaky counts, and their names sorted as collect_set's arrays are.
RAN = tuple(o for o in SEVERITY if o not in NOT_RUN)
_RAN_SORTED = tuple(sorted(RAN))


@dataclass
class _CasePass:
    #: the runs, with `b` and `seq` (runs.Runs.order)
    order: DataFrame
    #: g (a number per broker, build and broker_version) to those names
    names: DataFrame
    #: per g, bb (broker and block), case, version and statements: _STATES, the count of
    #: each outcome of RAN (n_failed, ...), of `other` outcomes, and when the RAN ones came
    #: first and last
    blocks: DataFrame


#: The case pass of each cases frame, kept while it lives (None: it cannot be made).
_PASSES: weakref.WeakKeyDictionary[DataFrame, tuple[_CasePass | None]] = \
    weakref.WeakKeyDictionary()


def _case_pass(cases: DataFrame) -> _CasePass | None:
    """One pass over the records that both the regressions and flaky need, kept: each
    record to its case's row of its build and block (a few rows per case), found by the
    hash of its run (None where that does not tell every run apart)."""
    if cases in _PASSES:
        return _PASSES[cases][0]
    table = runs.of(cases)
    made = None
    if table.by_hash:
        rank = F.col("rank")
        stamp = F.when(~rank.isin(*[SEVERITY.index(o) for o in NOT_RUN]), F.col("timestamp"))
        blocks = (cases.select(runs.build_hash().alias("h"), "timestamp", "case_id",
                               "version", "statements", _rank())
                  .join(F.broadcast(table.frame("lookup")), "h")
                  .groupBy("g", _block_key(), "case_id", "version", "statements")
                  .agg(*_states(),
                       *[F.sum(F.when(rank == SEVERITY.index(o), 1).otherwise(0))
                         .alias(f"n_{count_name(o)}") for o in RAN],
                       F.sum(F.when(rank == len(SEVERITY), 1).otherwise(0)).alias("other"),
                       F.min(stamp).alias("first_seen"), F.max(stamp).alias("last_seen"))
                  .localCheckpoint())
        made = _CasePass(table.frame("order"), table.frame("names"), blocks)
    _PASSES[cases] = (made,)
    return made


def regressions(cases: DataFrame) -> DataFrame:
    """Case runs whose outcome turned from passed to failed or error ('regressed') or back
    ('fixed') since the broker's previous run; a case run twice in one run counts by its
    worst outcome."""
    shared = _case_pass(cases)
    order, blocks = (shared.order, shared.blocks) if shared else _record_blocks(cases)
    # those few rows shuffled by case (into as many parts as a shuffle has: AQE would make
    # one task of so few rows), where the rest needs no other shuffle
    keys = ["b", "case_id", "version"]
    parts = int(cases.sparkSession.conf.get("spark.sql.shuffle.partitions") or 1)
    blocks = (
        blocks
        .repartition(parts, "case_id", "version")
        .groupBy("bb", "case_id", "version")
        .agg(*[F.bit_or(n).alias(n) for n in _STATES if n != "ran"],
             F.collect_list(F.struct("ran", "statements")).alias("statements"))
        .select(F.expr("shiftright(bb, 32)").cast("int").alias("b"), "case_id", "version",
                F.expr("bb & 4294967295").alias("block"), "failed", "error", "neither", "passed",
                "statements"))
    # bit i of `before_X`: state X in the run before the block's run i (for i = 0, the last
    # run of the block before)
    window = Window.partitionBy(*keys).orderBy("block")
    blocks = blocks.withColumn("adjacent", F.lag("block").over(window) == F.col("block") - 1)
    for name in ("failed", "error", "neither", "passed"):
        carried = F.when(F.col("adjacent"), F.lag(name).over(window)).otherwise(_zero())
        blocks = blocks.withColumn(f"before_{name}", F.expr(f"shiftleft({name}, 1)")
                                   .bitwiseOR(F.shiftrightunsigned(carried, BLOCK - 1)))
    passed = "{0}passed & ~({0}failed | {0}error | {0}neither)"
    changes = blocks.select(
        *keys, "block", "statements", "failed", "before_failed",
        F.expr(f"{passed.format('before_')} & (failed | error)").alias("regressed"),
        F.expr(f"{passed.format('')} & (before_failed | before_error)").alias("fixed"))
    # the bits set, one row each (each changed block to its 64 positions, filtered: a small
    # generator and a compiled filter)
    positions = F.array(*[F.lit(i) for i in range(BLOCK)])
    changed = (changes.where("regressed | fixed != 0")
               .select("*", F.explode(positions).alias("i"))
               .where(_bit("regressed | fixed", "i"))
               .select(*keys, F.expr(f"block * {BLOCK} + i").alias("seq"),
                       F.expr("filter(statements, s -> shiftright(s.ran, i) & 1 = 1)[0]"
                              ".statements").alias("statements"),
                       F.when(_bit("regressed", "i"), "regressed")
                       .when(_bit("fixed", "i"), "fixed").alias("change"),
                       F.when(_bit("regressed", "i"), "passed")
                       .when(_bit("before_failed", "i"), "failed").otherwise("error")
                       .alias("previous_outcome"),
                       F.when(_bit("fixed", "i"), "passed")
                       .when(_bit("failed", "i"), "failed").otherwise("error").alias("outcome")))
    return (changed.join(F.broadcast(order), ["b", "seq"])
            .select("broker", "run_id", "timestamp", "build", "broker_version",
                    "previous_run_id", "previous_timestamp", "previous_build", "case_id",
                    "version", "statements", "previous_outcome", "outcome", "change"))


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
    shared = _case_pass(cases)
    # from the case pass's rows where every outcome is one of RAN's or skipped (the counts
    # then say which came), else from the records
    if shared is not None and not shared.blocks.where("other > 0").take(1):
        some = F.greatest(*[F.col(f"n_{count_name(o)}") for o in RAN]) > 0
        counted = (shared.blocks.groupBy("g", "case_id", "version")
                   .agg(*[F.sum(f"n_{count_name(o)}").alias(count_name(o)) for o in RAN],
                        F.first(F.when(some, F.col("statements")), ignorenulls=True)
                        .alias("statements"),
                        F.min("first_seen").alias("first_seen"),
                        F.max("last_seen").alias("last_seen"))
                   .join(F.broadcast(shared.names), "g"))
        grouped = counted.select(
            *keys, sum((F.col(count_name(o)) for o in RAN[1:]), F.col(count_name(RAN[0])))
            .alias("executions"), *[count_name(o) for o in RAN],
            F.array_compact(F.array(*[F.when(F.col(count_name(o)) > 0, F.lit(o))
                                      for o in _RAN_SORTED])).alias("outcomes"),
            "statements", "first_seen", "last_seen")
    else:
        grouped = _flaky_records(cases, keys)
    commonest = F.greatest(*[F.col(count_name(o)) for o in RAN])
    return (grouped.where(F.size("outcomes") > 1)
            .withColumn("flake_rate", F.round(1 - commonest / F.col("executions"), 6))
            .drop(*NOT_RUN))


def _flaky_records(cases: DataFrame, keys: list[str]) -> DataFrame:
    ran = cases.where(~F.col("outcome").isin(*NOT_RUN))
    # the records to a few rows per case and outcome first: a hash aggregation (the sets
    # and arrays of the second one would need slower ones), then the rest on those, in one
    # task (no second shuffle for so few rows)
    outcomes = (ran.groupBy("broker_id", "broker_server", "case_id", "version", "outcome",
                            "statements")
                .agg(F.count(F.lit(1)).alias("n"), F.min("timestamp").alias("first_seen"),
                     F.max("timestamp").alias("last_seen"))
                .coalesce(1).select("*", *runs.derived()))
    return (outcomes.groupBy(*keys)
            .agg(F.sum("n").alias("executions"),
                 *[F.sum(F.when(F.col("outcome") == o, F.col("n")).otherwise(0))
                   .alias(count_name(o)) for o in SEVERITY],
                 F.array_sort(F.collect_set("outcome")).alias("outcomes"),
                 F.first("statements").alias("statements"),
                 F.min("first_seen").alias("first_seen"),
                 F.max("last_seen").alias("last_seen")))


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
