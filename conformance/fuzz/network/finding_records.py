"""The flat record of a fuzz finding for the Spark pipeline (reports/README.md, 'JSON Lines
records'): `stomp-conformance fuzz --results DIR` writes one per finding into
DIR/findings.jsonl. The case records are report/records.py's; both share its SCHEMA_VERSION.

A fuzz-finding record (`finding_record`; the fields and their types are FINDING_FIELDS,
those that may be null FINDING_NULLABLE):
    schema_version      int    1
    kind                str    "fuzz_finding"
    campaign_id         str    the campaign (its folder's state.json)
    finding_id          str    KIND-HASH: stable for a signature, names the finding file
    signature           str    what makes it this bug: "KIND RULE [COMMAND]" (findings.py's
                               `signature`); the pipeline buckets findings by it (records
                               written before it existed lack it)
    timestamp           str    when it was found (ISO 8601 UTC, ms, Z)
    tool_version        str
    broker_id           str    PROFILE@HOST:PORT, or reference@embedded[+FAULT,...]
    broker_server       str?   CONNECTED's server header, when the broker sent one
    generator           str    what drew the input ("grammar"; others may be added)
    classification      str    the anomaly: accepted-silently, error-without-close, crash...
    statement           str    the statement id it breaks (in the version's wording)
    grade               str    failed | non-strict | informational
    mutation            str    the rule the input broke, or valid:FEATURE for valid input
    version             str    STOMP version of the session
    expect              str    what the spec required: valid | error | limit
    detail              str    one line: what was seen
    ended               str    how the exchange ended ("ERROR, open", "RECEIPT", ...)
    input_octets        int    size of the (minimised) reproducer
    original_octets     int    size of the input as first found
    response_octets     int    octets of the broker's answer kept (at most 64 KiB)
    minimised           bool
    confirmed           bool?  shown again when sent again (null: not tried yet)
    hits                int    inputs that showed it
    seed                int    the campaign's seed
    input_index         int    the input's number in the campaign
    found_after_s       float  seconds of fuzzing before it was found
    found_after_inputs  int    inputs judged before it was found
    replay              str    the command that replays it
    input               str    the reproducer's first INPUT_LIMIT octets, one character per
                               octet (latin-1): the pipeline shows its shape
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conformance.files import write_atomic
from conformance.fuzz.network.findings import Finding, signature_text
from conformance.report.records import SCHEMA_VERSION

FINDING_KIND = "fuzz_finding"
#: Field -> type of a fuzz-finding record (the pipeline builds its schema from this).
FINDING_FIELDS: dict[str, type] = {
    "schema_version": int, "kind": str, "campaign_id": str, "finding_id": str,
    "signature": str, "timestamp": str, "tool_version": str, "broker_id": str,
    "broker_server": str, "generator": str, "classification": str, "statement": str, "grade": str,
    "mutation": str, "version": str, "expect": str, "detail": str, "ended": str,
    "input_octets": int, "original_octets": int, "response_octets": int, "minimised": bool,
    "confirmed": bool, "hits": int, "seed": int, "input_index": int, "found_after_s": float,
    "found_after_inputs": int, "replay": str, "input": str,
}
FINDING_NULLABLE: frozenset[str] = frozenset({"broker_server", "confirmed"})
FINDINGS_FILE = "findings.jsonl"
#: Octets of the reproducer a record keeps (its file keeps them all).
INPUT_LIMIT = 4096


def finding_record(finding: Finding, *, path: str = "",
                   server: str | None = None) -> dict[str, Any]:
    """The flat record of a finding (`path`: its file, for the replay command; `server`:
    CONNECTED's server header). Holds no credential: a finding never has one."""
    fuzz = finding.input
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "kind": FINDING_KIND,
        "campaign_id": finding.campaign, "finding_id": finding.id,
        "signature": signature_text(finding.signature),
        "timestamp": finding.found_at, "tool_version": finding.tool_version,
        "broker_id": finding.broker.id, "broker_server": server,
        "generator": finding.generator, "classification": finding.kind.value,
        "statement": finding.statement, "grade": finding.grade.value,
        "mutation": fuzz.mutation, "version": fuzz.version, "expect": fuzz.expect.value,
        "detail": " ".join(finding.detail.split()), "ended": finding.ended,
        "input_octets": len(fuzz.data), "original_octets": finding.original_octets,
        "response_octets": len(finding.response), "minimised": finding.minimised,
        "confirmed": finding.confirmed, "hits": finding.hits, "seed": finding.seed,
        "input_index": finding.index, "found_after_s": round(finding.found_after_s, 3),
        "found_after_inputs": finding.found_after_inputs,
        "replay": finding.replay_command(path) if path else "",
        "input": fuzz.data[:INPUT_LIMIT].decode("latin-1"),
    }
    return record


def write_finding_records(folder: Path | str, records: list[dict[str, Any]],
                          campaign_id: str) -> Path:
    """Write the records of campaign `campaign_id` into `folder`/findings.jsonl atomically,
    keeping the lines of other campaigns already there; return its path."""
    path = Path(folder) / FINDINGS_FILE
    kept: list[str] = []
    try:
        for line in path.read_text(encoding="ascii", errors="replace").splitlines():
            try:
                other = json.loads(line)
            except ValueError:
                continue
            if isinstance(other, dict) and other.get("campaign_id") != campaign_id:
                kept.append(line + "\n")
    except FileNotFoundError:
        pass
    lines = kept + [json.dumps(r, ensure_ascii=True) + "\n" for r in records]
    write_atomic(path, "".join(lines).encode("ascii"))
    return path
