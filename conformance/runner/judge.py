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
from conformance.runner.results import BROKEN, Outcome, worst
from conformance.scenario import Case
from conformance.spec import catalogue
from conformance.wire.connection import Connection

#: The most violations a case keeps (each grades the case; more only repeat them).
MAX_FOUND = 100


class StepFailed(Exception):
    """An expectation not met: graded by the case's level (or the alternative's grade)."""

    def __init__(self, expected: str, observed: str, *, grade: Outcome | None = None) -> None:
        super().__init__(f"expected {expected}; observed {observed}")
        self.expected, self.observed, self.grade = expected, observed, grade


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


def outcome(case: Case, grades: list[tuple[Outcome, str]], found: list[Judged],
            failure: StepFailed | None, step_line: int) -> tuple[Outcome, dict[str, Any]]:
    """A case's outcome, the worst of the grades its steps gave, the statements found broken
    and the expectation that failed, with the fields of its result that explain it."""
    fields: dict[str, Any] = {"step_line": step_line,
                              "violations": [judged.text for judged in found]}
    every = [g for g, _ in grades] + [broken(judged.statement) for judged in found]
    if failure is not None:
        every.append(failure.grade or BROKEN[case.level])
        fields.update(expected=failure.expected, observed=failure.observed,
                      message=f"line {step_line}: expected {failure.expected}; "
                              f"observed {failure.observed}",
                      statement=case.statements[0])
    worst_one = worst(*every)
    if failure is None and found and worst_one != Outcome.PASSED:
        first = next((j for j in found if broken(j.statement) == worst_one), found[0])
        fields.update(message=first.text, statement=first.statement)
    elif failure is None:
        fields["message"] = next((note for g, note in grades if g == worst_one and note), "")
    return worst_one, fields


def declared(profile: Profile, case: Case, version: str, outcome: Outcome,
             fields: dict[str, Any], *, strict: bool = False) -> Outcome:
    """A graded outcome in the light of the profile (a broker's or a client library's): a
    failure the profile declares a deviation for is named in `fields` and, unless `strict`
    (certification), graded known-deviation."""
    deviation = profile.deviation(case.id, version)
    if deviation is None or outcome not in (Outcome.FAILED, Outcome.NON_STRICT):
        return outcome
    fields["deviation"] = f"{deviation.observed} ({deviation.reason})"
    return outcome if strict else Outcome.KNOWN_DEVIATION
