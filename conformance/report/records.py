"""Result records for the Spark pipeline (reports/README.md, 'JSON Lines records'): JSON
Lines, one flat record per case execution, no transcript (the JSON report keeps those). The
fuzz finding's record, the pipeline's other kind, is the fuzzer's
(fuzz/network/finding_records.py).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance.files import write_atomic
from conformance.report.scrub import Scrubber, scrub
from conformance.runner.results import CaseResult

if TYPE_CHECKING:
    from conformance.wire.target import Target

#: The version of both record kinds' schemas (this module's and the fuzz finding's).
SCHEMA_VERSION = 1
KIND = "case_result"
#: The run id names the file: nothing that could leave the folder or trouble a shell.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def timestamp(when: datetime | None = None) -> str:
    """ISO 8601 in UTC with a Z, to the millisecond: `2024-05-01T12:00:00.000Z`."""
    when = (when or datetime.now(UTC)).astimezone(UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def case_records(results: list[CaseResult], *, target: Target, run_id: str,
                 tool_version: str, when: datetime | None = None,
                 server: str | None = None) -> list[dict[str, Any]]:
    """One flat record per result, passcode scrubbed out; all share the run's timestamp.
    `server` is CONNECTED's server header (the broker build: the pipeline's flaky cases are
    mixed outcomes of one build), None when the broker sent none."""
    stamp = timestamp(when)
    broker_id = f"{target.profile.name}@{target.address.display}"
    build = None if server is None else Scrubber(target.credentials[1]).text(server)
    return [{
        "schema_version": SCHEMA_VERSION, "kind": KIND, "run_id": run_id, "timestamp": stamp,
        "tool_version": tool_version, "broker_id": broker_id, "broker_server": build,
        "case_id": r.id,
        "version": r.version, "statements": list(r.statements), "area": r.area,
        "level": r.level, "outcome": r.outcome.value, "duration_ms": round(r.duration_ms, 3),
        "message": r.message,
    } for r in scrub(results, target)]


def write_records(folder: Path | str, results: list[CaseResult], *, target: Target,
                  run_id: str, tool_version: str, when: datetime | None = None,
                  server: str | None = None) -> Path:
    """Write `results-<run_id>.jsonl` into `folder` (created if needed) atomically and
    return its path. `when` defaults to now."""
    if not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} cannot name a file: use letters, digits, "
                         "'.', '_' and '-'")
    path = Path(folder) / f"results-{run_id}.jsonl"
    # ASCII with \u escapes: a stray surrogate in a message cannot make the file unreadable.
    lines = [json.dumps(record, ensure_ascii=True) + "\n"
             for record in case_records(results, target=target, run_id=run_id,
                                        tool_version=tool_version, when=when,
                                        server=server)]
    write_atomic(path, "".join(lines).encode("ascii"))
    return path
