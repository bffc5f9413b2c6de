"""The certification verdict: one line saying whether the case runs show the broker conforms
(every MUST passed). The console, the JSON report, the HTML page and the Markdown summary
all print the line this module makes, from live results or from a saved report's cases.

A profile's known deviation is a failure here, with or without `--strict`: declaring a
failure does not make it conform. `--strict` changes the grades and so the exit code; the
line stays the same for the same broker behaviour in both modes, and says how many of its
failures are declared. A client library's line says so (`conforms to STOMP 1.2 as a
client`): its MUSTs are the spec's client statements. A MUST failed is a case run that
broke a MUST statement, whatever else it checks.

The line certifies only the whole shipped catalogue: a run given its `Selection` that is a
selection of it (-k, --tag, --level, ...), or of other cases, says so in place of a verdict.
Grades and exit codes do not read the line, so they stay as they were."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from conformance.runner.results import CaseResult, Outcome, checks, scores
from conformance.scenario import Selection

#: Outcomes of case runs that did not run: nothing graded, no version spoken.
NOT_RUN = (Outcome.SKIPPED, Outcome.UNSUPPORTED)


@dataclass(frozen=True, slots=True)
class Certification:
    #: the run graded known deviations as what they are (`run --strict`)
    strict: bool
    #: True: every MUST passed; False: one failed; None: inconclusive (errors, or no MUST ran)
    conforms: bool | None
    #: the one line
    text: str
    must_failed: int = 0
    #: of must_failed, those the profile declares
    known_deviations: int = 0
    should_not_met: int = 0
    errors: int = 0
    #: the catalogue the runs are of, and how much of it they are (None: not known, as in
    #: a report written before it was recorded)
    catalogue: Selection | None = None

    def to_json(self) -> dict[str, Any]:
        return {"strict": self.strict, "conforms": self.conforms, "verdict": self.text,
                **({} if self.catalogue is None else {"catalogue": self.catalogue.to_json()}),
                "must_failed": self.must_failed, "known_deviations": self.known_deviations,
                "should_not_met": self.should_not_met, "errors": self.errors}


def _read(run: CaseResult | Mapping[str, Any]) -> tuple[str, Outcome, bool, list[bool], bool]:
    """(version, outcome, whether a MUST was at stake, whether each broken MUST was
    declared, whether a SHOULD broke) of a result or a report's case. A saved report older
    than the checks a case broke counts the case's level for what broke."""
    version = run.version if isinstance(run, CaseResult) else run["version"]
    deviation = bool(run.deviation if isinstance(run, CaseResult) else run.get("deviation"))
    outcome, level, _, broken = checks(run)
    must = "must" in scores(run)
    if broken is None:
        failed = outcome == Outcome.FAILED or (outcome == Outcome.KNOWN_DEVIATION
                                               and level == "must")
        return (version, outcome, must,
                [deviation or outcome == Outcome.KNOWN_DEVIATION] if failed else [],
                outcome in (Outcome.NON_STRICT, Outcome.KNOWN_DEVIATION) and not failed)
    musts = [bool(b["declared"]) for b in broken if b["grade"] == Outcome.FAILED]
    return (version, outcome, must, musts,
            any(b["grade"] == Outcome.NON_STRICT for b in broken))


def _runs(n: int, level: str = "") -> str:
    """'1 case run', '3 MUST case runs'."""
    return f"{n} {level + ' ' if level else ''}case run{'' if n == 1 else 's'}"


def _versions(versions: Iterable[str]) -> str:
    """'STOMP 1.2', 'STOMP 1.1 and 1.2', 'STOMP 1.0, 1.1 and 1.2'."""
    ordered = sorted(set(versions))
    listed = ordered[-1] if len(ordered) < 2 else \
        f"{', '.join(ordered[:-1])} and {ordered[-1]}"
    return f"STOMP {listed}"


def uncertified(selection: Selection) -> str:
    """The line of a run that is not the whole shipped catalogue."""
    if not selection.shipped:
        return f"{_runs(selection.selected)} of cases outside the shipped catalogue: " \
               "no certification verdict"
    return f"{selection.selected} of {_runs(selection.total)} selected: " \
           "no certification verdict"


def certify(runs: Iterable[CaseResult | Mapping[str, Any]], *, strict: bool = False,
            client: bool = False, catalogue: Selection | None = None) -> Certification:
    """The verdict on `runs` (CaseResults, or the `cases` of a JSON report); `client`: the
    runs judged a client library; `catalogue`: what they are of the catalogue the run
    loaded (None: unknown, the runs alone decide, as for a report that predates it)."""
    versions: set[str] = set()
    must_ran = must_failed = declared = should = errors = 0
    for version, outcome, must, musts, should_broke in map(_read, runs):
        if outcome in NOT_RUN:
            continue
        versions.add(version)
        must_ran += must
        if outcome == Outcome.ERROR:
            errors += 1
        # a MUST broke, declared or not: a known deviation does not make the broker
        # conform, and `--strict` changes grades, not this count
        elif musts:
            must_failed += 1
            declared += all(musts)
        elif should_broke:
            should += 1
    ungraded = f"{_runs(errors)} could not be graded"
    party = " as a client" if client else ""
    conforms: bool | None
    if catalogue is not None and not catalogue.whole:
        conforms, text = None, uncertified(catalogue)
    elif must_failed:
        conforms = False
        text = f"does not conform{party}: {_runs(must_failed, 'MUST')} failed"
        if declared == must_failed == 1:
            text += ", a known deviation"
        elif declared:
            text += f", {declared} of them " + \
                ("a known deviation" if declared == 1 else "known deviations")
        if errors:
            text += f"; {ungraded}"
    elif errors:
        conforms, text = None, f"inconclusive{party}: {ungraded}"
    elif not must_ran:
        conforms, text = None, f"inconclusive{party}: no MUST case ran"
    else:
        conforms = True
        text = f"conforms to {_versions(versions)}{party}: every MUST passed"
        if should:
            text += f", {should} SHOULD not met"
    return Certification(strict, conforms, text, must_failed, declared, should, errors,
                         catalogue)


def report_certification(report: Mapping[str, Any]) -> Certification:
    """The verdict of a JSON report (a live one or a saved one, which may predate the
    `certification` field or its `catalogue`), from its cases and catalogue, so that no
    format can say something else."""
    recorded = report.get("certification", {})
    catalogue = recorded.get("catalogue")
    return certify(report["cases"], strict=bool(recorded.get("strict", False)),
                   client="client" in report,
                   catalogue=None if catalogue is None else Selection.from_json(catalogue))
