"""Judging what a case received: every frame goes through the validator, looked for by a
step or not, and each statement it finds broken grades the case by the statement's level.
CaseRun and the steps both come here; nothing here knows of either."""

from __future__ import annotations

from dataclasses import dataclass

from conformance.codec import Frame, validate_server_frame
from conformance.runner.results import BROKEN, Outcome
from conformance.spec import catalogue
from conformance.wire.connection import Connection

#: The most violations a case keeps (each grades the case; more only repeat them).
MAX_FOUND = 100


@dataclass
class Judged:
    """What the validator found in a frame the case received."""

    statement: str
    text: str


def violations(conn: Connection, frame: Frame) -> list[Judged]:
    """Every rule `frame` breaks, as the parser saw it and as the validator judges it at the
    connection's version, against what the client offered and subscribed with."""
    found = list(frame.violations)
    found += validate_server_frame(frame, version=conn.version,  # type: ignore[arg-type]
                                   ack_modes=conn.ack_modes, offered=conn.offered)
    return [Judged(v.statement, f"{conn.name}: {v}") for v in found]


def judge(found: list[Judged], conn: Connection, frame: Frame) -> None:
    """Add to `found` what the validator finds in `frame`, up to MAX_FOUND: a storm of bad
    frames says all it has to say in its first ones."""
    for judged in violations(conn, frame):
        if len(found) < MAX_FOUND:
            found.append(judged)


def broken(statement: str) -> Outcome:
    """The grade a case gets for breaking `statement`: failed for a MUST, non-strict for a
    SHOULD, informational for a MAY."""
    return BROKEN[catalogue()[statement].level.strength]
