"""Proof that the catalogue is right: coverage of the statement catalogue by cases, and the
self-test against the reference broker and its faults (and of the client cases against the
reference driver and its faults).

A case that passes on every broker proves nothing, so the self-test (a) runs the catalogue
against the clean reference broker, where every case must pass, and (b) runs cases against
the broker with each fault switched on, where every case must fail under at least one fault
and every fault must make at least one case fail. By default each case runs under the
faults its `fault:NAME` tags name; `full=True` runs every case under every fault (the kill
matrix).

A verdict must hold for every conformant broker, not only the reference broker's defaults:
`selftest_variants` runs the catalogue against the broker under each legal configuration
of broker/variants.py, where every case run must be passed, informational or unsupported.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from conformance.broker import FAULTS, embedded
from conformance.broker.faults import WEBSOCKET_FAULTS
from conformance.broker.variants import VARIANTS, Variant, variant
from conformance.clients import REFERENCE_DRIVER, run_client_cases
from conformance.clients.faults import CLIENT_FAULTS, WEBSOCKET_CLIENT_FAULTS
from conformance.profiles import load_profile
from conformance.runner.engine import Engine
from conformance.runner.results import SEVERITY, CaseResult, Outcome, worst
from conformance.scenario import Case
from conformance.spec import Statement, catalogue, rule_of
from conformance.wire.target import Target
from conformance.wire.transport import parse_broker

CLEAN = (Outcome.PASSED, Outcome.INFORMATIONAL)
#: reference brokers with a fault running at once in `selftest`, `jobs` cases each
FAULT_BROKERS = 16
#: faults of the reference driver tried at once in `client_selftest`, `jobs` cases each:
#: each case run starts a driver process, so fewer than FAULT_BROKERS
FAULTY_DRIVERS = 4
#: what a case may grade the broker under a legal configuration (a capability it lacks is
#: the profile's business)
VARIANT_CLEAN = (*CLEAN, Outcome.UNSUPPORTED)


# -- coverage ---------------------------------------------------------------------------------

@dataclass
class Coverage:
    #: (statement id, version) -> ids of the cases that check it at that version
    covered: dict[tuple[str, str], list[str]]
    #: observable (statement, version) pairs no case checks
    uncovered: list[tuple[str, str]]
    #: cases that name no statement (the schema forbids it; kept as a check)
    orphans: list[str]

    @property
    def rate(self) -> float:
        total = len(self.covered) + len(self.uncovered)
        return len(self.covered) / total if total else 1.0

    def to_json(self) -> dict[str, object]:
        return {
            "observable_pairs": len(self.covered) + len(self.uncovered),
            "covered_pairs": len(self.covered), "rate": round(self.rate, 4),
            "uncovered": [{"statement": s, "version": v} for s, v in self.uncovered],
            "orphans": self.orphans,
            "covered": [{"statement": s, "version": v, "cases": c}
                        for (s, v), c in sorted(self.covered.items())],
        }


def coverage(cases: Iterable[Case], *, client: bool = False) -> Coverage:
    """The observable statement-version pairs `cases` cover; `client`: of the client
    cases, the statements a scripted broker can see a client follow or break."""
    chosen = list(cases)

    def seen(statement: Statement) -> bool:
        return statement.client_observable if client else statement.observable

    covered: dict[tuple[str, str], list[str]] = {}
    for case in chosen:
        for statement_id in case.statements:
            statement = catalogue()[statement_id]
            for version in case.versions:
                if version in statement.versions and seen(statement):
                    covered.setdefault((statement_id, version), []).append(case.id)
    uncovered: list[tuple[str, str]] = [(s.id, v) for s in catalogue() if seen(s)
                                        for v in s.versions if (s.id, v) not in covered]
    return Coverage(covered, uncovered, [c.id for c in chosen if not c.statements])


# -- self-test --------------------------------------------------------------------------------

@dataclass
class SelfTest:
    clean: list[CaseResult]
    #: fault -> the statement it breaks (FAULTS, CLIENT_FAULTS)
    breaks: dict[str, str] = field(default_factory=dict)
    #: fault -> case id -> outcome under that fault
    matrix: dict[str, dict[str, Outcome]] = field(default_factory=dict)
    #: fault -> case id -> the statements the checks its runs failed under it speak for
    failed_on: dict[str, dict[str, set[str]]] = field(default_factory=dict)

    def record(self, fault: str, results: Iterable[CaseResult]) -> None:
        """The case runs under `fault`: a case is as bad as its worst version."""
        row = self.matrix.setdefault(fault, {})
        on = self.failed_on.setdefault(fault, {})
        for r in results:
            row[r.id] = worst(row.get(r.id, Outcome.PASSED), r.outcome)
            on.setdefault(r.id, set()).update(
                s for check in r.broken for s in check.get("statements", ()))

    @property
    def not_passing(self) -> list[CaseResult]:
        return [r for r in self.clean if r.outcome not in CLEAN]

    def killed(self, case_id: str, outcome: Outcome | None) -> bool:
        """A fault kills a case when the case grades it worse than the clean broker (an
        error is the harness's trouble, not a kill)."""
        clean = worst(*(r.outcome for r in self.clean if r.id == case_id))
        return outcome is not None and outcome != Outcome.ERROR and \
            SEVERITY[outcome] > SEVERITY[clean]

    def on_its_statement(self, fault: str, case_id: str) -> bool:
        """Whether `fault` kills the case by a failed check that speaks for the statement
        the fault breaks (at some version: its rule)."""
        rule = rule_of(self.breaks.get(fault, ""))
        return self.killed(case_id, self.matrix[fault].get(case_id)) and any(
            rule_of(s) == rule for s in self.failed_on.get(fault, {}).get(case_id, ()))

    def killers(self, case_id: str) -> list[str]:
        return sorted(f for f, row in self.matrix.items()
                      if self.killed(case_id, row.get(case_id)))

    @property
    def killed_by_others(self) -> list[str]:
        """Cases that fail only under faults of statements other than theirs: able to
        fail, not yet shown failing on a statement they check."""
        return [c for c in sorted({r.id for r in self.clean}) if self.killers(c)
                and not any(self.on_its_statement(f, c) for f in self.matrix)]

    @property
    def survivors(self) -> list[str]:
        """Cases no fault made fail."""
        ids = sorted({r.id for r in self.clean})
        return [c for c in ids if not self.killers(c)]

    @property
    def idle_faults(self) -> list[str]:
        """Faults that made no case fail."""
        return sorted(f for f, row in self.matrix.items()
                      if not any(self.killed(c, o) for c, o in row.items()))

    @property
    def by_accident(self) -> list[str]:
        """Faults that made cases fail, none of them on the statement the fault breaks."""
        return sorted(f for f, row in self.matrix.items() if f not in self.idle_faults
                      and not any(self.on_its_statement(f, c) for c in row))

    @property
    def untried_faults(self) -> list[str]:
        """Idle faults tried on no case at all: no case chosen carries their `fault:NAME`
        tag (without `full`, the tags choose a fault's cases)."""
        return sorted(f for f, row in self.matrix.items() if not row)

    @property
    def own_kills(self) -> int:
        """How many faults made some case fail on the statement they break."""
        return len(self.matrix) - len(self.idle_faults) - len(self.by_accident)

    @property
    def kill_rate(self) -> float:
        ids = {r.id for r in self.clean}
        return (len(ids) - len(self.survivors)) / len(ids) if ids else 1.0

    @property
    def ok(self) -> bool:
        return not (self.not_passing or self.survivors or self.idle_faults
                    or self.by_accident)

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok, "kill_rate": round(self.kill_rate, 4),
            "cases": len({r.id for r in self.clean}), "case_runs": len(self.clean),
            "clean": dict(Counter(r.outcome.value for r in self.clean)),
            "faults": len(self.matrix),
            "killed_on_its_statement": self.own_kills,
            "not_passing": [{"id": r.id, "version": r.version, "outcome": r.outcome.value,
                             "message": r.message} for r in self.not_passing],
            "survivors": self.survivors, "idle_faults": self.idle_faults,
            "by_accident": self.by_accident, "killed_by_others": self.killed_by_others,
            "untried_faults": self.untried_faults,
            "matrix": {f: {c: o.value for c, o in sorted(row.items())}
                       for f, row in sorted(self.matrix.items())},
        }


