"""What every session of one stateful run shares: its options, the event loop its
connections live on (`Loop`, a thread of its own: the machine is synchronous, Hypothesis),
the `Runner` that keeps the smallest Violation, and the exceptions a session ends with."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from conformance.spec.session import Problem
from conformance.wire.target import Target

T = TypeVar("T")


@dataclass(frozen=True)
class StatefulOptions:
    #: seconds to wait after each step for deliveries the model forbids
    settle: float = 0.05
    #: seconds an answer, or a delivery the model requires, may take
    within: float = 2.0
    #: seconds the connection may stay open after an ERROR
    grace: float = 1.0
    #: unacknowledged messages of a connection that ended must be delivered again
    redelivery: bool = True
    #: rule steps per session
    steps: int = 25
    #: also send frames the broker must refuse or ignore (SEND before CONNECT, ACK of an
    #: id never sent or sent to another connection); off: only well-formed sessions, so
    #: that a broker's known answer to those does not hide everything else
    refusals: bool = True
    #: seconds to shrink the first failing session at most; None: until the deadline
    shrink: float | None = None

    def __post_init__(self) -> None:
        for name in ("within", "grace"):
            if not getattr(self, name) > 0:
                raise ValueError(f"StatefulOptions.{name} must be a number of seconds above 0")
        if self.shrink is not None and not self.shrink > 0:
            raise ValueError("StatefulOptions.shrink must be a number of seconds above 0")
        if self.settle < 0:
            raise ValueError("StatefulOptions.settle must not be negative")
        if self.steps < 1:
            raise ValueError("StatefulOptions.steps must be at least 1")


#: For the reference broker in this process, which answers in well under a millisecond.
IN_PROCESS = StatefulOptions(settle=0.0005, within=0.5, steps=15)


class Violation(AssertionError):
    """The broker did what the model does not allow; `case` replays the session."""

    def __init__(self, problem: Problem, case: dict[str, Any], steps: int, version: str) -> None:
        super().__init__(f"{problem.kind}: {problem.detail}")
        self.problem, self.case, self.steps, self.version = problem, case, steps, version


class TimeUp(BaseException):
    """The run's time is up (a BaseException, so that Hypothesis stops at once rather
    than shrink it)."""


class Loop:
    """An event loop in a daemon thread; `call` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="stateful-fuzz",
                                       daemon=True)
        self.thread.start()

    def call(self, work: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


@dataclass
class Runner:
    """What every session of one run shares."""

    target: Target
    options: StatefulOptions
    loop: Loop
    deadline: float
    seed: int
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    sessions: int = 0
    best: Violation | None = None

    def spent(self) -> bool:
        return time.monotonic() >= self.deadline

    def record(self, violation: Violation) -> None:
        if self.best is None and self.options.shrink is not None:  # the first failure
            self.deadline = min(self.deadline, time.monotonic() + self.options.shrink)
        size = (violation.steps, len(violation.case["steps"]))
        if self.best is None or size < (self.best.steps, len(self.best.case["steps"])):
            self.best = violation
