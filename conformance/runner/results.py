"""What a run produces: outcomes, per-case results with their transcript, and the
summary. Every reporter (console, JSON, JUnit, records, pytest) reads these."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from conformance.wire.transcript import Record


class Refusal(enum.StrEnum):
    """How a broker refused the session a case needed."""

    #: with ERROR or a close
    ANSWERED = "answered"
    #: by never answering CONNECT
    SILENT = "silent"


class Outcome(enum.StrEnum):
    #: every expectation met, every received frame valid
    PASSED = "passed"
    #: a MUST, MUST NOT or REQUIRED statement broken
    FAILED = "failed"
    #: a SHOULD statement broken
    NON_STRICT = "non-strict"
    #: a MAY or implementation-defined behaviour, recorded
    INFORMATIONAL = "informational"
    #: the profile declares the capability absent, or the version is not spoken
    UNSUPPORTED = "unsupported"
    #: a failure listed in the profile with a reason
    KNOWN_DEVIATION = "known-deviation"
    #: the harness or the case could not run
    ERROR = "error"
    #: not run (deselected, or the global deadline passed)
    SKIPPED = "skipped"


#: How bad each outcome is, for combining grades: the worst wins.
SEVERITY = {
    Outcome.PASSED: 0, Outcome.SKIPPED: 0, Outcome.UNSUPPORTED: 0,
    Outcome.INFORMATIONAL: 1, Outcome.KNOWN_DEVIATION: 2, Outcome.NON_STRICT: 3,
    Outcome.FAILED: 4, Outcome.ERROR: 5,
}

#: The outcome of a broken statement of each strength.
BROKEN = {"must": Outcome.FAILED, "should": Outcome.NON_STRICT, "may": Outcome.INFORMATIONAL}


def worst(*outcomes: Outcome) -> Outcome:
    return max(outcomes, key=SEVERITY.__getitem__, default=Outcome.PASSED)



@dataclass(slots=True)
class CaseResult:
    id: str
    title: str
    version: str
    outcome: Outcome
    level: str
    statements: tuple[str, ...]
    versions: tuple[str, ...]
    area: str
    file: str = ""
    line: int = 0
    duration_ms: float = 0.0
    #: one line: why it did not pass (empty when it passed)
    message: str = ""
    #: the statement broken, when one is
    statement: str = ""
    expected: str = ""
    observed: str = ""
    #: the step that decided it (its YAML line)
    step_line: int = 0
    transcript: list[Record] = field(default_factory=list)
    #: violations the validator found in frames the case did not look at
    violations: list[str] = field(default_factory=list)
    deviation: str = ""
    #: an error because the broker refused the session the case needed (its settings,
    #: not the statement checked): how it refused
    setup_refused: Refusal | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.id, self.version)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "title": self.title, "version": self.version,
            "outcome": self.outcome.value, "level": self.level,
            "statements": list(self.statements), "versions": list(self.versions),
            "area": self.area, "file": self.file, "line": self.line,
            "duration_ms": round(self.duration_ms, 3), "message": self.message,
            "statement": self.statement, "expected": self.expected, "observed": self.observed,
            "step_line": self.step_line, "violations": self.violations,
            "deviation": self.deviation,
            "transcript": [r.to_json() for r in self.transcript],
        }


def summarise(results: list[CaseResult]) -> dict[str, Any]:
    """Counts per outcome and, per level, how many passed of those that ran."""
    by_outcome = {o.value: 0 for o in Outcome}
    by_level: dict[str, dict[str, int]] = {}
    for r in results:
        by_outcome[r.outcome.value] += 1
        level = by_level.setdefault(r.level, {"passed": 0, "total": 0})
        if r.outcome not in (Outcome.SKIPPED, Outcome.UNSUPPORTED):
            level["total"] += 1
            level["passed"] += r.outcome == Outcome.PASSED
    return {"total": len(results), "outcomes": by_outcome, "levels": by_level}
