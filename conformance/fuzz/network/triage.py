"""Triage of fuzz campaigns against real brokers: each broker's findings bucketed by their
signature (findings.py: the notion of "the same bug" the pipeline's buckets share), each
bucket sorted into one of

    crash, hang, leak      the broker's process died, stopped taking connections, or grew
    deviation              a spec violation the broker's profile declares (named)
    violation              a spec violation no deviation declares
    not reproduced         sent again (by the campaign, or `replay --record` after it), the
                           answer did not show it
    informational          behaviour the spec leaves open

and marked known (declared, or the catalogue already shows it on this broker: a case that
checks the same rule does not pass in the committed comparison) or new. Each bucket names
the catalogue cases that check its rule (for an outage, those among the cases its profile
runs `alone:`, because they bring it down, that check the rule its input breaks): a bucket
no case checks is what the catalogue misses. Notes written by whoever triaged a bucket (a
case added for it, why it is not the broker's) come from a YAML file keyed by broker and
signature: a line of text, or `{note: TEXT, known: BOOL, cases: [CASE, ...]}` where the
triager knows better than the rules above (a crash the profile's `alone:` cases cause, the
case written for a bucket).

A broker's folder (what `reports/refresh fuzz` writes) holds `state.json` and `findings/`
of its grammar campaign, `stateful.json` (the stateful fuzzer's result), `probe.json` and
`version` (what was fuzzed, as its installer names it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from conformance.fuzz.network.findings import Finding, signature_of, signature_text
from conformance.fuzz.network.folder import CampaignState, load_finding
from conformance.fuzz.network.oracle import Anomaly, Kind, grade
from conformance.profiles import Profile, load_profile
from conformance.runner.results import Outcome
from conformance.scenario.loader import load_cases, shipped_catalogue
from conformance.spec import rule_of

CATEGORIES = ("crash", "hang", "leak", "violation", "deviation", "not reproduced",
              "informational")
#: the kinds about the broker as a whole (a stateful finding's kind is none of them)
_OUTAGES = frozenset(k.value for k in Kind if k.outage)
#: outcomes in the comparison that mean a case does not show a problem
_CLEAN = {"passed", "unsupported", "informational"}


@dataclass
class Bucket:
    broker: str
    signature: str
    kind: str
    statement: str
    grade: str
    category: str
    known: bool
    #: the profile's deviations (their case ids) that declare its rule
    deviations: list[str] = field(default_factory=list)
    #: catalogue cases that check its rule, with their outcome on this broker
    cases: dict[str, str] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    generator: str = "grammar"
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BrokerResults:
    name: str
    profile: str
    server: str
    #: what was fuzzed, as its installer names it (the folder's `version` file)
    version: str
    campaign: dict[str, Any]
    stateful: dict[str, Any]
    #: each probe's name, grade and summary
    probe: list[dict[str, Any]]
    buckets: list[Bucket]

    def to_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in self.__dict__.items() if k != "buckets"},
                "buckets": [b.to_json() for b in self.buckets]}


@cache
def _rules_checked() -> dict[str, tuple[str, ...]]:
    """rule -> the catalogue cases (ids, topic runs aside) that name it."""
    cases: dict[str, list[str]] = {}
    for case in load_cases([shipped_catalogue()]):
        for statement in case.statements:
            found = cases.setdefault(rule_of(statement), [])
            base = case.id.removesuffix(".topic")
            if base not in found:
                found.append(base)
    return {rule: tuple(ids) for rule, ids in cases.items()}


def _outcomes(comparison: Mapping[str, Any] | None, profile: str) -> dict[str, str]:
    """case id -> its worst outcome on the broker of `profile` in the comparison."""
    if comparison is None:
        return {}
    order = ["known-deviation", "failed", "non-strict", "error", "informational",
             "unsupported", "passed"]
    out: dict[str, str] = {}
    for column in comparison.get("brokers", []):
        if column.get("profile") != profile:
            continue
        for key, outcome in column.get("outcomes", {}).items():
            case = key.rsplit("@", 1)[0].removesuffix(".topic")
            seen = out.get(case)
            rank = order.index(outcome) if outcome in order else 0
            if seen is None or rank < (order.index(seen) if seen in order else 0):
                out[case] = outcome
    return out


def _deviations(profile: Profile, rule: str) -> list[str]:
    return [case for case, deviation in profile.deviations.items()
            if any(rule_of(s) == rule for s in deviation.statements)]


def _category(kind: str, grade: str, reproduces: bool | None, deviations: list[str]) -> str:
    if reproduces is False:
        return "not reproduced"
    if kind in _OUTAGES:
        return kind
    if deviations:
        return "deviation"
    return "informational" if grade == Outcome.INFORMATIONAL.value else "violation"


def _finding_row(finding: Finding, path: Path) -> dict[str, Any]:
    sent = finding.sent
    return {"id": finding.id, "confirmed": finding.confirmed, "minimised": finding.minimised,
            "hits": finding.hits, "mutation": finding.input.mutation,
            "version": finding.input.version, "octets": sum(len(s.data) for s in sent),
            "inputs": len(sent), "detail": finding.detail, "ended": finding.ended,
            "reproducer": path.name, "case": path.with_suffix(".yaml").name,
            "found_after_s": finding.found_after_s,
            "replays": finding.replays.to_json() if finding.replays else None,
            "replay": finding.replay_command(str(path))}


@dataclass(frozen=True)
class Note:
    """What whoever triaged a bucket said of it."""

    text: str = ""
    known: bool | None = None
    cases: tuple[str, ...] = ()


def _bucket(broker: str, profile: Profile, outcomes: Mapping[str, str], sig: tuple[str, ...],
            kind: str, statement: str, grade: str, reproduces: bool | None,
            input_rule: str, notes: Mapping[str, Note], generator: str) -> Bucket:
    rule = rule_of(statement)
    checked = _rules_checked()
    if kind in _OUTAGES:
        # what brings the broker down is the input's rule, not CONNECTED's; only a case that
        # brings the broker down covers it (its profile runs those alone)
        ids = [c for c in checked.get(input_rule, ()) if c in profile.alone]
        deviations: list[str] = []
        known = bool(ids)
    else:
        ids = list(checked.get(rule, ()))
        deviations = _deviations(profile, rule)
        known = bool(deviations) or any(outcomes.get(c, "passed") not in _CLEAN for c in ids)
    text = signature_text(sig)
    note = notes.get(text, Note())
    ids = [*note.cases, *(c for c in ids if c not in note.cases)]
    return Bucket(broker=broker, signature=text, kind=kind, statement=statement, grade=grade,
                  category=_category(kind, grade, reproduces, deviations),
                  known=known if note.known is None else note.known,
                  deviations=deviations, cases={c: outcomes.get(c, "not run") for c in ids},
                  generator=generator, note=note.text)


def triage_broker(folder: Path, *, comparison: Mapping[str, Any] | None = None,
                  notes: Mapping[str, Note] | None = None) -> BrokerResults:
    """The results of one broker's folder, triaged. ValueError when it holds no campaign."""
    notes = notes or {}
    state_path = folder / "state.json"
    try:
        state = CampaignState.from_json(json.loads(state_path.read_text("utf-8")))
    except (OSError, ValueError) as error:
        raise ValueError(f"{state_path}: {error}") from None
    name = folder.name
    profile = load_profile(state.broker.profile)
    outcomes = _outcomes(comparison, state.broker.profile)
    buckets: dict[str, Bucket] = {}
    for path in sorted((folder / "findings").glob("*.json")):
        finding = load_finding(path)
        sig = signature_of(finding.kind.value, finding.statement, finding.about)
        # graded by this version's rules, which a campaign made earlier may predate
        graded = grade(Anomaly(finding.kind, finding.statement, finding.detail,
                               finding.about), finding.input)
        bucket = buckets.get(finding.id)
        if bucket is None:
            bucket = buckets[finding.id] = _bucket(
                name, profile, outcomes, sig, finding.kind.value, finding.statement,
                graded.value, finding.reproduces, rule_of(finding.input.statement)
                if finding.input.statement else "", notes, "grammar")
        bucket.findings.append(_finding_row(finding, path))
    stateful = _read(folder / "stateful.json", {})
    for found in stateful.get("findings", []):
        statements = [str(s) for s in found.get("statements", [])]
        if not statements:
            continue
        sig = signature_of(str(found.get("kind", "")), statements[0])
        bucket = _bucket(name, profile, outcomes, sig, str(found.get("kind", "")),
                         statements[0], _level_grade(str(found.get("level", ""))),
                         found.get("replay") in ("failed", "non-strict"), "", notes,
                         "stateful")
        bucket.findings.append({k: found.get(k) for k in (
            "case_id", "case_file", "detail", "version", "steps", "replay")})
        buckets[f"stateful:{bucket.signature}"] = bucket
    order = {c: n for n, c in enumerate(CATEGORIES)}
    return BrokerResults(
        name=name, profile=state.broker.profile, server=state.server,
        version=_text(folder / "version"),
        campaign={"seed": state.seed, "generator": state.generator,
                  "versions": list(state.versions), "tool_version": state.tool_version,
                  "elapsed_s": state.counters.elapsed_s, "inputs": state.counters.inputs,
                  "checks": state.counters.checks, "resources": state.resources,
                  "address": state.broker.address, "transport": state.broker.transport},
        stateful={k: v for k, v in stateful.items() if k != "findings"},
        probe=[{k: p.get(k) for k in ("probe", "grade", "summary")}
               for p in _read(folder / "probe.json", []) if isinstance(p, dict)],
        buckets=sorted(buckets.values(), key=lambda b: (order[b.category], b.known,
                                                          b.signature)))