def over_transport(cases: Iterable[Case], websocket: bool) -> list[Case]:
    """The cases that run over WebSocket (`websocket`) or TCP."""
    return [c for c in cases if ("ws" if websocket else "tcp") in c.transports]


def planned_faults(case: Case) -> list[str]:
    return [t.split(":", 1)[1] for t in case.tags if t.startswith("fault:")
            and t.split(":", 1)[1] in FAULTS]


def planned_variant(case: Case) -> Variant:
    """The configuration a case's faults are tried under (its `variant:NAME` tag): one
    where the behaviour the fault breaks is reachable (rejecting an unknown virtual host
    needs a broker that serves named ones)."""
    named = [t.split(":", 1)[1] for t in case.tags if t.startswith("variant:")]
    return variant(named[0]) if named else VARIANTS[0]


async def _run_against(cases: list[Case], chosen: Variant, *, jobs: int, timeout: float,
                       faults: frozenset[str] = frozenset(),
                       websocket: bool = False) -> list[CaseResult]:
    config = chosen.broker_config()
    config = replace(config, faults=config.faults | faults)
    profile = load_profile("reference")
    async with embedded(config, websocket=websocket) as broker:
        target = Target(parse_broker(broker.url(websocket=websocket)), profile,
                        login=chosen.login, passcode=chosen.passcode, host=chosen.vhost)
        return await Engine(target, jobs=jobs, case_timeout=timeout).run(cases)


