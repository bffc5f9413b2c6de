"""What the HTML report reads to show the trend, flakiness, regression and bucket sections:
one JSON file, `report-data.json`, next to the Parquet outputs, bounded whatever the input's
size (the last TREND_POINTS runs per broker, the top TOP rows of each list).

    {"schema_version": 1, "generated": ISO time,
     "inputs": {"case_records": N, "finding_records": N, "bad_records_skipped": N},
     "trend": {BROKER: [{"run_id", "timestamp", "build", "broker_version", "executions",
                         "passed", "failed", "error", "pass_rate", "must_failing",
                         "statements_failing"}, ... oldest first]},
     "flaky": [{"broker", "build", "case_id", "version", "executions", "outcomes",
                "flake_rate", "statements", "first_seen", "last_seen", "passed", "failed",
                "error"}, ... highest flake_rate first],
     "regressions": [{"broker", "run_id", "timestamp", "previous_run_id", "statement",
                      "cases", "case_ids"}, ... newest first],
     "buckets": [{"bucket_id", "classification", "statement", "shape", "findings", "hits",
                  "brokers", "seeds", "first_seen", "last_seen", "example_finding",
                  "example_replay", "smallest_input_octets"}, ... most findings first]}

A section whose job did not run (no records of its kind) is an empty list or object. The
file's JSON Schema is conformance/report/history.schema.json; report.html beside it shows
the sections as a page (`run --html --history` adds them to a run's page)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from conformance.files import write_atomic
from conformance.report.history import FILE, PAGE, SCHEMA_VERSION
from conformance.report.html import render_history
from conformance.report.records import timestamp

TREND_POINTS = 500
TOP = 100

_TREND = ("run_id", "timestamp", "build", "broker_version", "executions", "passed", "failed",
          "error", "pass_rate", "must_failing", "statements_failing")
_FLAKY = ("broker", "build", "case_id", "version", "executions", "outcomes", "flake_rate",
          "statements", "first_seen", "last_seen", "passed", "failed", "error")
_REGRESSED = ("broker", "run_id", "timestamp", "previous_run_id", "statement", "cases",
              "case_ids")
_BUCKETS = ("bucket_id", "classification", "statement", "shape", "findings", "hits",
            "brokers", "seeds", "first_seen", "last_seen", "example_finding",
            "example_replay", "smallest_input_octets")


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return timestamp(value if value.tzinfo else value.replace(tzinfo=UTC))
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _rows(frame: DataFrame, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{name: _plain(row[name]) for name in fields}
            for row in frame.select(*fields).collect()]


def _read(spark: SparkSession, path: Path) -> DataFrame | None:
    if not path.is_dir() or not any(path.rglob("*.parquet")):
        return None  # the job did not run, or found nothing
    return spark.read.parquet(str(path))


def report_data(spark: SparkSession, output: Path, inputs: dict[str, int]) -> dict[str, Any]:
    data: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "generated": timestamp(),
                            "inputs": inputs, "trend": {}, "flaky": [], "regressions": [],
                            "buckets": []}
    points = _read(spark, output / "trends" / "runs")
    if points is not None:
        newest = Window.partitionBy("broker").orderBy(F.desc("timestamp"), F.desc("run_id"))
        kept = (points.withColumn("n", F.row_number().over(newest))
                .where(F.col("n") <= TREND_POINTS).orderBy("broker", "timestamp", "run_id"))
        for row in kept.select("broker", *_TREND).collect():
            data["trend"].setdefault(row["broker"], []).append(
                {name: _plain(row[name]) for name in _TREND})
    flaky = _read(spark, output / "flaky")
    if flaky is not None:
        data["flaky"] = _rows(flaky.orderBy(F.desc("flake_rate"), F.desc("executions"),
                                            "broker", "case_id", "version").limit(TOP), _FLAKY)
    regressed = _read(spark, output / "regressions" / "statements")
    if regressed is not None:
        data["regressions"] = _rows(regressed.orderBy(F.desc("timestamp"), "broker",
                                                      "statement").limit(TOP), _REGRESSED)
    buckets = _read(spark, output / "buckets")
    if buckets is not None:
        data["buckets"] = _rows(buckets.orderBy(F.desc("findings"), "bucket_id").limit(TOP),
                                _BUCKETS)
    return data


def write_report_data(spark: SparkSession, output: Path, inputs: dict[str, int]) -> Path:
    """report-data.json, and report.html showing it."""
    path = output / FILE
    data = report_data(spark, output, inputs)
    write_atomic(path, (json.dumps(data, indent=1, ensure_ascii=True) + "\n").encode("ascii"))
    write_atomic(output / PAGE, render_history(data).encode("utf-8"))
    return path
