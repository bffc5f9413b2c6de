"""The step interpreters: one coroutine per step kind of the case format, by kind of
step (connections, frames, heart-beats, limits). Each acts on the case's CaseRun; a step
that is not met raises `StepFailed` with what was expected and what the broker did."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from conformance.runner.case_run import CaseRun
from conformance.runner.steps.connect import step_close, step_connect, step_open
from conformance.runner.steps.frames import (
    step_expect,
    step_expect_any,
    step_expect_close,
    step_expect_error_close,
    step_expect_none,
    step_raw,
    step_send,
)
from conformance.runner.steps.heartbeats import step_expect_heartbeats, step_send_heartbeats
from conformance.runner.steps.limits import step_probe_limit


async def step_sleep(run: CaseRun, seconds: float) -> None:
    await asyncio.sleep(seconds)


STEPS: dict[str, Callable[[CaseRun, Any], Awaitable[None]]] = {
    "open": step_open, "connect": step_connect, "send": step_send, "raw": step_raw,
    "expect": step_expect, "expect_any": step_expect_any, "expect_none": step_expect_none,
    "expect_error_close": step_expect_error_close, "expect_close": step_expect_close,
    "expect_heartbeats": step_expect_heartbeats, "send_heartbeats": step_send_heartbeats,
    "probe_limit": step_probe_limit,
    "close": step_close, "sleep": step_sleep,
}