async def selftest(cases: list[Case], *, full: bool = False, jobs: int = 8,
                   timeout: float = 30.0, websocket: bool = False,
                   progress: Callable[[str], None] = lambda _: None) -> SelfTest:
    """`websocket`: every run over STOMP over WebSocket instead of TCP. Only the cases
    that run over the transport are chosen, and over TCP no fault of the WebSocket
    framing (WEBSOCKET_FAULTS) is tried."""
    cases = over_transport(cases, websocket)
    faults = [f for f in FAULTS if websocket or f not in WEBSOCKET_FAULTS]
    over = " over WebSocket" if websocket else ""
    progress(f"the catalogue against the reference broker{over} ({len(cases)} cases)")
    result = SelfTest(await _run_against(cases, VARIANTS[0], jobs=jobs, timeout=timeout,
                                         websocket=websocket),
                      {name: statement for name, (statement, _) in FAULTS.items()})
    #: (fault, variant name) -> the cases tried under that fault in that configuration
    plan: dict[tuple[str, str], list[Case]] = {}
    for case in cases:
        for fault in (faults if full else planned_faults(case)):
            if fault in faults:
                plan.setdefault((fault, planned_variant(case).name), []).append(case)
    for fault in faults:
        if not any(f == fault for f, _ in plan):
            plan[(fault, VARIANTS[0].name)] = []
    # Under a fault most case runs wait out a window (for a frame or a close that does not
    # come) and cost next to no CPU: a fault's cases go to brokers of `jobs` cases each,
    # FAULT_BROKERS of them at once, so that a fault killing many cases is no long pole.
    slots = asyncio.Semaphore(FAULT_BROKERS)

    async def part(fault: str, chosen: Variant, picked: list[Case]) -> list[CaseResult]:
        async with slots:
            return await _run_against(picked, chosen, faults=frozenset({fault}), jobs=jobs,
                                      timeout=timeout, websocket=websocket)

    async def one(fault: str, chosen: Variant, picked: list[Case]) -> None:
        parts = await asyncio.gather(*(part(fault, chosen, picked[i:i + jobs])
                                       for i in range(0, len(picked), jobs)))
        results = [r for done in parts for r in done]
        result.record(fault, results)
        row = result.matrix[fault]
        progress(f"fault {fault} ({chosen.name}): "
                 f"{sum(result.killed(r.id, row[r.id]) for r in results)} case runs of "
                 f"{len(picked)} cases killed")

    await asyncio.gather(*(one(f, variant(v), c) for (f, v), c in sorted(plan.items())))
    return result


