"""What an expecting step asks of a frame (command, headers, body, with the case's
variables substituted), how it says so in a result, and the values it captures."""

from __future__ import annotations

import re
from typing import Any

from conformance.codec import Frame
from conformance.runner.case_run import CaseRun, StepFailed
from conformance.wire.connection import describe

#: How long an expectation waits when the case does not say.
DEFAULT_WITHIN = 5.0


def _matches(matcher: Any, value: str | None, run: CaseRun) -> bool:
    if not isinstance(matcher, dict):
        return value == run.substitute(str(matcher))
    if "absent" in matcher:
        return value is None
    if "present" in matcher:
        return (value is not None) == bool(matcher["present"])
    if value is None:
        return "if_present" in matcher
    if "if_present" in matcher:
        matcher = {"regex": matcher["if_present"]}
    if "equals" in matcher:
        return value == run.substitute(str(matcher["equals"]))
    if "regex" in matcher:  # captured values are matched literally
        pattern = run.substitute(matcher["regex"], quote=re.escape)
        return re.fullmatch(pattern, value, re.DOTALL) is not None
    low, high = matcher["range"]
    return value.isascii() and value.isdigit() and low <= int(value) <= high


def _show(matcher: Any) -> str:
    if not isinstance(matcher, dict):
        return repr(str(matcher))
    ((kind, value),) = matcher.items()
    return f"{kind} {value!r}" if kind not in ("absent",) else "absent"


def frame_mismatch(frame: Frame, args: dict[str, Any], run: CaseRun) -> str | None:
    """Why `frame` does not meet `args` (command, headers, body), or None if it does."""
    command = args.get("command")
    if command is not None and frame.command != command:
        return f"command {command}"
    for name, matcher in (args.get("headers") or {}).items():
        if not _matches(matcher, frame.get(name), run):
            return f"header {name} {_show(matcher)}"
    if "body" in args:  # an empty body counts as absent
        body = frame.body.decode("utf-8", "replace") if frame.body else None
        if not _matches(args["body"], body, run):
            return f"body {_show(args['body'])}"
    return None


def expectation(args: dict[str, Any], run: CaseRun) -> str:
    parts = [args.get("command", "any frame")]
    parts += [f"{n} {_show(m)}" for n, m in (args.get("headers") or {}).items()]
    if "body" in args:
        parts.append(f"body {_show(args['body'])}")
    return run.substitute(" ".join(parts))


def capture(frame: Frame, args: dict[str, Any], run: CaseRun) -> None:
    for variable, source in (args.get("capture") or {}).items():
        value = frame.body.decode("utf-8", "replace") if source == "body" else frame.get(source)
        if value is None:
            raise StepFailed(f"a {source!r} header to capture", describe(frame, 0))
        run.variables[variable] = value
