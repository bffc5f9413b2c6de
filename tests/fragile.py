"""The reference broker with a weakness real brokers have, for the resource oracle's tests:

    python tests/fragile.py crash|hang|leak PORT

A SEND without a destination header kills the process after printing an error, as a
Node or Python broker's uncaught exception does (crash), or blocks its event loop for good
(hang); `leak` keeps 4 MiB for each connection it accepts. It runs in the foreground, as
`fuzz --launch` wants a broker to."""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any

from conformance.broker.protocol import BrokerProtocol
from conformance.broker.session import Session
from conformance.cli import main

_SEND_WITHOUT_DESTINATION = re.compile(rb"(^|\n)SEND\r?\n(?:(?!destination:)[^\n\0]*\n)*\r?\n")
_kept: list[bytes] = []


def _fragile(mode: str) -> None:
    received, started = BrokerProtocol.receive_data, Session.__init__

    def _received(self: BrokerProtocol, data: bytes) -> Any:
        if mode != "leak" and _SEND_WITHOUT_DESTINATION.search(data):
            if mode == "crash":
                print(f"TypeError: cannot read 'destination' of undefined at 0x{id(data):x}",
                      file=sys.stderr, flush=True)
                os._exit(3)
            time.sleep(3600)  # the event loop never runs again: no connection is answered
        return received(self, data)

    def _init(self: Session, *args: Any, **kwargs: Any) -> None:
        _kept.append(b"x" * (4 << 20))  # written, so that it counts in the RSS
        started(self, *args, **kwargs)

    BrokerProtocol.receive_data = _received  # type: ignore[method-assign]
    if mode == "leak":
        Session.__init__ = _init  # type: ignore[method-assign]


if __name__ == "__main__":
    _fragile(sys.argv[1])
    sys.exit(main(["broker", "--port", sys.argv[2]]))
