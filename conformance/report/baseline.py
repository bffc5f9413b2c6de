"""The baseline gate: this run against an earlier JSON report of the same broker, so a
vendor can adopt the suite before their broker conforms. Only a regression (a case at a
version that passed in the baseline and fails now) fails the gate; new passes are listed so
the baseline can be moved forward."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.files import read_checked
from conformance.report.json_report import schema
from conformance.runner.results import CaseResult, Outcome


def load_report(path: Path | str) -> dict[str, Any]:
    """A JSON report written by `run --json`, checked against the report schema."""
    return read_checked(path, schema(), "a stomp-conformance JSON report")


@dataclass
class BaselineDiff:
    """Cases named `id [version]`, in the order of this run."""

    regressions: list[str] = field(default_factory=list)
    new_passes: list[str] = field(default_factory=list)
    #: failing now and not passing in the baseline: tolerated by the gate
    still_failing: list[str] = field(default_factory=list)
    #: failing now with no result in the baseline (a new case or version): tolerated
    new_failing: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, list[str]]:
        return {"regressions": self.regressions, "new_passes": self.new_passes,
                "still_failing": self.still_failing, "new_failing": self.new_failing}


def compare_baseline(results: list[CaseResult], baseline: dict[str, Any]) -> BaselineDiff:
    before = {(c["id"], c["version"]): c["outcome"] for c in baseline["cases"]}
    diff = BaselineDiff()
    for r in results:
        name = f"{r.id} [{r.version}]"
        was = before.get((r.id, r.version))
        if r.outcome == Outcome.FAILED:
            if was is None:
                diff.new_failing.append(name)
            elif was == Outcome.PASSED:
                diff.regressions.append(name)
            else:
                diff.still_failing.append(name)
        elif r.outcome == Outcome.PASSED and was is not None and was != Outcome.PASSED:
            diff.new_passes.append(name)
    return diff
