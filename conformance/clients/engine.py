"""Running client cases: each case at each of its versions, with a fresh scripted broker and
a fresh driver process, graded as broker cases are (the case's level for an expectation
not met, each broken statement's level for what the validator found), and in the light of
the library's profile as broker cases are in their broker's. Nothing a driver or a client
does raises out of here: it is a grade, or an error of one line."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.clients.driver_process import DriverError
from conformance.clients.run import ClientRun, Unsupported
from conformance.clients.steps import STEPS
from conformance.profiles import Profile
from conformance.runner.case_run import CaseDecided, CaseError
from conformance.runner.judge import StepFailed
from conformance.runner.results import CaseResult, Outcome
from conformance.scenario import Case
from conformance.scenario.model import TRANSPORT_NAMES


@dataclass
class ClientInfo:
    """The client under test, as a report names it."""

    #: the driver command, as given (a report scrubs the run's passcode from it)
    driver: str
    transport: str = "tcp"
    #: from the driver's `ready` event (empty until one came)
    library: str = ""
    version: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: the client profile's name, when the run has one
    profile: str = ""
    #: over WebSocket, per STOMP version asked: the subprotocols the client offered in its
    #: upgrade and the one accepted (None: refused), as the first case run saw them
    websocket: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"driver": self.driver, "transport": self.transport,
                "library": self.library or None, "version": self.version or None,
                "profile": self.profile or None,
                **({"websocket": dict(sorted(self.websocket.items()))}
                   if self.transport == "ws" else {})}


async def execute(run: ClientRun) -> None:
    await run.listen()
    await run.start_driver()
    try:
        for step in run.case.steps:
            run.step = step
            await STEPS[step.kind](run, step.args)
    except (CaseDecided, StepFailed):
        await _drain(run)
        raise
    await _drain(run)


async def _drain(run: ClientRun) -> None:
    """Judge what the client sent that no step read."""
    if run.conn is not None:
        await run.drain((run.conn,), lambda _, frame: run.received(frame))


async def said_unsupported(run: ClientRun) -> str:
    """Why the driver said its library cannot do a command, if it said so by now: a
    command no step waited for (`wait: false`) is answered while the steps look at the
    client's frames, and a frame it never sent is then no failure of the library's."""
    try:
        while await run.next_event(0) is not None:
            pass
    except Unsupported as problem:
        return str(problem)
    except (StepFailed, DriverError, CaseError):
        pass
    return ""


async def run_client_case(case: Case, version: str, driver: str, *, timeout: float = 30.0,
                          transport: str = "tcp", run_id: str = "",
                          info: ClientInfo | None = None, profile: Profile | None = None,
                          strict: bool = False) -> CaseResult:
    """One client case at one version against the client `driver` runs, graded in the light
    of the library's `profile` (see `declared`); never raises for anything the driver or
    the client does."""
    run = ClientRun(case, version, driver, run_id or secrets.token_hex(3), transport=transport)
    if profile is not None and version not in profile.versions:
        return run.result(Outcome.UNSUPPORTED, message=f"profile {profile.name!r} does not "
                     f"speak STOMP {version}")
    if transport not in case.transports:
        return run.result(Outcome.SKIPPED, message=f"the case runs over "
                     f"{' and '.join(TRANSPORT_NAMES[t] for t in case.transports)} only")
    failure: StepFailed | None = None
    error = unsupported = ""
    try:
        async with asyncio.timeout(case.timeout or timeout):
            await execute(run)
    except CaseDecided:  # graded by the step that ended it
        pass
    except StepFailed as failed:
        failure = failed
        unsupported = await said_unsupported(run)
    except Unsupported as problem:
        unsupported = str(problem)
    except (DriverError, CaseError) as problem:
        error = str(problem)
    except TimeoutError:
        error = f"the case did not finish within its timeout of {case.timeout or timeout:g} s"
    except Exception as problem:  # a harness bug: one case's error, not the run's end
        error = f"harness error in step at line {run.step.line if run.step else 0}: " \
                f"{type(problem).__name__}: {problem}"
    finally:
        await run.close()
    if info is not None and run.driver is not None and run.driver.ready and not info.library:
        info.library = str(run.driver.ready.get("library", ""))[:200]
        info.version = str(run.driver.ready.get("version", ""))[:100]
    if info is not None and run.upgrade is not None:
        info.websocket.setdefault(version, run.upgrade)
    step_line = run.step.line if run.step else 0
    found = {"step_line": step_line, "violations": [j.text for j in run.found]}
    if unsupported:
        return run.result(Outcome.UNSUPPORTED, message=unsupported[:300], **found)
    if error:
        return run.result(Outcome.ERROR, message=error[:300], **found)
    outcome, fields = run.judged(failure, profile, strict=strict)
    if run.lenient:  # named beside the verdict: the case graded what came after it
        fields["message"] = "; ".join(m for m in (fields.get("message"), run.lenient) if m)
    return run.result(outcome, **fields)


async def run_client_cases(cases: Iterable[Case], driver: str, *, jobs: int = 4,
                           timeout: float = 30.0, transport: str = "tcp",
                           info: ClientInfo | None = None, run_id: str = "",
                           profile: Profile | None = None, strict: bool = False,
                           done: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:
    """Every case at each of its versions, `jobs` at once, in case order."""
    gate = asyncio.Semaphore(jobs)
    run_id = run_id or secrets.token_hex(3)

    async def one(case: Case, version: str) -> CaseResult:
        async with gate:
            result = await run_client_case(case, version, driver, timeout=timeout,
                                           transport=transport, run_id=run_id, info=info,
                                           profile=profile, strict=strict)
        if done is not None:
            done(result)
        return result

    return list(await asyncio.gather(*(one(case, version) for case in cases
                                       for version in case.versions)))
