"""Where a fuzz campaign or a replay sends its input: the broker given, or the reference
broker the command starts (with its faults) in a child process; and the campaign's time
budget read from a duration. Both the command line and the distributed campaign of the
pipeline build campaigns from these, so they live with the campaign rather than with
either caller."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from conformance.broker.child import reference_process
from conformance.fuzz.network.findings import BrokerInfo
from conformance.profiles import Profile
from conformance.spec.grammar import Version
from conformance.wire.target import Target
from conformance.wire.transport import BrokerAddress, TlsOptions, parse_broker

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s?)?")


class UsageError(Exception):
    """A flag or file the user gave cannot be used (one line)."""


def parse_duration(text: str, flag: str = "--time") -> float:
    """Seconds in `90`, `90s`, `10m`, `1h`, `1h30m`, `2m30s`; UsageError otherwise, naming
    `flag`."""
    found = _DURATION.fullmatch(text.strip())
    if not text.strip() or found is None or not any(found.groups()):
        raise UsageError(f"{flag}: expected a duration like 90s, 10m or 1h, not {text!r}")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in found.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise UsageError(f"{flag}: the duration must be above 0, not {text!r}")
    return total


@dataclass
class Where:
    """The broker to fuzz or replay against: given, or the reference broker this command
    starts (its id still reads `reference@embedded`, as findings record it; with
    `websocket`, the reference broker is reached over WebSocket, `reference@ws://embedded`)."""

    address: BrokerAddress | None
    profile: Profile
    profile_name: str
    faults: tuple[str, ...]
    tls: TlsOptions | None
    login: str | None
    passcode: str | None
    vhost: str | None
    websocket: bool = False

    @property
    def info(self) -> BrokerInfo:
        if self.address is None:
            suffix = "+" + ",".join(self.faults) if self.faults else ""
            where = "ws://embedded" if self.websocket else "embedded"
            return BrokerInfo(id=f"reference@{where}{suffix}", address="",
                              profile="reference", faults=self.faults, embedded=True,
                              transport="ws" if self.websocket else "tcp")
        return BrokerInfo(id=f"{self.profile.name}@{self.address.display}",
                          address=self.address.display, profile=self.profile_name,
                          tls=self.address.tls,
                          transport=self.address.transport)

    @contextlib.asynccontextmanager
    async def target(self, versions: Sequence[Version]) -> AsyncIterator[Target]:
        """The oracle's target, starting the reference broker (in a child process) for the
        block if needed."""
        if self.address is not None:
            yield self._target(self.address, versions)
            return
        async with reference_process(self.faults, websocket=self.websocket) as url:
            yield self._target(parse_broker(url), versions)

    def _target(self, address: BrokerAddress, versions: Sequence[Version]) -> Target:
        return Target(address, self.profile, tls=self.tls, login=self.login,
                      passcode=self.passcode, host=self.vhost, chosen=tuple(versions))

    @property
    def secret(self) -> str | None:
        """The passcode the reports scrub (none for the reference broker)."""
        if self.address is None:
            return None
        return self._target(self.address, ()).credentials[1]
