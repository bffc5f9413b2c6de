"""The engine: runs cases against a broker and emits events (runner.events). The CLI, the
pytest plugin and every report are handlers of these events; none of them runs a case itself.

Each case runs once per version it names that the profile speaks, with its own
connections, its own unique destinations and a byte-exact transcript. `jobs` cases run at
once (they wait on the network most of the time); a case has a timeout, the run a deadline.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable
from dataclasses import replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from conformance.runner.case_run import CaseDecided, CaseError, CaseRun, SetupRefused
from conformance.runner.events import (
    CaseFinished,
    CaseStarted,
    Handler,
    RunEvent,
    RunFinished,
    RunStarted,
)
from conformance.runner.judge import StepFailed
from conformance.runner.results import CaseResult, Outcome, Refusal
from conformance.runner.steps import STEPS
from conformance.scenario import Case, Step
from conformance.scenario.loader import load_file
from conformance.scenario.model import TRANSPORT_NAMES
from conformance.spec.grammar import VERSIONS
from conformance.wire.stream import TransportError
from conformance.wire.target import HarnessError, Target
from conformance.wire.transcript import Budget, Transcript


async def execute(run: CaseRun) -> None:
    """Run the case's steps in order, each knowing which is running (for its line), then
    judge the frames no step read; a step that ends the case leaves them judged too."""
    try:
        for step in run.case.steps:
            run.step = step
            await STEPS[step.kind](run, step.args)
    except (CaseDecided, StepFailed):
        await run.drain(run.connections.values(), run.received)
        raise
    await run.drain(run.connections.values(), run.received)


async def run_case(case: Case, version: str, target: Target, *, timeout: float,
                   run_id: str, strict: bool = False,
                   served: bool | None = None) -> tuple[CaseResult, dict[str, str]]:
    """Run one case at one version; never raises for anything the broker does. With
    `strict`, a deviation the profile declares is still named but keeps its grade.
    `served`: whether the broker gave the run's settings a session at this version before
    the cases (None: not tried). A session refused here though refused there while other
    versions were served is the broker's fault, a failure; else an error of the setup
    (refused settings, or a broker that served the same CONNECT before and is now at a
    limit, of connections say)."""
    run = CaseRun(case, version, target, run_id)
    profile = target.profile
    if version not in profile.versions:
        return run.result(Outcome.UNSUPPORTED, message=f"profile {profile.name!r} does not "
                     f"speak STOMP {version}"), {}
    transport = target.address.transport
    if transport not in case.transports:
        return run.result(Outcome.SKIPPED, message=f"the case runs over "
                     f"{' and '.join(TRANSPORT_NAMES[t] for t in case.transports)} only, "
                     f"this run over {TRANSPORT_NAMES[transport]}"), {}
    missing = [c for c in case.requires if not profile.supports(c)]
    if missing:
        return run.result(Outcome.UNSUPPORTED, message="; ".join(
            target.probed.get(c, f"profile {profile.name!r} declares {c} absent")
            for c in missing)), {}
    failure: StepFailed | None = None
    error = ""
    refused: Refusal | None = None
    try:
        async with asyncio.timeout(case.timeout or timeout):
            await execute(run)
    except CaseDecided:  # graded by the step that ended it
        pass
    except StepFailed as failed:
        failure = failed
    except SetupRefused as problem:
        if served is False:
            failure = StepFailed("CONNECTED", problem.observed, statements=case.at_stake(
                version, SESSION.statements))
        else:
            error, refused = str(problem), problem.how
            if served:
                error += " (it served the same CONNECT before the cases: at a limit of " \
                         "connections? try fewer --jobs)"
            elif not problem.observed.startswith("nothing"):  # an ERROR or a close
                error += " (check --login, --passcode, --vhost or the profile)"
    except CaseError as problem:
        error = str(problem)
    except TimeoutError:
        error = f"the case did not finish within its timeout of {case.timeout or timeout:g} s"
    except Exception as problem:  # a harness bug: one case's error, not the run's end
        error = f"harness error in step at line {run.step.line if run.step else 0}: " \
                f"{type(problem).__name__}: {problem}"
    finally:
        await run.close()
    step_line = run.step.line if run.step else 0
    if error:
        return run.result(Outcome.ERROR, message=error, setup_refused=refused,
                     step_line=step_line, violations=[j.text for j in run.found]), run.server
    outcome, fields = run.judged(failure, profile, strict=strict)
    return run.result(outcome, **fields), run.server



# -- the run -------------------------------------------------------------------------------

#: The session every case needs: the CONNECT a `connect: {}` step sends with the run's
#: settings, tried once per version before the cases.
SESSION = Case(id="setup.session", title="a CONNECT with the run's settings",
               statements=("connecting.connected-response",
                           "connecting.connected-response-v10"),
               versions=VERSIONS, level="must", tags=(), requires=(), timeout=None,
               steps=(Step("connect", {}, 0),))


@cache
def capability_cases() -> dict[tuple[str, str, bool], Case]:
    """(capability, version, held) -> the case of scenario/capabilities.yaml that shows
    the broker has the capability at that version (held: lacks it legally)."""
    shipped = Path(str(resources.files("conformance.scenario") / "capabilities.yaml"))
    return {(tag.split(":", 1)[1], case.versions[0], "held" in case.tags): case
            for case in load_file(shipped) for tag in case.tags
            if tag.startswith("capability:")}


def _unrun(case: Case, version: str, outcome: Outcome, message: str,
           **extra: Any) -> CaseResult:
    return CaseResult(case.id, case.title, version, outcome, case.level_at(version),
                      case.statements, case.versions, case.area, case.file, case.line,
                      message=message, levels=case.levels_at(version), **extra)


class Engine:
    def __init__(self, target: Target, *, jobs: int = 4, case_timeout: float = 30.0,
                 deadline: float | None = None, strict: bool = False,
                 transcripts: int = 16 << 20) -> None:
        if jobs < 1:
            raise ValueError("jobs must be at least 1")
        # a profile's limit wins: more at once would only break the broker's other sessions
        self.target, self.strict = target, strict
        self.jobs = min(jobs, target.profile.jobs or jobs)
        self.case_timeout, self.deadline = case_timeout, deadline
        self.run_id = uuid.uuid4().hex[:8]
        #: what the run's results keep of their transcripts, in all (octets)
        self.kept = Budget(transcripts)
        #: version -> the setup case the broker refused there, when it refused it at
        #: every version (see `sessions`)
        self.refused: dict[str, CaseResult] = {}
        #: the versions at which it served the session
        self.served: set[str] = set()
        self.subprotocol: str | None = None

    async def preflight(self) -> None:
        """Fail fast, with one line, when the broker cannot be reached at all."""
        try:
            transport = await self.target.open()
        except TransportError as error:
            raise HarnessError(str(error)) from None
        #: over WebSocket, the subprotocol the broker accepted, for the reports
        self.subprotocol = transport.subprotocol
        await transport.close()

    async def sessions(self) -> None:
        """A CONNECT with the run's settings at each version the profile speaks. Refused
        at every one, the settings or the broker's state are at fault and no case can check
        its statement (`refused`); refused at some only, the broker breaks a rule there (a
        1.0 CONNECT answered as 1.2, say)."""
        async def refusal(version: str) -> CaseResult | None:
            result, _ = await run_case(SESSION, version, self.target,
                                       timeout=self.case_timeout, run_id=self.run_id)
            return result if result.setup_refused else None

        chosen = list(self.target.profile.versions)
        answers = await asyncio.gather(*map(refusal, chosen))
        refused = {v: why for v, why in zip(chosen, answers, strict=True) if why}
        if len(refused) < len(chosen):
            # served at one version: those refused are tried again one at a time, as a
            # broker may serve only a few connections at once
            refused = {v: why for v in refused if (why := await refusal(v))}
        self.served = set(chosen) - refused.keys()
        self.refused = refused if not self.served else {}

    async def capabilities(self, cases: Iterable[Case]) -> None:
        """Find out from the broker each capability a case requires that the profile does
        not declare and scenario/capabilities.yaml can show, at the highest version that
        shows it: absent only where the broker was seen to lack it legally."""
        profile = self.target.profile
        wanted = {c for case in cases for c in case.requires} - profile.capabilities.keys()
        found: dict[str, bool | int] = {}
        probed: dict[str, str] = {}
        slots = asyncio.Semaphore(self.jobs)

        async def probe(name: str) -> None:  # each on connections and destinations of its own
            version = next((v for v in reversed(profile.versions)
                            if (name, v, False) in capability_cases()), None)
            if version is None:
                return
            async with slots:
                has, _ = await run_case(capability_cases()[name, version, False], version,
                                        self.target, timeout=self.case_timeout,
                                        run_id=self.run_id)
                if has.outcome == Outcome.PASSED:
                    return
                held, _ = await run_case(capability_cases()[name, version, True], version,
                                         self.target, timeout=self.case_timeout,
                                         run_id=self.run_id)
            if held.outcome == Outcome.PASSED:
                found[name] = False
                probed[name] = f"{name} absent, as the broker showed at STOMP {version}: " \
                               f"{held.title[0].lower()}{held.title[1:]}"

        await asyncio.gather(*map(probe, sorted(wanted)))
        if found:
            self.target = replace(self.target, probed=probed, profile=replace(
                profile, capabilities={**profile.capabilities, **found}))

    async def run(self, cases: Iterable[Case], handlers: Iterable[Handler] = ()) -> list[
            CaseResult]:
        handlers = list(handlers)

        def emit(event: RunEvent) -> None:
            for handler in handlers:
                handler(event)

        # a case for another transport is not this run's, as a case not selected is not
        cases = [case for case in cases if self.target.address.transport in case.transports]
        work = [(case, version) for case in cases for version in case.versions]
        started = time.monotonic()
        await self.preflight()
        await self.sessions()
        if not self.refused:
            await self.capabilities(cases)
        emit(RunStarted(self.target, len(work)))
        slots = asyncio.Semaphore(self.jobs)
        server: dict[str, str] = {}

        async def one(case: Case, version: str) -> CaseResult:
            async with slots:
                if self.deadline is not None and time.monotonic() - started > self.deadline:
                    result = _unrun(case, version, Outcome.SKIPPED, "the run's deadline passed")
                elif (refused := self.refused.get(version)) is not None:
                    result = _unrun(case, version, Outcome.ERROR,
                                    f"STOMP {version}: {refused.message}",
                                    setup_refused=refused.setup_refused)
                else:
                    emit(CaseStarted(case, version))
                    result, seen = await run_case(case, version, self.target,
                                                  timeout=self.case_timeout,
                                                  run_id=self.run_id, strict=self.strict,
                                                  served=version in self.served)
                    if isinstance(result.transcript, Transcript):
                        self.kept.keep(result.transcript)
                    if seen and "server" not in server:  # a 1.0 CONNECTED may not name it
                        server.clear()
                        server.update(seen)
                emit(CaseFinished(result))
                return result

        # a case that brings the broker down runs with nothing beside it, before the rest
        alone = self.target.profile.alone
        results = [await one(c, v) for c, v in work if c.id in alone]
        results += await asyncio.gather(*(one(c, v) for c, v in work if c.id not in alone))
        ordered = sorted(results, key=lambda r: r.key)
        emit(RunFinished(ordered, time.monotonic() - started, server, self.subprotocol))
        return ordered