# -- variants -----------------------------------------------------------------------------------

@dataclass
class VariantRun:
    variant: Variant
    results: list[CaseResult]
    seconds: float = 0.0

    @property
    def bad(self) -> list[CaseResult]:
        return [r for r in self.results if r.outcome not in VARIANT_CLEAN]


@dataclass
class Variants:
    runs: list[VariantRun]

    @property
    def bad(self) -> list[tuple[str, CaseResult]]:
        """(variant name, case run) for every case run graded worse than clean."""
        return [(run.variant.name, r) for run in self.runs for r in run.bad]

    @property
    def ok(self) -> bool:
        return not self.bad

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "variants": [{**run.variant.to_json(), "case_runs": len(run.results),
                          "clean": len(run.results) - len(run.bad), "bad": len(run.bad),
                          "seconds": round(run.seconds, 1)} for run in self.runs],
            "bad": [{"variant": name, "id": r.id, "version": r.version,
                     "outcome": r.outcome.value, "message": r.message}
                    for name, r in self.bad],
        }


async def selftest_variants(cases: list[Case], variants: Iterable[Variant], *, jobs: int = 8,
                            timeout: float = 30.0, at_once: int = 2, websocket: bool = False,
                            progress: Callable[[str], None] = lambda _: None) -> Variants:
    """The catalogue against the reference broker under each variant, `at_once` brokers at
    a time (all in this process: more would only make timing cases race for one core)."""
    chosen = list(variants)
    cases = over_transport(cases, websocket)
    slots = asyncio.Semaphore(at_once)

    async def one(configuration: Variant) -> VariantRun:
        async with slots:
            started = time.monotonic()
            results = await _run_against(cases, configuration, jobs=jobs, timeout=timeout,
                                         websocket=websocket)
            run = VariantRun(configuration, results, time.monotonic() - started)
        progress(f"variant {configuration.name}: {len(results)} case runs, {len(run.bad)} "
                 f"bad ({run.seconds:.0f} s)")
        return run

    progress(f"{len(cases)} cases under {len(chosen)} broker configurations")
    return Variants(list(await asyncio.gather(*(one(v) for v in chosen))))


# -- the client catalogue -------------------------------------------------------------------

def planned_client_faults(case: Case) -> list[str]:
    return [t.split(":", 1)[1] for t in case.tags if t.startswith("fault:")
            and t.split(":", 1)[1] in CLIENT_FAULTS]


async def client_selftest(cases: list[Case], *, full: bool = False, jobs: int = 8,
                          timeout: float = 30.0, driver: str = REFERENCE_DRIVER,
                          transport: str = "tcp",
                          progress: Callable[[str], None] = lambda _: None) -> SelfTest:
    """The client cases against the reference driver (every case must pass) and against
    it under each of its faults (every case must fail under one, each fault must make one
    fail): under the faults each case's tags name, or with `full` every fault; the client
    reaching the scripted broker over `transport` (tcp or ws)."""
    cases = over_transport(cases, transport == "ws")
    progress(f"the client cases against the reference driver ({len(cases)} cases)")
    result = SelfTest(await run_client_cases(cases, driver, jobs=jobs, timeout=timeout,
                                             transport=transport),
                      {name: statement for name, (statement, _) in CLIENT_FAULTS.items()})
    slots = asyncio.Semaphore(FAULTY_DRIVERS)

    async def one(fault: str) -> None:
        picked = [c for c in cases if full or fault in planned_client_faults(c)]
        async with slots:
            results = await run_client_cases(picked, f"{driver} --fault {fault}", jobs=jobs,
                                             timeout=timeout, transport=transport) \
                if picked else []
        result.record(fault, results)
        row = result.matrix[fault]
        progress(f"fault {fault}: {sum(result.killed(i, o) for i, o in row.items())} of "
                 f"{len(picked)} cases killed")

    await asyncio.gather(*(one(f) for f in CLIENT_FAULTS
                           if transport == "ws" or f not in WEBSOCKET_CLIENT_FAULTS))
    return result
