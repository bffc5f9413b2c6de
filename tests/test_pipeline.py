"""The Spark pipeline, run for real in local mode on small data: the record schemas against
the writers, bad records, each job's answers on records built to have known answers, the
shape of fuzz inputs, the distributed fuzz campaign against the reference broker,
and the `pipeline` verbs end to end on records of real runs.

One SparkSession serves the whole file (starting Spark is the dominant cost); the verbs
start their own JVM in a child process, as a user's would."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyspark
import pytest
from helpers import cli
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    TimestampType,
)

from conformance.fuzz.network.finding_records import FINDING_FIELDS, FINDING_NULLABLE
from conformance.pipeline import jobs, runs
from conformance.pipeline.distributed import TaskSettings, run_campaign, write_findings
from conformance.pipeline.load import RecordsError, find_inputs, stage
from conformance.pipeline.runner import run_jobs
from conformance.pipeline.schemas import CASE_RESULT, FUZZ_FINDING, required
from conformance.pipeline.shape import input_shape
from conformance.pipeline.spark import (
    SparkSettings,
    Started,
    first_line,
    spark_home,
    start,
    stop,
)
from conformance.report.history import load_history

pytestmark = pytest.mark.heavy


@pytest.fixture(scope="session")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    session = start(SparkSettings(master="local[2]", cds=False,
                                  cache_dir=tmp_path_factory.mktemp("spark-cache")))
    yield session
    stop(session)


@pytest.fixture
def spark(started: Started) -> SparkSession:
    return started.spark


# -- schemas against the writers -----------------------------------------------------------

_PYTHON: dict[type, type[DataType]] = {str: StringType, int: LongType, float: DoubleType,
                                       bool: BooleanType}


def _agrees(value: Any, kind: DataType) -> bool:
    if isinstance(kind, TimestampType):
        return isinstance(value, str) and value.endswith("Z")
    if isinstance(kind, ArrayType):
        return isinstance(value, list) and all(_agrees(v, kind.elementType) for v in value)
    if isinstance(kind, DoubleType):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(kind, LongType):
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, {StringType: str, BooleanType: bool}[type(kind)])


@pytest.mark.slow
def test_case_records_of_a_real_run_agree_with_the_struct_type(
        spark: SparkSession, real_records: Path, tmp_path: Path) -> None:
    lines = [json.loads(line) for path in sorted(real_records.glob("results-*.jsonl"))
             for line in path.read_text().splitlines()]
    fields = {f.name: f for f in CASE_RESULT.fields}
    for record in lines:
        assert record.keys() == fields.keys()
        for name, value in record.items():
            if value is None:
                assert fields[name].nullable, name
            else:
                assert _agrees(value, fields[name].dataType), (name, value)
    assert {r["broker_server"] for r in lines} == {"stomp-conformance/0.1.0"}
    # Spark reads every record, every field, back as written.
    staged = stage(spark, find_inputs([real_records]).of("case_result"), "case_result",
                   tmp_path / "staged")
    assert (staged.good, staged.bad) == (len(lines), 0)
    rows = {(r["run_id"], r["case_id"], r["version"]): r for r in staged.records.collect()}
    assert len(rows) == len(lines)
    for record in lines:
        row = rows[(record["run_id"], record["case_id"], record["version"])]
        for name in required(CASE_RESULT):
            if name == "timestamp":
                stamp = row[name].replace(tzinfo=UTC)  # the session's time zone is UTC
                assert stamp == datetime.fromisoformat(record[name].replace("Z", "+00:00"))
            else:
                assert row[name] == record[name], name


def test_finding_fields_agree_with_the_struct_type() -> None:
    fields = {f.name: f for f in FUZZ_FINDING.fields}
    assert fields.keys() == FINDING_FIELDS.keys()
    for name, python in FINDING_FIELDS.items():
        kind = fields[name].dataType
        expected = TimestampType if name == "timestamp" else _PYTHON[python]
        assert isinstance(kind, expected), name
        if name in FINDING_NULLABLE:
            assert fields[name].nullable, name
    # required here means never None there
    assert not set(required(FUZZ_FINDING)) & FINDING_NULLABLE


# -- bad records ---------------------------------------------------------------------------

def _case(run: str, when: str, case: str, outcome: str, *, broker: str = "rabbitmq@h:1",
          server: str | None = "RabbitMQ/3.12.0", version: str = "1.2",
          statements: tuple[str, ...] = ("s.one",), level: str = "must") -> dict[str, Any]:
    return {"schema_version": 1, "kind": "case_result", "run_id": run,
            "timestamp": f"2024-05-{when}.000Z", "tool_version": "0.1.0", "broker_id": broker,
            "broker_server": server, "case_id": case, "version": version,
            "statements": list(statements), "area": "a", "level": level, "outcome": outcome,
            "duration_ms": 1.5, "message": ""}


def _write(folder: Path, name: str, records: list[dict[str, Any]] | list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in records))
    return path


def test_bad_records_stop_the_pipeline_with_one_line(spark: SparkSession,
                                                     tmp_path: Path) -> None:
    good = _case("r1", "01T10:00:00", "c.a", "passed")
    bad = (dict(good, kind="fuzz_finding"), dict(good, schema_version=9),
           {k: v for k, v in good.items() if k != "case_id"}, dict(good, duration_ms="slow"))
    path = _write(tmp_path / "in", "results-r1.jsonl",
                  [json.dumps(good), "{not json", *map(json.dumps, bad)])
    with pytest.raises(RecordsError) as caught:
        stage(spark, [path], "case_result", tmp_path / "staged")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("5 bad case_result records")
    assert str(path) in message
    staged = stage(spark, [path], "case_result", tmp_path / "staged", skip_bad=True)
    assert (staged.good, staged.bad) == (1, 5)
    assert [r["case_id"] for r in staged.records.collect()] == ["c.a"]


def test_inputs_name_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(RecordsError, match="no such file or folder"):
        find_inputs([tmp_path / "nowhere"])
    with pytest.raises(RecordsError, match="no record files in it"):
        find_inputs([tmp_path])
    other = _write(tmp_path, "notes.jsonl", ["{}"])
    with pytest.raises(RecordsError, match="not a record file"):
        find_inputs([other])


# -- the jobs ------------------------------------------------------------------------------

@pytest.fixture
def history(spark: SparkSession, tmp_path: Path) -> DataFrame:
    """Three RabbitMQ runs (two builds) and one ActiveMQ run, with known answers:
    r1 A,B pass; r2 (same build) A fails; r3 (new build) A passes, B errors."""
    records = [
        _case("r1", "01T10:00:00", "c.a", "passed"), _case("r1", "01T10:00:00", "c.b", "passed"),
        _case("r1", "01T10:00:00", "c.skip", "skipped"),
        _case("r2", "02T10:00:00", "c.a", "failed"), _case("r2", "02T10:00:00", "c.b", "passed"),
        _case("r2", "02T10:00:00", "c.skip", "passed"),
        _case("r3", "03T10:00:00", "c.a", "passed", server="RabbitMQ/3.13.0"),
        _case("r3", "03T10:00:00", "c.b", "error", server="RabbitMQ/3.13.0",
              statements=("s.one", "s.two")),
        _case("a1", "01T09:00:00", "c.a", "failed", broker="activemq@h:2", server=None),
    ]
    path = _write(tmp_path / "in", "results-all.jsonl", records)
    frame = stage(spark, [path], "case_result", tmp_path / "staged").records
    return jobs.cases(frame)


def test_cases_derive_broker_build_and_version(history: DataFrame) -> None:
    seen = {(r["broker"], r["build"], r["broker_version"])
            for r in history.select("broker", "build", "broker_version").collect()}
    assert seen == {("rabbitmq", "RabbitMQ/3.12.0", "3.12.0"),
                    ("rabbitmq", "RabbitMQ/3.13.0", "3.13.0"),
                    ("activemq", "activemq@h:2", "unknown")}


def test_matrix_per_run_and_per_version(history: DataFrame) -> None:
    matrix = jobs.matrix(history)
    by_run = {(r["broker"], r["run_id"], r["statement"]): r for r in matrix.by_run.collect()}
    assert by_run[("rabbitmq", "r1", "s.one")]["status"] == "passed"
    assert by_run[("rabbitmq", "r1", "s.one")]["skipped"] == 1
    assert by_run[("rabbitmq", "r2", "s.one")]["status"] == "failed"
    assert by_run[("rabbitmq", "r3", "s.one")]["status"] == "error"
    assert by_run[("rabbitmq", "r3", "s.two")]["error"] == 1
    assert by_run[("rabbitmq", "r2", "s.one")]["pass_rate"] == pytest.approx(2 / 3)
    by_version = {(r["broker_version"], r["statement"]): r
                  for r in matrix.by_version.where("broker = 'rabbitmq'").collect()}
    old = by_version[("3.12.0", "s.one")]
    assert (old["runs"], old["executions"], old["passed"], old["failed"], old["runs_failing"]) \
        == (2, 6, 4, 1, 1)
    assert old["status"] == "failed"
    assert by_version[("3.13.0", "s.two")]["status"] == "error"


def test_regressions_between_runs_of_one_broker(history: DataFrame) -> None:
    changes = {(r["run_id"], r["case_id"], r["previous_run_id"], r["previous_outcome"],
                r["outcome"], r["change"]) for r in jobs.regressions(history).collect()}
    assert changes == {("r2", "c.a", "r1", "passed", "failed", "regressed"),
                       ("r3", "c.a", "r2", "failed", "passed", "fixed"),
                       ("r3", "c.b", "r2", "passed", "error", "regressed")}
    statements = {(r["run_id"], r["statement"], r["cases"]) for r in
                  jobs.regressed_statements(jobs.regressions(history)).collect()}
    assert statements == {("r2", "s.one", 1), ("r3", "s.one", 1), ("r3", "s.two", 1)}


def test_regressions_pair_a_case_only_with_the_run_just_before(spark: SparkSession,
                                                                tmp_path: Path) -> None:
    """Worst outcome of a case run twice; outcomes that say nothing (skipped, unsupported)
    change nothing; a case missing from the previous run is not compared with an older
    one; another broker's runs are not this broker's previous ones."""
    c = _case
    records = [
        c("r1", "01T10:00:00", "c.a", "passed"), c("r1", "01T10:00:00", "c.b", "passed"),
        c("r1", "01T10:00:00", "c.c", "skipped"), c("r1", "01T10:00:00", "c.d", "passed"),
        c("r2", "02T10:00:00", "c.a", "passed", statements=("s.two",)),
        c("r2", "02T10:00:01", "c.a", "error", statements=("s.two",)),
        c("r2", "02T10:00:00", "c.b", "unsupported"), c("r2", "02T10:00:00", "c.c", "failed"),
        c("r2", "02T10:00:00", "c.e", "failed"),
        c("r3", "03T10:00:00", "c.d", "failed"), c("r3", "03T10:00:00", "c.c", "passed"),
        c("x1", "02T12:00:00", "c.a", "failed", broker="activemq@h:2"),
    ]
    frame = stage(spark, [_write(tmp_path / "in", "results-edge.jsonl", records)],
                  "case_result", tmp_path / "staged").records
    rows = {(r["run_id"], r["case_id"], r["previous_run_id"], r["previous_outcome"],
             r["outcome"], r["change"], tuple(r["statements"]))
            for r in jobs.regressions(jobs.cases(frame)).collect()}
    assert rows == {("r2", "c.a", "r1", "passed", "error", "regressed", ("s.two",)),
                    ("r3", "c.c", "r2", "failed", "passed", "fixed", ("s.one",))}


def test_runs_of_a_broker_in_order_of_time_then_run_id(spark: SparkSession,
                                                       tmp_path: Path) -> None:
    """seq counts a broker's runs from 0, by their first record, ties by run_id; the run
    before is its broker's; b numbers the brokers in their sorted order; a run whose records
    name two servers is one run, its build the greater name."""
    c = _case
    records = [c("r2", "01T10:00:00", "c.a", "passed"), c("r1", "01T10:00:00", "c.a", "passed"),
               c("r0", "02T10:00:00", "c.a", "passed"),
               c("r0", "02T09:00:00", "c.b", "passed", server="RabbitMQ/3.13.0"),
               c("x", "01T09:00:00", "c.a", "failed", broker="activemq@h:2", server=None)]
    frame = stage(spark, [_write(tmp_path / "in", "results-order.jsonl", records)],
                  "case_result", tmp_path / "staged").records
    table = runs.of(jobs.cases(frame))
    rows = sorted((r["b"], r["seq"], r["broker"], r["run_id"], r["previous_run_id"],
                   r["build"], r["previous_build"]) for r in table.order.to_pylist())
    assert rows == [(1, 0, "activemq", "x", None, "activemq@h:2", None),
                    (2, 0, "rabbitmq", "r1", None, "RabbitMQ/3.12.0", None),
                    (2, 1, "rabbitmq", "r2", "r1", "RabbitMQ/3.12.0", "RabbitMQ/3.12.0"),
                    (2, 2, "rabbitmq", "r0", "r2", "RabbitMQ/3.13.0", "RabbitMQ/3.12.0")]
    assert table.by_hash and table.by_names
    assert sorted(table.names.to_pylist(), key=lambda r: r["g"]) == [
        {"broker": "activemq", "build": "activemq@h:2", "broker_version": "unknown", "g": 1},
        {"broker": "rabbitmq", "build": "RabbitMQ/3.12.0", "broker_version": "3.12.0", "g": 2},
        {"broker": "rabbitmq", "build": "RabbitMQ/3.13.0", "broker_version": "3.13.0", "g": 3}]


def test_jobs_answer_alike_whether_runs_are_found_by_hash_or_by_name(
        history: DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    """The jobs find a record's run by a 64-bit hash of it where the hashes tell every run
    apart, else by its names (here, every hash alike): the same answers either way."""
    def answers(cases: DataFrame) -> dict[str, list[str]]:
        frames = {"matrix": jobs.matrix_by_run(cases), "regressions": jobs.regressions(cases),
                  "flaky": jobs.flaky(cases)}
        return {name: sorted(map(repr, frame.collect())) for name, frame in frames.items()}

    by_hash = answers(history)
    monkeypatch.setattr(runs, "build_hash", lambda: F.lit(0).cast("long"))
    assert answers(history.select("*")) == by_hash  # a new frame: nothing kept of the first


def test_flaky_means_mixed_outcomes_on_one_build(history: DataFrame) -> None:
    rows = jobs.flaky(history).collect()
    # c.skip was skipped once and passed once: a skip says nothing about the broker
    assert [(r["build"], r["case_id"], r["outcomes"], r["flake_rate"]) for r in rows] == [
        ("RabbitMQ/3.12.0", "c.a", ["failed", "passed"], 0.5)]


def test_flaky_counts_an_outcome_it_does_not_name(spark: SparkSession, tmp_path: Path) -> None:
    records = [_case("r1", "01T10:00:00", "c.a", "passed"),
               _case("r2", "02T10:00:00", "c.a", "weird")]
    frame = stage(spark, [_write(tmp_path / "in", "results-odd.jsonl", records)],
                  "case_result", tmp_path / "staged").records
    rows = jobs.flaky(jobs.cases(frame)).collect()
    assert [(r["outcomes"], r["executions"], r["flake_rate"]) for r in rows] == [
        (["passed", "weird"], 2, 0.5)]


def test_trends_per_run_and_per_day(history: DataFrame) -> None:
    trends = jobs.trends(history, jobs.matrix(history).by_run)
    points = {r["run_id"]: r for r in trends.runs.collect()}
    assert points["r1"]["pass_rate"] == 1.0 and points["r1"]["statements_failing"] == 0
    assert points["r2"]["must_failing"] == 1 and points["r2"]["statements_failing"] == 1
    assert points["r3"]["statements_failing"] == 2
    assert points["a1"]["pass_rate"] == 0.0
    days = {(r["broker"], str(r["day"])): r["runs"] for r in trends.daily.collect()}
    assert days == {("rabbitmq", "2024-05-01"): 1, ("rabbitmq", "2024-05-02"): 1,
                    ("rabbitmq", "2024-05-03"): 1, ("activemq", "2024-05-01"): 1}


def test_a_job_that_finds_nothing_writes_an_empty_table(spark: SparkSession,
                                                      tmp_path: Path) -> None:
    path = _write(tmp_path / "in", "results-one.jsonl",
                  [_case("r1", "01T10:00:00", "c.a", "passed")])
    outcome = run_jobs(spark, find_inputs([path]), tmp_path / "out",
                       ["matrix", "regressions", "flaky", "buckets", "trends"])
    rows = {name: count for name, _, count in outcome.written}
    assert rows["regressions/cases"] == rows["flaky"] == 0 and rows["trends/runs"] == 1
    assert outcome.notes == ["no fuzz_finding records (findings*.jsonl) in the input: "
                             "buckets skipped"]
    data = json.loads((tmp_path / "out" / "report-data.json").read_text())
    assert data["regressions"] == data["flaky"] == data["buckets"] == []
    assert [p["run_id"] for p in data["trend"]["rabbitmq"]] == ["r1"]


# -- buckets -------------------------------------------------------------------------------

def test_input_shape_keeps_structure_and_drops_particulars() -> None:
    one = input_shape("SEND\ndestination:/q/a\nx-a:1\n\nhello\x00")
    two = input_shape("\nSEND\ndestination:/q/zzz\nx-other:text\n\nbye bye\x00")
    assert one == two == "SEND{body,destination,x-*}"
    assert input_shape("BEGIN\ntransaction:t\\q\n\n\x00") == "BEGIN{bad-escape,transaction}"
    assert input_shape("SEND\r\nno colon here\r\n") == "SEND{crlf,no-blank-line,no-colon,no-nul}"
    assert input_shape("ACK\n\n\x00ACK\n\n\x00NACK\n\n\x00") == "ACK{} NACK{}"
    assert input_shape("\x01\x02\n\n\x00") == "?{}"
    assert input_shape("") == "empty" and input_shape(None) is None
    assert len(input_shape("".join(f"C{i}\n\n\x00" for i in range(500))) or "") <= 401


def _finding(n: int, kind: str, statement: str, data: str | None,
             broker: str = "reference@embedded+f", about: str = "",
             signed: bool = True) -> dict[str, Any]:
    rule = statement.removesuffix("-v11")
    return {"schema_version": 1, "kind": "fuzz_finding", "campaign_id": "c1",
            "finding_id": f"{kind}-{n:010x}",
            "signature": " ".join(filter(None, (kind, rule, about))) if signed else None,
            "timestamp": f"2024-05-01T10:00:0{n}.000Z",
            "tool_version": "0.1.0", "broker_id": broker, "broker_server": "x/1",
            "generator": "grammar", "classification": kind, "statement": statement,
            "grade": "failed", "mutation": f"m{n}", "version": "1.2", "expect": "error",
            "detail": "d", "ended": "RECEIPT", "input_octets": n + 10, "original_octets": 99,
            "response_octets": 5, "minimised": True, "confirmed": True, "hits": 2, "seed": n,
            "input_index": n, "found_after_s": 0.5, "found_after_inputs": 3,
            "replay": f"stomp-conformance replay f{n}.json", "input": data}


def test_findings_bucket_by_signature_whatever_their_input(spark: SparkSession,
                                                           tmp_path: Path) -> None:
    records = [
        _finding(1, "accepted-silently", "s.x", "SEND\ndestination:/a\n\nbody\x00"),
        _finding(2, "accepted-silently", "s.x-v11", "BEGIN\ntransaction:t\\q\n\n\x00",
                 broker="rabbitmq@h:1"),                          # another shape and version
        _finding(3, "accepted-silently", "s.x", None),            # no input: a coarse shape
        _finding(4, "error-without-close", "s.x", "SEND\n\n\x00"),       # another class
        _finding(5, "accepted-silently", "s.y", "SEND\n\n\x00"),         # another statement
        _finding(6, "invalid-response", "s.y", "SEND\n\n\x00", about="MESSAGE"),
        _finding(7, "invalid-response", "s.y", "SEND\n\n\x00", about="ERROR"),  # another frame
        _finding(8, "accepted-silently", "s.y", "ACK\n\n\x00", signed=False),  # older record
    ]
    path = _write(tmp_path / "in", "findings.jsonl", records)
    frame = stage(spark, [path], "fuzz_finding", tmp_path / "staged").records
    rows = {r["signature"]: r for r in jobs.buckets(jobs.findings(frame)).collect()}
    assert sorted(rows) == [
        "accepted-silently s.x", "accepted-silently s.y", "error-without-close s.x",
        "invalid-response s.y ERROR", "invalid-response s.y MESSAGE"]
    merged = rows["accepted-silently s.x"]
    assert merged["findings"] == 3 and merged["hits"] == 6 and merged["shapes"] == 3
    assert merged["statement"] == "s.x" and merged["statements"] == ["s.x", "s.x-v11"]
    assert merged["brokers"] == ["rabbitmq@h:1", "reference@embedded+f"]
    assert merged["smallest_input_octets"] == 11
    assert merged["example_replay"] == "stomp-conformance replay f1.json"
    assert merged["shape"] == "SEND{body,destination}"  # the smallest reproducer's
    assert rows["accepted-silently s.y"]["findings"] == 2  # the older record joins by statement
    assert rows["invalid-response s.y MESSAGE"]["statement"] == "s.y"
    assert len({r["bucket_id"] for r in rows.values()}) == 5


# -- the distributed campaign --------------------------------------------------------------

@pytest.mark.slow
def test_campaign_spreads_seeds_and_brokers_and_buckets_its_findings(
        spark: SparkSession, tmp_path: Path) -> None:
    settings = TaskSettings(root=str(tmp_path / "campaigns"), jobs=4, minimise=0.5)
    results = run_campaign(spark, brokers=["reference+error-without-close",
                                           "reference@127.0.0.1:9"],
                           seeds=[0, 1], budget=3.0, settings=settings)
    assert [(r.broker, r.seed) for r in results] == [
        ("reference+error-without-close", 0), ("reference+error-without-close", 1),
        ("reference@127.0.0.1:9", 0), ("reference@127.0.0.1:9", 1)]
    fuzzed, dead = results[:2], results[2:]
    assert all(r.error is None and r.inputs > 0 and r.records for r in fuzzed)
    assert all(r.error and "cannot fuzz reference@127.0.0.1:9" in r.error for r in dead)
    # each task has its campaign folder; every record names its seed and its broker
    assert {p.name for p in (tmp_path / "campaigns").iterdir()} >= {
        "reference_error-without-close-seed0", "reference_error-without-close-seed1"}
    records = [json.loads(line) for r in fuzzed for line in r.records]
    assert {r["seed"] for r in records} == {0, 1}
    assert {r["broker_id"] for r in records} == {"reference@embedded+error-without-close"}
    path = write_findings(results, tmp_path / "out" / "findings", "t")
    outcome = run_jobs(spark, find_inputs([path]), tmp_path / "out", ["buckets"])
    assert outcome.records == {"fuzz_finding": len(records)}
    buckets = spark.read.parquet(str(tmp_path / "out" / "buckets")).collect()
    assert {b["classification"] for b in buckets} == {"error-without-close"}
    assert sum(b["findings"] for b in buckets) == len(records)
    data = json.loads((tmp_path / "out" / "report-data.json").read_text())
    assert len(data["buckets"]) == len(buckets) and data["trend"] == {}


#: planted fault -> the one bug (bucket signature) its campaign must find
PLANTED = {
    "error-without-close": "error-without-close error.close-after",
    "accept-undefined-escape": "accepted-silently value-encoding.undefined-escape-fatal",
    "limit-close-without-error": "closed-without-error size-limits.error-then-close",
}


@pytest.mark.slow
def test_each_planted_fault_is_one_bucket_of_its_own(spark: SparkSession,
                                                     tmp_path: Path) -> None:
    """Whatever inputs, mutations and versions showed a fault, its findings are one bug,
    and no bucket holds the findings of two faults (benchmarks/buckets.py measures more)."""
    settings = TaskSettings(root=str(tmp_path / "campaigns"), jobs=4, minimise=0.5)
    results = run_campaign(spark, brokers=[f"reference+{f}" for f in PLANTED], seeds=[3],
                           budget=4.0, settings=settings)
    assert all(r.error is None and r.records for r in results), results
    path = write_findings(results, tmp_path / "out" / "findings", "t")
    run_jobs(spark, find_inputs([path]), tmp_path / "out", ["buckets"], report=False)
    buckets = spark.read.parquet(str(tmp_path / "out" / "buckets")).collect()
    for fault, bug in PLANTED.items():
        mine = [b for b in buckets if f"reference@embedded+{fault}" in b["brokers"]]
        assert [b["signature"] for b in mine] == [bug], (fault, mine)
    assert all(len(b["brokers"]) == 1 for b in buckets)
    # one bucket, where inputs of several shapes, mutations and versions showed the fault
    (left_open,) = (b for b in buckets if b["signature"] == PLANTED["error-without-close"])
    assert left_open["findings"] == 1 and left_open["hits"] > 1


# -- the verbs, end to end -----------------------------------------------------------------

def _no_java_on(text: str) -> None:
    assert "Exception" not in text and "\tat " not in text and "WARN" not in text, text


@pytest.mark.slow
def test_pipeline_all_on_real_runs_then_fuzz_from_the_cds_archive(
        local_pipeline: Path, tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(local_pipeline / "cache")}
    out = local_pipeline / "out"
    stderr = (local_pipeline / "stderr").read_text()
    assert (local_pipeline / "returncode").read_text() == "0", stderr
    _no_java_on(stderr)
    assert "writing a class-data archive" in stderr
    assert "no fuzz_finding records" in (local_pipeline / "stdout").read_text()  # said so
    for table in ("matrix/by_run", "matrix/by_version", "regressions/cases", "flaky",
                  "trends/runs", "trends/daily"):
        assert any((out / table).glob("broker=reference/*.parquet")), table
    data = json.loads((out / "report-data.json").read_text())
    assert [p["failed"] > 0 for p in data["trend"]["reference"]] == [False, True]
    regressed = {r["statement"] for r in data["regressions"]}
    assert "value-encoding.no-trim" in regressed
    # both runs are one build: the faulty run's failures make those cases flaky
    assert data["flaky"] and {f["build"] for f in data["flaky"]} == {"stomp-conformance/0.1.0"}
    # report.html shows the same data; `run --history` reads it back for a run's page
    page = (out / "report.html").read_text("utf-8")
    assert 'data-broker="reference" data-runs="2"' in page
    assert page.count('<circle class="failing"') == 1
    assert f"Regressions: statements that passed in a broker's previous run and fail now " \
           f"({len(data['regressions'])})" in page
    assert f"Flaky cases: mixed outcomes on one broker build ({len(data['flaky'])})" in page
    assert load_history(out) == data
    assert list((local_pipeline / "cache" / "stomp-conformance" / "spark").glob("classes-*.jsa"))

    fuzz = cli("pipeline", "fuzz", "--broker", "reference+error-without-close", "--seeds", "1",
               "--time", "3s", "--minimise", "0.5", "--output", str(tmp_path / "fuzz"),
               "--master", "local[1]", "--cds", env=env)
    assert fuzz.returncode in (0, 1), fuzz.stderr
    _no_java_on(fuzz.stderr)
    assert "class-data archive used" in fuzz.stderr
    assert "distinct bugs" in fuzz.stdout
    assert json.loads((tmp_path / "fuzz" / "report-data.json").read_text())["buckets"]


def test_bad_input_is_one_line_and_exit_2_without_starting_spark(tmp_path: Path) -> None:
    (tmp_path / "results-x.jsonl").write_text("{}\n")
    for args, says in (
            (["pipeline", "matrix", "--input", str(tmp_path / "none"), "--output", "o"],
             "no such file or folder"),
            (["pipeline", "buckets", "--input", str(tmp_path), "--output", "o"],
             "no fuzz_finding records"),
            (["pipeline", "fuzz", "--broker", "rabbitmq", "--output", "o"], "HOST:PORT"),
            (["pipeline", "fuzz", "--broker", "rabbitmq@10.1.2.3:61613", "--output", "o"],
             "not a loopback address"),
            (["pipeline", "fuzz", "--time", "soon", "--output", "o"], "--time"),
            (["pipeline", "matrix", "--input", str(tmp_path), "--output",
              str(tmp_path / "results-x.jsonl")], "not a folder")):
        done = cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], (args, done.stderr)


def test_first_line_of_a_java_error_drops_the_frames() -> None:
    error = RuntimeError("An error occurred while calling o42.parquet.\n"
                         ": java.io.IOException: No space left on device\n"
                         "\tat org.apache.hadoop.fs.Foo.bar(Foo.java:1)\n")
    assert first_line(error) == "IOException: No space left on device"
    assert first_line(RuntimeError("[PATH_NOT_FOUND] Path does not exist: x.")) == \
        "[PATH_NOT_FOUND] Path does not exist: x."


def test_the_driver_listens_on_loopback_for_local_mode_and_a_master_on_loopback() -> None:
    on = ["local[2]", "local", "spark://127.0.0.1:7077", "spark://localhost:7077",
          "spark://[::1]:7077", "spark://127.0.0.1:7077,127.0.0.2:7078"]
    off = ["spark://10.0.0.5:7077", "spark://spark-master:7077", "yarn", "k8s://h:443",
           "spark://127.0.0.1:7077,10.0.0.5:7077"]
    assert [SparkSettings(master=m).loopback for m in on + off] == \
        [True] * len(on) + [False] * len(off)


def test_the_driver_runs_from_a_home_without_mllib(started: Started, tmp_path: Path) -> None:
    if "SPARK_HOME" in os.environ:
        pytest.skip("SPARK_HOME is set here, and a session then runs from that home as it is")
    jvm = started.spark.sparkContext._jvm
    assert jvm is not None
    home = Path(str(jvm.java.lang.System.getenv("SPARK_HOME")))
    assert home.parent == started.settings.cache
    assert str(home / "jars") in str(jvm.java.lang.System.getProperty("java.class.path"))
    shipped = Path(pyspark.__file__).parent / "jars"
    jars = {p.name for p in (home / "jars").glob("*.jar")}
    assert jars == {p.name for p in shipped.glob("*.jar")} - \
        {p.name for p in shipped.glob("spark-mllib_*.jar")}
    assert all((home / "jars" / j).resolve() == shipped / j for j in jars)
    assert "SPARK_HOME" not in os.environ  # set while the JVM launches only
    # made once and whole: the next call finds it; a killed session's half-made copy goes
    made = spark_home(tmp_path)
    assert spark_home(tmp_path) == made and (made / "bin" / "spark-submit").is_file()
    stale = started.settings.cache / f"{made.name}.1.part"
    (stale / "jars").mkdir(parents=True)
    os.utime(stale, (0, 0))
    assert start(started.settings).spark is started.spark  # the running session
    assert not stale.exists()
