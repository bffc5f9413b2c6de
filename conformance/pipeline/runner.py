"""Running the jobs over record files and writing what they find: partitioned Parquet under
the output folder, and report-data.json. Layout:

    OUTPUT/records/case_result, OUTPUT/records/fuzz_finding   the records, checked (staging)
    OUTPUT/matrix/by_run, OUTPUT/matrix/by_version             partitioned by broker
    OUTPUT/regressions/cases, OUTPUT/regressions/statements    partitioned by broker
    OUTPUT/flaky                                               partitioned by broker
    OUTPUT/trends/runs, OUTPUT/trends/daily                    partitioned by broker
    OUTPUT/buckets                                             partitioned by classification
    OUTPUT/report-data.json
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from conformance.fuzz.network.finding_records import FINDING_KIND
from conformance.pipeline import JOBS, jobs
from conformance.pipeline.load import Inputs, RecordsError, stage
from conformance.pipeline.report_data import write_report_data
from conformance.pipeline.schemas import FILE_GLOBS
from conformance.report.records import KIND as CASE_KIND

_NEEDS = {"matrix": CASE_KIND, "regressions": CASE_KIND, "flaky": CASE_KIND,
          "trends": CASE_KIND, "buckets": FINDING_KIND}


@dataclass
class Outcome:
    #: (output name, path, rows) of each table written
    written: list[tuple[str, Path, int]] = field(default_factory=list)
    #: records read, by kind
    records: dict[str, int] = field(default_factory=dict)
    skipped_bad: int = 0
    #: jobs not run, and why
    notes: list[str] = field(default_factory=list)
    report_data: Path | None = None


def _write(frame: DataFrame, path: Path, partition: str, name: str, outcome: Outcome,
           spark: SparkSession) -> DataFrame:
    frame.write.mode("overwrite").partitionBy(partition).parquet(str(path))
    # the rows counted from the files' footers, not by another Spark job
    rows = sum(pq.read_metadata(part).num_rows for part in path.rglob("*.parquet"))
    outcome.written.append((name, path, rows))
    # with the schema: an empty table is a folder with no Parquet file in it
    return spark.read.schema(frame.schema).parquet(str(path))


def check(inputs: Inputs, chosen: Sequence[str]) -> list[str]:
    """Notes on the jobs that will be skipped for want of records; RecordsError when a job
    chosen by name has none, or no job has any."""
    notes = []
    for kind in sorted({_NEEDS[name] for name in chosen}):
        if not inputs.of(kind):
            names = [n for n in chosen if _NEEDS[n] == kind]
            message = f"no {kind} records ({FILE_GLOBS[kind]}) in the input"
            if set(chosen) != set(JOBS):
                raise RecordsError(f"{message}: {', '.join(names)} needs them")
            notes.append(f"{message}: {', '.join(names)} skipped")
    if len(notes) == len({_NEEDS[name] for name in chosen}):
        raise RecordsError("no records in the input")
    return notes


def run_jobs(spark: SparkSession, inputs: Inputs, output: Path, chosen: Sequence[str], *,
             skip_bad: bool = False, report: bool = True,
             progress: Callable[[str], None] = lambda _: None) -> Outcome:
    """Run the chosen jobs. A job chosen by name whose records are missing is a
    RecordsError; with every job chosen, it is skipped with a note."""
    outcome = Outcome(notes=check(inputs, chosen))
    kinds = {_NEEDS[name] for name in chosen}
    frames: dict[str, DataFrame] = {}
    for kind in sorted(kinds):
        if inputs.of(kind):
            progress(f"reading {len(inputs.of(kind))} {kind} files")
            staged = stage(spark, inputs.of(kind), kind, output / "records" / kind,
                           skip_bad=skip_bad)
            frames[kind] = staged.records
            outcome.records[kind] = staged.good
            outcome.skipped_bad += staged.bad

    def write(frame: DataFrame, parts: Sequence[str], partition: str = "broker") -> DataFrame:
        name = "/".join(parts)
        progress(f"writing {name}")
        return _write(frame, output.joinpath(*parts), partition, name, outcome, spark)

    if CASE_KIND in frames:
        cases = jobs.cases(frames[CASE_KIND])
        by_run: DataFrame | None = None
        if "matrix" in chosen:
            by_run = write(jobs.matrix_by_run(cases), ["matrix", "by_run"])
            write(jobs.matrix_by_version(by_run), ["matrix", "by_version"])
        if "regressions" in chosen:
            changed = write(jobs.regressions(cases), ["regressions", "cases"])
            write(jobs.regressed_statements(changed), ["regressions", "statements"])
        if "flaky" in chosen:
            write(jobs.flaky(cases), ["flaky"])
        if "trends" in chosen:
            trends = jobs.trends(cases, by_run if by_run is not None
                                 else jobs.matrix_by_run(cases))
            write(trends.runs, ["trends", "runs"])
            write(trends.daily, ["trends", "daily"])
    if FINDING_KIND in frames and "buckets" in chosen:
        write(jobs.buckets(jobs.findings(frames[FINDING_KIND])), ["buckets"],
              partition="classification")
    if report:
        progress("writing report-data.json")
        outcome.report_data = write_report_data(spark, output, {
            "case_records": outcome.records.get(CASE_KIND, 0),
            "finding_records": outcome.records.get(FINDING_KIND, 0),
            "bad_records_skipped": outcome.skipped_bad})
    return outcome
