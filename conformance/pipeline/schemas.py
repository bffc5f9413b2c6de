"""The StructType of each record kind the pipeline reads (reports/README.md, 'JSON Lines records').

Records are JSON Lines written by `conformance.report.records`; every record carries
`schema_version` and `kind`. Spark reads them with these schemas, never by inference, so a
field that changes type is a bad record, not a silently different column. A field a writer
adds must be added here, with its version: tests/test_pipeline.py checks both sides agree.

Fields marked nullable=False are required: the loader counts a record without one as bad
(Spark's JSON reader itself makes every field nullable)."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from conformance.fuzz.network.finding_records import FINDING_KIND
from conformance.report.records import KIND as CASE_KIND

#: The schema versions of each kind this pipeline reads.
SUPPORTED: dict[str, frozenset[int]] = {CASE_KIND: frozenset({1}), FINDING_KIND: frozenset({1})}
#: Which files hold which kind (file names the writers use, searched under --input).
FILE_GLOBS: dict[str, str] = {CASE_KIND: "results-*.jsonl", FINDING_KIND: "findings*.jsonl"}
#: The column that holds a line Spark could not read with the schema.
CORRUPT = "_corrupt_record"
#: How the writers spell a timestamp: ISO 8601, UTC, milliseconds, a Z.
TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSX"


def _field(name: str, kind: DataType, required: bool = True) -> StructField:
    return StructField(name, kind, nullable=not required)


_ENVELOPE = [
    _field("schema_version", LongType()),
    _field("kind", StringType()),
    _field("timestamp", TimestampType()),
    _field("tool_version", StringType()),
    # PROFILE@HOST:PORT of the broker (reference@embedded[+FAULT,...] for a fuzzed one)
    _field("broker_id", StringType()),
    # CONNECTED's server header (the broker build); None when the broker sent none
    _field("broker_server", StringType(), required=False),
]

#: One case execution (conformance.report.records.case_records), version 1.
CASE_RESULT = StructType(_ENVELOPE + [
    _field("run_id", StringType()),
    _field("case_id", StringType()),
    # the STOMP version the case ran at
    _field("version", StringType()),
    _field("statements", ArrayType(StringType(), containsNull=False)),
    _field("area", StringType()),
    _field("level", StringType()),
    _field("outcome", StringType()),
    _field("duration_ms", DoubleType()),
    _field("message", StringType()),
])

#: One fuzz finding (finding_record and FINDING_FIELDS in conformance.fuzz.network.
#: finding_records, which documents each field), version 1.
FUZZ_FINDING = StructType(_ENVELOPE + [
    _field("campaign_id", StringType()),
    _field("finding_id", StringType()),
    # the bug: "KIND RULE [COMMAND]" (records written before it existed: None, and the
    # bucket is the classification and statement as written)
    _field("signature", StringType(), required=False),
    _field("generator", StringType()),
    # the response class: how the broker's answer departs from the spec
    _field("classification", StringType()),
    # the statement the answer breaks
    _field("statement", StringType()),
    _field("grade", StringType()),
    _field("mutation", StringType()),
    _field("version", StringType()),
    _field("expect", StringType()),
    _field("detail", StringType()),
    _field("ended", StringType()),
    _field("input_octets", LongType()),
    _field("original_octets", LongType()),
    _field("response_octets", LongType()),
    _field("minimised", BooleanType()),
    _field("confirmed", BooleanType(), required=False),
    _field("hits", LongType()),
    _field("seed", LongType()),
    _field("input_index", LongType()),
    _field("found_after_s", DoubleType()),
    _field("found_after_inputs", LongType()),
    _field("replay", StringType()),
    # the reproducer's first octets as latin-1 text (records written before it existed:
    # None, and the bucket shows a coarser shape)
    _field("input", StringType(), required=False),
])

SCHEMAS: dict[str, StructType] = {CASE_KIND: CASE_RESULT, FINDING_KIND: FUZZ_FINDING}


def required(schema: StructType) -> list[str]:
    return [f.name for f in schema.fields if not f.nullable]


def with_corrupt(schema: StructType) -> StructType:
    """The schema Spark reads with: a line that does not fit lands whole in CORRUPT."""
    return StructType(list(schema.fields) + [StructField(CORRUPT, StringType(), True)])
