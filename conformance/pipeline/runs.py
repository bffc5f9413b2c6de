"""The run table: a row per run of the case records, made by one Spark job and held on the
driver as Arrow, with what the jobs derive from it (each broker's runs in order, the builds
numbered, a record's run found by a hash of its names).

These tables have a row per run: thousands where the records are millions. Spark would
spend a job of a few stages on each step over them (a window, a rank, a check that no two
runs share a hash), each its own code generated and compiled; Arrow does them all in
milliseconds on the driver, and the jobs join them back as broadcast relations. The run
table is collected whole, as a broadcast join would collect it anyway."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

#: What names a run, as the jobs report it.
RUN = ["broker", "broker_version", "build", "run_id"]
#: What names a build: g numbers these.
TRIO = ["broker", "build", "broker_version"]


def derived() -> list[Column]:
    """broker, build and broker_version, from broker_id and broker_server: a job that
    groups many records by them groups by those two first and derives them from the few
    rows left (the regular expression then runs once per group, not per record)."""
    version = F.regexp_extract(F.col("broker_server"), r"^[^/\s]+/(\S+)", 1)
    return [F.substring_index("broker_id", "@", 1).alias("broker"),
            F.coalesce(F.col("broker_server"), F.col("broker_id")).alias("build"),
            F.when(F.length(version) > 0, version).otherwise(F.lit("unknown"))
            .alias("broker_version")]


def build_hash() -> Column:
    """A record's run as one long: a hash of its broker_id, broker_server and run_id."""
    return F.xxhash64("broker_id", "broker_server", "run_id")


@dataclass
class Runs:
    """The runs of one cases frame."""

    #: the session of the cases frame (not the frame: the table of runs is kept while the
    #: frame lives, and would keep it alive)
    spark: SparkSession
    #: a row per broker_id, broker_server and run_id: broker_id, run_id, timestamp (the
    #: first record's), broker, build, broker_version and h (build_hash)
    builds: pa.Table
    _frames: dict[str, DataFrame] = field(default_factory=dict)

    @cached_property
    def by_hash(self) -> bool:
        """h tells every run apart: the jobs may find a record's run by it."""
        return bool(pc.count_distinct(self.builds["h"]).as_py() == self.builds.num_rows)

    @cached_property
    def by_names(self) -> bool:
        """Each run (broker_id, broker_server, run_id) has names (RUN) of its own."""
        return bool(self.builds.group_by(RUN).aggregate([]).num_rows == self.builds.num_rows)

    def frame(self, name: str) -> DataFrame:
        """builds or a table below as a Spark frame, made once."""
        if name not in self._frames:
            table: pa.Table = getattr(self, name)
            self._frames[name] = self.spark.createDataFrame(table)
        return self._frames[name]

    @cached_property
    def order(self) -> pa.Table:
        """A row per broker and run: when (its first record), which build and version,
        its place among its broker's runs (seq, from 0, by time then run_id), the run before
        it on the same broker, and b (the brokers numbered from 1 in their sorted order)."""
        per_run = self.builds.group_by(["broker", "run_id"]).aggregate(
            [("timestamp", "min"), ("build", "max"), ("broker_version", "max")]
        ).rename_columns(["broker", "run_id", "timestamp", "build", "broker_version"])
        per_run = per_run.take(pc.sort_indices(per_run, sort_keys=[
            ("broker", "ascending"), ("timestamp", "ascending"), ("run_id", "ascending")]))
        # the rows of a broker are now together: its first row's index is its "min" rank
        first = pc.subtract(pc.rank(per_run["broker"], tiebreaker="min"), 1)
        seq = pc.subtract(pa.array(range(per_run.num_rows), pa.uint64()), first)
        later = pc.greater(seq, 0)
        table = per_run.append_column("seq", pc.cast(seq, pa.int64()))
        for name in ("run_id", "timestamp", "build"):
            before = table[name].combine_chunks()
            shifted = pa.concat_arrays([pa.nulls(1, before.type), before[:-1]]) \
                if len(before) else before
            table = table.append_column(f"previous_{name}", pc.if_else(
                later, shifted, pa.scalar(None, before.type)))
        return table.append_column("b", pc.cast(pc.rank(per_run["broker"], tiebreaker="dense"),
                                                pa.int32()))

    @cached_property
    def names(self) -> pa.Table:
        """The builds numbered: g (from 1, in their sorted order) and TRIO."""
        trios = self.builds.group_by(TRIO).aggregate([])
        trios = trios.take(pc.sort_indices(trios, sort_keys=[(c, "ascending") for c in TRIO]))
        return trios.append_column("g", pa.array(range(1, trios.num_rows + 1), pa.int32()))

    def _placed(self, table: pa.Table) -> pa.Table:
        """`table` with its run's b and seq, by broker and run_id."""
        return table.join(self.order.select(["broker", "run_id", "b", "seq"]),
                          ["broker", "run_id"])

    @cached_property
    def lookup(self) -> pa.Table:
        """A record's run by its hash (where by_hash): h to g, b and seq."""
        return self._placed(self.builds.join(self.names, TRIO)).select(["h", "g", "b", "seq"])

    @cached_property
    def lookup_by_names(self) -> pa.Table:
        """A record's run by broker_id and run_id: to b and seq."""
        pairs = self.builds.group_by(["broker_id", "broker", "run_id"]).aggregate([])
        return self._placed(pairs).select(["broker_id", "run_id", "b", "seq"])


#: The runs of each cases frame, kept while it lives: the jobs on one frame make them once.
_RUNS: weakref.WeakKeyDictionary[DataFrame, Runs] = weakref.WeakKeyDictionary()


def of(cases: DataFrame) -> Runs:
    """The run table of a cases frame: one hash aggregation of the records, collected."""
    kept = _RUNS.get(cases)
    if kept is None:
        builds = (cases.groupBy("broker_id", "broker_server", "run_id")
                  .agg(F.min("timestamp").alias("timestamp"))
                  .select("broker_id", "run_id", "timestamp", *derived(),
                          build_hash().alias("h"))
                  .toArrow())
        kept = _RUNS[cases] = Runs(cases.sparkSession, builds)
    return kept
