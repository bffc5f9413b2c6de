"""What a run produces: outcomes, per-case results with their transcript, and the
summary. Every reporter (console, JSON, JUnit, records, pytest) reads these."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance.scenario.model import STRENGTHS
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
    #: the levels of the statements at stake at its version, strongest first: the run
    #: counts toward each level's score
    levels: tuple[str, ...] = ()
    #: each check it failed: {statement, grade, declared} (judge.Broken)
    broken: list[dict[str, Any]] = field(default_factory=list)
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
            "deviation": self.deviation, "levels": list(self.levels), "broken": self.broken,
            "transcript": [r.to_json() for r in self.transcript],
        }


#: The level whose score a check broken with each grade lowers.
LEVEL_OF = {grade: level for level, grade in BROKEN.items()}


def checks(run: CaseResult | Mapping[str, Any]
           ) -> tuple[Outcome, str, tuple[str, ...], list[dict[str, Any]] | None]:
    """(outcome, level, levels at stake, broken checks) of a result or a JSON report's
    case; None for the broken checks of a saved report older than them."""
    broken: list[dict[str, Any]] | None
    if isinstance(run, CaseResult):
        outcome, level, levels, broken = run.outcome, run.level, run.levels, run.broken
    else:
        outcome, level = Outcome(run["outcome"]), run["level"]
        levels, broken = tuple(run.get("levels", ())), run.get("broken")
    return outcome, level, levels, broken if levels else None


def scores(run: CaseResult | Mapping[str, Any]) -> dict[str, bool]:
    """The levels a run (a result, or a JSON report's case) counts toward, and whether it
    passed at each: a level passes where nothing of it or stronger broke. A run counts
    toward the levels of its statements at stake and of what it broke; one that was not
    graded toward none, an error passes none. A saved report older than `levels` counts
    its case's level."""
    outcome, level, levels, broken = checks(run)
    if outcome in (Outcome.SKIPPED, Outcome.UNSUPPORTED):
        return {}
    if broken is None:  # before scores per level
        return {level: outcome == Outcome.PASSED}
    grades = (Outcome(b["grade"]) for b in broken)
    hit = [STRENGTHS.index(LEVEL_OF[grade]) for grade in grades if grade in LEVEL_OF]
    strongest_hit = min(hit, default=len(STRENGTHS))
    return {level: outcome != Outcome.ERROR and index < strongest_hit
            for index, level in enumerate(STRENGTHS) if level in levels or index in hit}


def summarise(results: list[CaseResult]) -> dict[str, Any]:
    """Counts per outcome and, per level, how many passed of those that counted toward it
    (see `scores`)."""
    by_outcome = {o.value: 0 for o in Outcome}
    for r in results:
        by_outcome[r.outcome.value] += 1
    return {"total": len(results), "outcomes": by_outcome, "levels": level_counts(results)}


def level_counts(runs: Iterable[CaseResult | Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per level: {passed, total} over `runs` (see `scores`)."""
    counts: dict[str, dict[str, int]] = {}
    for run in runs:
        for level, passed in scores(run).items():
            count = counts.setdefault(level, {"passed": 0, "total": 0})
            count["total"] += 1
            count["passed"] += passed
    return {level: counts[level] for level in STRENGTHS if level in counts}
