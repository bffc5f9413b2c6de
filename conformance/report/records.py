"""Result records for the Spark pipeline (DESIGN.md, 'Result records'): JSON Lines, one flat
record per case execution, no transcript (the JSON report keeps those)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance.report.files import write_atomic
from conformance.report.scrub import scrub
from conformance.results import CaseResult

if TYPE_CHECKING:
    from conformance.engine import Target

SCHEMA_VERSION = 1
KIND = "case_result"
#: The run id names the file: nothing that could leave the folder or trouble a shell.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def timestamp(when: datetime | None = None) -> str:
    """ISO 8601 in UTC with a Z, to the millisecond: `2024-05-01T12:00:00.000Z`."""
    when = (when or datetime.now(UTC)).astimezone(UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def case_records(results: list[CaseResult], *, target: Target, run_id: str,
                 tool_version: str, when: datetime | None = None) -> list[dict[str, Any]]:
    """One flat record per result, passcode scrubbed out; all share the run's timestamp."""
    stamp = timestamp(when)
    broker_id = f"{target.profile.name}@{target.address.display}"
    return [{
        "schema_version": SCHEMA_VERSION, "kind": KIND, "run_id": run_id, "timestamp": stamp,
        "tool_version": tool_version, "broker_id": broker_id, "case_id": r.id,
        "version": r.version, "statements": list(r.statements), "area": r.area,
        "level": r.level, "outcome": r.outcome.value, "duration_ms": round(r.duration_ms, 3),
        "message": r.message,
    } for r in scrub(results, target)]


def write_records(folder: Path | str, results: list[CaseResult], *, target: Target,
                  run_id: str, tool_version: str, when: datetime | None = None) -> Path:
    """Write `results-<run_id>.jsonl` into `folder` (created if needed) atomically and
    return its path. `when` defaults to now."""
    if not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} cannot name a file: use letters, digits, "
                         "'.', '_' and '-'")
    path = Path(folder) / f"results-{run_id}.jsonl"
    # ASCII with \u escapes: a stray surrogate in a message cannot make the file unreadable.
    lines = [json.dumps(record, ensure_ascii=True) + "\n"
             for record in case_records(results, target=target, run_id=run_id,
                                        tool_version=tool_version, when=when)]
    write_atomic(path, "".join(lines).encode("ascii"))
    return path