def _text(path: Path) -> str:
    try:
        return path.read_text("utf-8").strip()
    except OSError:
        return ""


def _level_grade(level: str) -> str:
    return {"must": Outcome.FAILED.value, "should": Outcome.NON_STRICT.value}.get(
        level, Outcome.INFORMATIONAL.value)


def _read(path: Path, empty: Any) -> Any:
    """The JSON in `path` when it is of `empty`'s type, else `empty` (a step not run)."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return empty
    return data if isinstance(data, type(empty)) else empty


def read_notes(path: Path | None) -> dict[str, dict[str, Note]]:
    """BROKER -> SIGNATURE -> Note, from the triage notes file (none: empty)."""
    if path is None or not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text("utf-8")) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not YAML: {' '.join(str(error).split())}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict | None) for v in data.values()):
        raise ValueError(f"{path}: expected a mapping of broker names to notes by signature")
    return {str(broker): {str(sig): _note(path, entry) for sig, entry in (notes or {}).items()}
            for broker, notes in data.items()}


def _note(path: Path, entry: Any) -> Note:
    if not isinstance(entry, dict):
        return Note(str(entry))
    known, cases = entry.get("known"), entry.get("cases", [])
    if known is not None and not isinstance(known, bool) or not isinstance(cases, list):
        raise ValueError(f"{path}: a note's `known` is true or false, its `cases` a list")
    return Note(str(entry.get("note", "")), known, tuple(str(c) for c in cases))


def triage(folders: Iterable[Path], *, comparison: Mapping[str, Any] | None = None,
           notes: Mapping[str, Mapping[str, Note]] | None = None) -> list[BrokerResults]:
    notes = notes or {}
    return [triage_broker(folder, comparison=comparison, notes=notes.get(folder.name))
            for folder in folders]
