"""What a loaded case is. The JSON Schema (case.schema.json) defines each step's arguments;
the runner interprets them by kind."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.spec import catalogue

#: The strengths of statements, strongest first.
STRENGTHS = ("must", "should", "may")

#: Variables every case can use: unique destinations built from the profile's naming rule,
#: and the session's settings.
BUILTIN_VARIABLES = frozenset({
    "queue", "queue2", "topic", "topic2", "id", "host", "login", "passcode", "version",
})

#: Variables every client case can use: where the client connects (`url`), the version it
#: offers, a unique destination and id, and the CONNECT settings the driver is given.
CLIENT_VARIABLES = frozenset({"url", "version", "queue", "id", "host", "login", "passcode"})
#: The folder name that holds client cases (anywhere under a cases folder).
CLIENT_FOLDER = "clients"

#: The transports a case can run over: TCP (with TLS or not) and STOMP over WebSocket.
TRANSPORTS = ("tcp", "ws")
#: how messages name them
TRANSPORT_NAMES = {"tcp": "TCP", "ws": "WebSocket"}

#: The kinds of destination a case can run on (its `destinations:`, queue by default). A
#: case runs once per kind: the queue run keeps the case's id, the topic run is a case of
#: its own, id ID.topic (a stable id, and no `@`, which joins an id to a version in
#: profiles and reports), whose `${queue}` and `${queue2}` name topics and which requires
#: the `topics` capability.
DESTINATION_KINDS = ("queue", "topic")
TOPIC_SUFFIX = ".topic"


def strongest(levels: Sequence[str]) -> str:
    return min(levels, key=STRENGTHS.index)


@dataclass(frozen=True, slots=True)
class Step:
    kind: str
    args: Any
    line: int
    #: the statements the step checks (its `statements:`); none: the case's
    statements: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    title: str
    statements: tuple[str, ...]
    versions: tuple[str, ...]
    #: "must", "should" or "may": the strongest level of its statements unless overridden.
    level: str
    tags: tuple[str, ...]
    requires: tuple[str, ...]
    timeout: float | None
    steps: tuple[Step, ...]
    file: str = ""
    line: int = 1
    #: the transports it runs over (`tcp`, `ws`); skipped over the others
    transports: tuple[str, ...] = TRANSPORTS
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    #: the case's own `level:`, which grades a failed step that names no statement in
    #: place of its statements' (a server must accept what a client MAY send)
    fixed_level: str | None = None
    #: the kind of destination its `${queue}` and `${queue2}` name: "queue" or "topic"
    destination: str = "queue"

    def at_stake(self, version: str, named: Sequence[str] = ()) -> tuple[str, ...]:
        """The statements a check speaks for at `version`: those a step names, else the
        case's, each only where it is part of that version (all of them where none is)."""
        known = catalogue()
        given = named or self.statements
        return tuple(s for s in given if version in known[s].versions) or tuple(given)

    def level_at(self, version: str, named: Sequence[str] = ()) -> str:
        """How a failed check is graded at `version`: the strongest of the statements at
        stake (the case's `level:` for a step that names none)."""
        if self.fixed_level and not named:
            return self.fixed_level
        known = catalogue()
        return strongest([known[s].level.strength for s in self.at_stake(version, named)])

    def levels_at(self, version: str) -> tuple[str, ...]:
        """The levels of the statements at stake at `version` (the case's and its steps'),
        each once, strongest first: a run counts toward each level's score."""
        known = catalogue()
        named = [s for step in self.steps for s in step.statements]
        found = {known[s].level.strength for s in self.at_stake(version)}
        found |= {known[s].level.strength for s in named if version in known[s].versions}
        found.add(self.level_at(version))
        return tuple(level for level in STRENGTHS if level in found)

    @property
    def area(self) -> str:
        """The spec area: the first part of the id (`escaping.undefined-escape` ->
        `escaping`)."""
        return self.id.split(".", 1)[0]
