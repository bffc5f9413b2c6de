"""What a probe gives: a grade (`Grade`, the probes' own scale, with `finding` for a
weakness no statement forbids) and a `ProbeResult`, whose JSON is the `probe` verb's."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Grade(enum.StrEnum):
    #: the broker does what the spec asks (or what a robust broker does)
    PASSED = "passed"
    #: a MUST broken
    FAILED = "failed"
    #: a SHOULD broken
    NON_STRICT = "non-strict"
    #: no statement broken, but a weakness a hostile client can use (no limit, no timeout)
    FINDING = "finding"
    #: a measurement only, or the probe could not conclude within its budget
    INFORMATIONAL = "informational"


@dataclass(frozen=True)
class ProbeResult:
    """What one probe found: its grade, a line to show and the statements it bears on."""

    probe: str
    grade: Grade
    #: one line
    summary: str
    statements: tuple[str, ...] = ()
    #: limit probes: the largest size accepted and the smallest refused (None: not found)
    limit: int | None = None
    refused: int | None = None
    unit: str = ""
    #: limit probes: `refused` is `limit` + 1
    exact: bool = False
    duration_s: float = 0.0
    detail: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"probe": self.probe, "grade": self.grade.value, "summary": self.summary,
                "statements": list(self.statements), "limit": self.limit,
                "refused": self.refused, "unit": self.unit, "exact": self.exact,
                "duration_s": round(self.duration_s, 3), "detail": self.detail}

