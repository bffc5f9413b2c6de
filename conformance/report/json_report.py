"""The JSON report: the source every other format can be made from. Its shape is the
contract in reports/README.md ('JSON report'), checked by report.schema.json beside this module."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance.files import package_schema, write_atomic
from conformance.report.scrub import Scrubber, scrub
from conformance.report.verdict import certify
from conformance.runner.results import CaseResult, Outcome, level_counts, summarise

if TYPE_CHECKING:
    from conformance.scenario import Selection
    from conformance.wire.target import Target

SCHEMA_VERSION = 1
TOOL_NAME = "stomp-conformance"
#: Outcomes of cases that did not run: no version was negotiated, nothing was graded.
NOT_RUN = (Outcome.SKIPPED, Outcome.UNSUPPORTED)


def schema() -> dict[str, Any]:
    """The JSON Schema of the report (draft 2020-12)."""
    return package_schema("conformance.report", "report.schema.json")


def _by_version(results: list[CaseResult]) -> dict[str, dict[str, dict[str, int]]]:
    """Per version, per level: how many passed of the runs that counted toward it (as
    summarise counts)."""
    versions = sorted({r.version for r in results})
    return {v: level_counts(r for r in results if r.version == v) for v in versions}


def report_json(results: list[CaseResult], *, target: Target, server: dict[str, str],
                duration: float, tool_version: str, strict: bool = False,
                subprotocol: str | None = None,
                catalogue: Selection | None = None) -> dict[str, Any]:
    """The report as a JSON-ready dict, with the target's passcode scrubbed out; `strict`
    says the run graded known deviations as what they are (`run --strict`); `subprotocol`:
    the one the broker accepted over WebSocket (None over TCP: no field); `catalogue`:
    what the run took of the catalogue it loaded, recorded beside the verdict."""
    clean = scrub(results, target)
    header = server.get("server")
    summary = summarise(clean)
    summary["versions"] = _by_version(clean)
    summary["duration_s"] = round(duration, 3)
    return {
        "schema_version": SCHEMA_VERSION,
        # first, so that the one-line verdict opens the file
        "certification": certify(clean, strict=strict, catalogue=catalogue).to_json(),
        "tool": {"name": TOOL_NAME, "version": tool_version},
        "broker": {
            "url": target.address.display,
            "profile": target.profile.name,
            "server": None if header is None else Scrubber(target.credentials[1]).text(header),
            "versions": sorted({r.version for r in clean if r.outcome not in NOT_RUN}),
            **({} if subprotocol is None else {"subprotocol": subprotocol}),
        },
        "summary": summary,
        "cases": [r.to_json() for r in clean],
    }


def client_report_json(results: list[CaseResult], *, client: dict[str, Any],
                       duration: float, tool_version: str, strict: bool = False,
                       passcodes: tuple[str, ...] = (),
                       catalogue: Selection | None = None) -> dict[str, Any]:
    """The report of a client run: the broker report's shape with `client` (the driver
    command, the transport, the library and version its driver reported) in place of
    `broker`; each of `passcodes` (and every passcode header) scrubbed out; `strict` as
    for report_json (`clients --strict`), and `catalogue`."""
    clean = results
    for passcode in passcodes or (None,):
        clean = scrub(clean, None, passcode)
    summary = summarise(clean)
    summary["versions"] = _by_version(clean)
    summary["duration_s"] = round(duration, 3)
    return {
        "schema_version": SCHEMA_VERSION,
        "certification": certify(clean, strict=strict, client=True,
                                 catalogue=catalogue).to_json(),
        "tool": {"name": TOOL_NAME, "version": tool_version},
        "client": {**client,
                   "versions": sorted({r.version for r in clean if r.outcome not in NOT_RUN})},
        "summary": summary,
        "cases": [r.to_json() for r in clean],
    }


def _encode(value: Any, indent: int) -> bytes:
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in some message: let JSON escape it
        return json.dumps(value, indent=indent).encode("ascii")


def chunks(report: dict[str, Any], indent: int = 2) -> Iterator[bytes]:
    """`report` as UTF-8 JSON, as dumps writes it (a lone surrogate escapes only its case),
    a case at a time: a run's transcripts are never one string in memory."""
    cases = report.get("cases")
    if not cases or list(report)[-1] != "cases":
        yield dumps(report, indent)
        return
    head = _encode({**report, "cases": []}, indent)
    before, after = head.rsplit(b'"cases": []', 1)
    pad = b"\n" + b" " * (2 * indent)
    yield before + b'"cases": ['
    for index, case in enumerate(cases):
        yield (b"," if index else b"") + pad + _encode(case, indent).replace(b"\n", pad)
    yield b"\n" + b" " * indent + b"]" + after + b"\n"


def dumps(report: dict[str, Any], indent: int = 2) -> bytes:
    return _encode(report, indent) + b"\n"


def write_json(path: Path | str, report: dict[str, Any]) -> None:
    """Write `report` (from report_json) as UTF-8 JSON, indented by 2, atomically."""
    write_atomic(Path(path), chunks(report))
