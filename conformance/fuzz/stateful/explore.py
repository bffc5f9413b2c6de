"""The stateful fuzzer: runs the session state machine (conformance/fuzz/stateful/machine.py)
under Hypothesis against a broker, the reference broker in this process by default, and
keeps the smallest failing session Hypothesis shrinks to. That session is written as a case
of the catalogue's format and replayed once against the same broker to confirm it:
`stomp-conformance run --cases FILE` replays it again, against any broker."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as seeded
from hypothesis.stateful import run_state_machine_as_test

from conformance.broker import Broker, BrokerConfig
from conformance.fuzz.stateful.harness import (
    IN_PROCESS,
    Loop,
    Runner,
    StatefulOptions,
    TimeUp,
    Violation,
)
from conformance.fuzz.stateful.machine import SessionMachine
from conformance.profiles import load_profile
from conformance.runner.engine import Engine
from conformance.runner.results import Outcome
from conformance.scenario import load_file
from conformance.spec import catalogue
from conformance.wire.target import HarnessError, Target
from conformance.wire.transport import parse_broker


@dataclass(frozen=True)
class StatefulFinding:
    """The smallest failing session found, saved as a replayable case."""

    kind: str
    statements: tuple[str, ...]
    level: str
    detail: str
    version: str
    #: rule steps of the shrunk session
    steps: int
    seed: int
    case_id: str
    case_file: str | None
    #: the case's outcome replayed against the same broker: `failed` (or `non-strict`)
    #: confirms the finding; `not-run` when no file was written
    replay: str

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "statements": list(self.statements), "level": self.level,
                "detail": self.detail, "version": self.version, "steps": self.steps,
                "seed": self.seed, "case_id": self.case_id, "case_file": self.case_file,
                "replay": self.replay}



def write_case(case: dict[str, Any], folder: Path, *, note: str = "") -> Path:
    """Write `case` as `<id>.yaml` in `folder` (created if need be), a comment first."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{case['id']}.yaml"
    head = "".join(f"# {line}\n" for line in note.splitlines())
    text = yaml.safe_dump([case], sort_keys=False, allow_unicode=True, width=100,
                          default_flow_style=None)
    path.write_text(head + text, encoding="utf-8")
    return path


async def replay_case(path: Path, target: Target) -> list[Outcome]:
    """Run a saved case against `target`: the outcome of each of its versions."""
    engine = Engine(target, jobs=1, case_timeout=60)
    results = await engine.run(load_file(path))
    return [r.outcome for r in results]


@contextlib.contextmanager
def _target(target: Target | None, broker: BrokerConfig | None, loop: Loop,
            websocket: bool) -> Iterator[Target]:
    """`target`, or the reference broker served on `loop` for the duration (reached over
    WebSocket with `websocket`)."""
    if target is not None:
        yield target
        return
    config = broker or BrokerConfig(port=0)
    if websocket and config.ws_port is None:
        config = replace(config, ws_port=0)
    server = Broker(config)
    loop.call(server.start(), 10)
    try:
        yield Target(parse_broker(server.url(websocket=websocket)), load_profile("reference"))
    finally:
        loop.call(server.stop(), 30)


def run_stateful(target: Target | None = None, *, seed: int = 0, max_examples: int = 50,
                 deadline: float = 120.0, cases_dir: Path | str = Path("fuzz-cases"),
                 options: StatefulOptions | None = None,
                 broker: BrokerConfig | None = None,
                 websocket: bool = False) -> list[StatefulFinding]:
    """Run the state machine against `target` (default: the reference broker in this
    process, configured by `broker`, over WebSocket with `websocket`) for at most
    `max_examples` sessions and about `deadline` seconds, shrinking included. Returns the
    smallest failing session found (at most one), written into `cases_dir` as a case and
    replayed once against the target.
    `options` default to IN_PROCESS timings for the reference broker, StatefulOptions()
    for any other. Raises HarnessError when the broker cannot be reached at all."""
    if max_examples < 1:
        raise ValueError(f"max_examples must be at least 1, not {max_examples}")
    if not deadline > 0:
        raise ValueError(f"deadline must be a number of seconds above 0, not {deadline}")
    options = options or (StatefulOptions() if target is not None else IN_PROCESS)
    loop = Loop()
    try:
        with _target(target, broker, loop, websocket) as where:
            loop.call(Engine(where).preflight(), 30)
            runner = Runner(where, options, loop, time.monotonic() + deadline, seed)

            def machine() -> SessionMachine:
                return SessionMachine(runner)

            config = settings(
                max_examples=max_examples, deadline=None, stateful_step_count=options.steps,
                database=None, report_multiple_bugs=False, derandomize=False,
                phases=(Phase.generate, Phase.shrink), verbosity=Verbosity.quiet,
                suppress_health_check=list(HealthCheck), print_blob=False)
            try:
                # Hypothesis takes any factory of machines, though typed for a class.
                run_state_machine_as_test(seeded(seed)(machine),  # type: ignore[arg-type]
                                          settings=config)
            except TimeUp:
                pass
            except Exception:
                # What failed is in runner.best: the smallest session seen failing. A
                # session cut short by the time limit may look flaky to Hypothesis.
                if runner.best is None and not runner.spent():
                    raise
            best = runner.best
            if best is None:
                return []
            return [_finding(best, where, Path(cases_dir), seed, loop)]
    finally:
        loop.close()


def _finding(best: Violation, target: Target, folder: Path, seed_: int,
             loop: Loop) -> StatefulFinding:
    problem = best.problem
    note = (f"Found by the stateful fuzzer (seed {seed_}, {best.steps} steps) against "
            f"{target.address.display}.\n{problem.kind}: {problem.detail}")
    path = write_case(best.case, folder, note=note)
    try:
        outcomes = loop.call(replay_case(path, target), 120)
        replay = outcomes[0].value if outcomes else "error: no result"
    except (HarnessError, TimeoutError) as error:
        replay = f"error: {error}"
    case = best.case
    level = min((catalogue()[s].level.strength for s in case["statements"]),
                key=("must", "should", "may").index)
    return StatefulFinding(kind=problem.kind, statements=tuple(case["statements"]),
                           level=level, detail=problem.detail, version=best.version,
                           steps=best.steps, seed=seed_, case_id=case["id"],
                           case_file=str(path), replay=replay)



__all__ = ["StatefulFinding", "StatefulOptions", "replay_case", "run_stateful", "write_case"]
