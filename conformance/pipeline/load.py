"""Records in: find the record files under the inputs, read them with the kind's schema,
and stage them as Parquet beside the results, each record marked with what is wrong with
it, if anything. The jobs read the staged copy: one pass over the JSON, however many jobs.

A bad record (not JSON, a field of the wrong type, a required field missing, another kind,
a schema version this pipeline does not read) stops the pipeline with a one-line
RecordsError naming how many, why and the first file, unless the caller skips them."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from conformance.pipeline.schemas import (
    CORRUPT,
    FILE_GLOBS,
    SCHEMAS,
    SUPPORTED,
    TIMESTAMP_FORMAT,
    required,
    with_corrupt,
)

#: Columns the staged copy adds: the file a record came from, and what is wrong with it.
SOURCE, PROBLEM = "_source", "_problem"


class RecordsError(Exception):
    """The inputs cannot be used as they are (one line)."""


@dataclass
class Inputs:
    """Record files by kind."""

    files: dict[str, list[Path]] = field(default_factory=dict)

    def of(self, kind: str) -> list[Path]:
        return self.files.get(kind, [])


def find_inputs(paths: Sequence[Path | str]) -> Inputs:
    """The record files under `paths` (folders are searched through; a file must be named
    like one). RecordsError for a path that is missing or holds no record file."""
    found = Inputs({kind: [] for kind in FILE_GLOBS})
    for given in paths:
        path = Path(given)
        if path.is_dir():
            before = sum(len(v) for v in found.files.values())
            for kind, pattern in FILE_GLOBS.items():
                found.files[kind] += sorted(p for p in path.rglob(pattern) if p.is_file())
            if sum(len(v) for v in found.files.values()) == before:
                raise RecordsError(f"{path}: no record files in it (looked for "
                                   f"{' and '.join(FILE_GLOBS.values())})")
        elif path.is_file():
            kinds = [k for k, pattern in FILE_GLOBS.items() if fnmatch.fnmatch(path.name, pattern)]
            if not kinds:
                raise RecordsError(f"{path}: not a record file (names are "
                                   f"{' or '.join(FILE_GLOBS.values())})")
            found.files[kinds[0]].append(path)
        else:
            raise RecordsError(f"{path}: no such file or folder")
    return found


def _problem(kind: str) -> Column:
    """The first thing wrong with a record, or null."""
    schema = SCHEMAS[kind]
    versions = sorted(SUPPORTED[kind])
    checks: list[tuple[Column, Column]] = [
        (F.col(CORRUPT).isNotNull(), F.lit("not a JSON object with the fields and types of "
                                            f"a {kind} record")),
        (F.col("kind").isNull() | (F.col("kind") != kind),
         F.concat(F.lit(f"kind is not {kind}: "), F.coalesce(F.col("kind"), F.lit("none")))),
        (F.col("schema_version").isNull() | ~F.col("schema_version").isin(versions),
         F.concat(F.lit("schema_version "),
                  F.coalesce(F.col("schema_version").cast("string"), F.lit("none")),
                  F.lit(f" is not one this pipeline reads ({', '.join(map(str, versions))})"))),
    ] + [(F.col(name).isNull(), F.lit(f"no {name}")) for name in required(schema)]
    first, *rest = checks
    chain = F.when(first[0], first[1])
    for condition, reason in rest:
        chain = chain.when(condition, reason)
    return chain


def read_json(spark: SparkSession, files: Sequence[Path | str], kind: str) -> DataFrame:
    """The records of `files` with the kind's schema, plus SOURCE and PROBLEM columns."""
    frame = (spark.read.schema(with_corrupt(SCHEMAS[kind]))
             .option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
             .option("timestampFormat", TIMESTAMP_FORMAT)
             .json([str(f) for f in files]))
    return (frame.withColumn(SOURCE, F.input_file_name()).withColumn(PROBLEM, _problem(kind))
            .drop(CORRUPT))


@dataclass
class Staged:
    """The staged records of one kind."""

    #: the good records, as the jobs read them
    records: DataFrame
    good: int
    #: bad records skipped
    bad: int


def stage(spark: SparkSession, files: Sequence[Path | str], kind: str, where: Path | str,
          *, skip_bad: bool = False) -> Staged:
    """Copy the records into Parquet at `where` and count the good and the bad ones in one
    pass. RecordsError when there are bad records and not `skip_bad`."""
    read_json(spark, files, kind).write.mode("overwrite").parquet(str(where))
    staged = spark.read.parquet(str(where))
    counts = (staged.groupBy(PROBLEM)
              .agg(F.count(F.lit(1)).alias("n"), F.min(SOURCE).alias("first")).collect())
    bad = sorted((row for row in counts if row[PROBLEM] is not None), key=lambda r: -r["n"])
    count = sum(int(row["n"]) for row in bad)
    if count and not skip_bad:
        worst = bad[0]
        raise RecordsError(
            f"{count} bad {kind} record{'s' if count > 1 else ''}: {worst[PROBLEM]} "
            f"({worst['n']} such, first in {_local(worst['first'])}); fix or remove them, "
            "or pass --skip-bad")
    good = sum(int(row["n"]) for row in counts if row[PROBLEM] is None)
    return Staged(staged.where(F.col(PROBLEM).isNull()).drop(SOURCE, PROBLEM), good, count)


def _local(uri: str) -> str:
    return uri[len("file://"):] if uri.startswith("file://") else uri
