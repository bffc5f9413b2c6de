"""What an expecting step asks of a frame (command, headers, body, with the case's
variables substituted), how it says so in a result, and the values it captures. A case
run of either side (a broker's CaseRun, a client's) is all it needs of the run."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Protocol

from conformance.codec import Frame
from conformance.runner.judge import StepFailed
from conformance.wire.connection import describe


class Variables(Protocol):
    """What matching asks of a case run: its variables, and substituting them."""

    variables: dict[str, str]

    def substitute(self, text: str, quote: Callable[[str], str] = str) -> str: ...


#: How long an expectation waits when the case does not say.
DEFAULT_WITHIN = 5.0


def matches(matcher: Any, value: str | None, run: Variables) -> bool:
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


def show_matcher(matcher: Any) -> str:
    if not isinstance(matcher, dict):
        return repr(str(matcher))
    ((kind, value),) = matcher.items()
    return f"{kind} {value!r}" if kind not in ("absent",) else "absent"


def frame_mismatch(frame: Frame, args: dict[str, Any], run: Variables) -> str | None:
    """Why `frame` does not meet `args` (command, headers, body), or None if it does."""
    command = args.get("command")
    if command is not None and frame.command != command:
        return f"command {command}"
    for name, matcher in (args.get("headers") or {}).items():
        if not matches(matcher, frame.get(name), run):
            return f"header {name} {show_matcher(matcher)}"
    if "body" in args:  # an empty body counts as absent
        body = frame.body.decode("utf-8", "replace") if frame.body else None
        if not matches(args["body"], body, run):
            return f"body {show_matcher(args['body'])}"
    if "body_hex" in args and frame.body.hex() != args["body_hex"].replace(" ", "").lower():
        return f"body of the octets {args['body_hex'][:60]}..."
    return None


def expectation(args: dict[str, Any], run: Variables) -> str:
    parts = [args.get("command", "any frame")]
    parts += [f"{n} {show_matcher(m)}" for n, m in (args.get("headers") or {}).items()]
    if "body" in args:
        parts.append(f"body {show_matcher(args['body'])}")
    if "body_hex" in args:
        parts.append(f"body of {len(args['body_hex'].replace(' ', '')) // 2} given octets")
    return run.substitute(" ".join(parts))


def capture(frame: Frame, args: dict[str, Any], run: Variables) -> None:
    for variable, source in (args.get("capture") or {}).items():
        value = frame.body.decode("utf-8", "replace") if source == "body" else frame.get(source)
        if value is None:
            raise StepFailed(f"a {source!r} header to capture", describe(frame, 0))
        run.variables[variable] = value
