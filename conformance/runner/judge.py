"""Judging what a case received, and grading the case: every frame goes through the
validator, looked for by a step or not, and each statement it finds broken grades the case
by the statement's level; `outcome` weighs those with the grades the steps gave and the
expectation that failed. Broker and client cases alike come here; nothing here knows of
either's run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conformance.codec import Frame, validate_server_frame
from conformance.profiles import Profile
from conformance.runner.results import BROKEN, LEVEL_OF, Outcome, worst
from conformance.scenario import Case
from conformance.spec import catalogue, rule_of
from conformance.wire.connection import Connection

#: The most violations a case keeps (each grades the case; more only repeat them).
MAX_FOUND = 100


class StepFailed(Exception):
    """An expectation not met: graded by the strongest statement it checks at the run's
    version (the step's `statements`, else the case's), or by the alternative's grade;
    `statements` name what it checks where the step is not the judge of that (a session
    the case needed and did not get)."""

    def __init__(self, expected: str, observed: str, *, grade: Outcome | None = None,
                 statements: tuple[str, ...] = ()) -> None:
        super().__init__(f"expected {expected}; observed {observed}")
        self.expected, self.observed, self.grade = expected, observed, grade
        self.statements = statements


@dataclass
class Judged:
    """What the validator found in a frame the case received."""

    statement: str
    text: str


def violations(conn: Connection, frame: Frame) -> list[Judged]:
    """Every rule `frame` breaks, as the parser saw it and as the validator judges it at the
    connection's version, against what the client offered and subscribed with."""
    found = list(frame.violations)
    found += validate_server_frame(frame, version=conn.version,  # type: ignore[arg-type]
                                   ack_modes=conn.ack_modes, offered=conn.offered)
    return [Judged(v.statement, f"{conn.name}: {v}") for v in found]


def keep(found: list[Judged], new: Iterable[Judged]) -> None:
    """Add `new` to `found`, up to MAX_FOUND: a storm of bad frames says all it has to say
    in its first ones."""
    for judged in new:
        if len(found) < MAX_FOUND:
            found.append(judged)


def judge(found: list[Judged], conn: Connection, frame: Frame) -> None:
    """Add to `found` what the validator finds in `frame` (see `keep`)."""
    keep(found, violations(conn, frame))


def broken(statement: str) -> Outcome:
    """The grade a case gets for breaking `statement`: failed for a MUST, non-strict for a
    SHOULD, informational for a MAY."""
    return BROKEN[catalogue()[statement].level.strength]


@dataclass(frozen=True, slots=True)
class Broken:
    """A check a case run failed: the statements it speaks for at the run's version (the
    first is the one reported), its grade, what was seen, and the profile's deviation
    that declares it (its text; empty: not declared)."""

    statements: tuple[str, ...]
    grade: Outcome
    text: str
    declared: str = ""

    @property
    def statement(self) -> str:
        return self.statements[0] if self.statements else ""

    def to_json(self) -> dict[str, Any]:
        return {"statement": self.statement, "statements": list(self.statements),
                "grade": self.grade.value, "declared": bool(self.declared)}


def graded_first(statements: tuple[str, ...], grade: Outcome) -> tuple[str, ...]:
    """`statements` with those of the level `grade` stands for first: a check that an
    alternative grades non-strict is reported against the SHOULD it checks."""
    level = LEVEL_OF.get(grade)
    known = catalogue()
    return tuple(sorted(statements, key=lambda s: known[s].level.strength != level))


def outcome(case: Case, version: str, named: tuple[str, ...], grades: list[Broken],
            found: list[Judged], failure: StepFailed | None, step_line: int,
            profile: Profile | None = None, *,
            strict: bool = False) -> tuple[Outcome, dict[str, Any]]:
    """A case run's outcome and the fields of its result that explain it: every check it
    failed (the grades its steps gave, the statements the validator found broken, the
    expectation that failed, whose step named `named`), each graded by its own statement
    at `version`. A failure `profile` declares a deviation for (by the case and a
    statement the failed check speaks for) is named in `fields` and, unless `strict`
    (certification), graded known-deviation; what it does not declare keeps its grade."""
    checks = [g for g in grades if g.grade != Outcome.PASSED]
    checks += [Broken((j.statement,), broken(j.statement), j.text) for j in found]
    fields: dict[str, Any] = {"step_line": step_line,
                              "violations": [judged.text for judged in found]}
    if failure is not None:
        grade = failure.grade or BROKEN[case.level_at(version, failure.statements or named)]
        stake = graded_first(failure.statements or case.at_stake(version, named), grade)
        message = f"line {step_line}: expected {failure.expected}; observed {failure.observed}"
        checks.insert(0, Broken(stake, grade, message))
        fields.update(expected=failure.expected, observed=failure.observed)
    checks = [_declared(profile, case.id, version, check) for check in checks]
    counted = [c.grade for c in checks if strict or not c.declared]
    counted += [Outcome.KNOWN_DEVIATION for c in checks if c.declared and not strict
                and c.grade in (Outcome.FAILED, Outcome.NON_STRICT)]
    worst_one = worst(*counted)
    if checks:
        first = next((c for c in checks if c.grade == worst_one and not c.declared),
                     next((c for c in checks if c.declared), checks[0]))
        fields.update(message=first.text, statement=first.statement)
        fields["broken"] = [c.to_json() for c in checks]
        shown = dict.fromkeys(c.declared for c in checks if c.declared)
        if shown:
            fields["deviation"] = "; ".join(shown)
    else:
        fields["message"] = next((g.text for g in grades if g.text), "")
    return worst_one, fields


def _declared(profile: Profile | None, case_id: str, version: str, check: Broken) -> Broken:
    """`check`, naming the deviation `profile` declares for it: one for the case (at the
    version) that names a statement the check speaks for (or its wording at another
    version)."""
    if profile is None or check.grade not in (Outcome.FAILED, Outcome.NON_STRICT):
        return check
    deviation = profile.deviation(case_id, version)
    if deviation is None:
        return check
    rules = {rule_of(s) for s in deviation.statements}  # at any version's wording
    named = [s for s in check.statements if rule_of(s) in rules]
    if not named:
        return check
    # reported against the statement the profile names
    statements = (*named, *(s for s in check.statements if s not in named))
    return Broken(statements, check.grade, check.text,
                  f"{deviation.observed} ({deviation.reason})")
