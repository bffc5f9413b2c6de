"""The exit codes every verb returns (the contract in the README): one place, one name each;
and the one-line message a verb gives when it stops early."""

from __future__ import annotations

import enum
import sys


class Exit(enum.IntEnum):
    #: conformant, nothing found, the job done
    OK = 0
    #: a conformance failure (a case, a finding, a probe graded failed)
    FAILED = 1
    #: a usage or configuration error: a bad flag, case file, profile or report path
    USAGE = 2
    #: the broker is unreachable or the harness could not run
    HARNESS = 3


def say(message: str) -> None:
    """`message` as one `stomp-conformance: ...` line on standard error."""
    print(f"stomp-conformance: {message}", file=sys.stderr)


def fail(code: Exit, message: str) -> Exit:
    """Say `message` and return `code`: `return fail(Exit.USAGE, str(error))`."""
    say(message)
    return code
