"""What a loaded case is. The JSON Schema (case.schema.json) defines each step's arguments;
the runner interprets them by kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True, slots=True)
class Step:
    kind: str
    args: Any
    line: int


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

    @property
    def area(self) -> str:
        """The spec area: the first part of the id (`escaping.undefined-escape` ->
        `escaping`)."""
        return self.id.split(".", 1)[0]
