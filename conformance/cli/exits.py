"""The exit codes every verb returns (the contract in the README): one place, one name each."""

from __future__ import annotations

import enum


class Exit(enum.IntEnum):
    #: conformant, nothing found, the job done
    OK = 0
    #: a conformance failure (a case, a finding, a probe graded failed)
    FAILED = 1
    #: a usage or configuration error: a bad flag, case file, profile or report path
    USAGE = 2
    #: the broker is unreachable or the harness could not run
    HARNESS = 3
