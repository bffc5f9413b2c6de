"""The broker under test as the harness reaches it: its address, profile, TLS options and
the run's settings (credentials, virtual host) with their one order of precedence; and
`HarnessError`, raised by the runner and the probes alike when it cannot be reached."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from conformance.profiles import Profile
from conformance.spec.grammar import Version
from conformance.wire.stream import Transport
from conformance.wire.transport import BrokerAddress, TlsOptions, open_transport
from conformance.wire.websocket import STOMP_SUBPROTOCOLS


class HarnessError(Exception):
    """The run cannot start or go on (broker unreachable, bad TLS setup): one line."""


@dataclass(frozen=True)
class Target:
    address: BrokerAddress
    profile: Profile
    tls: TlsOptions | None = None
    #: flags win over the address's userinfo, which wins over the profile
    login: str | None = field(default=None, repr=False)
    passcode: str | None = field(default=None, repr=False)
    host: str | None = None
    #: the versions to speak, when the user chose some (else the profile's)
    chosen: tuple[Version, ...] = ()
    #: capability -> what the run saw of it, for those found out from the broker
    probed: Mapping[str, str] = field(default_factory=dict)

    @property
    def credentials(self) -> tuple[str | None, str | None]:
        return (self.login or self.address.login or self.profile.login,
                self.passcode or self.address.passcode or self.profile.passcode)

    @property
    def virtual_host(self) -> str:
        """CONNECT's host header: the flag's, else the profile's, else the address's."""
        return self.host or self.profile.host or self.address.host

    @property
    def host_given(self) -> bool:
        """Whether the user or the profile named the virtual host."""
        return bool(self.host or self.profile.host)

    @property
    def versions(self) -> tuple[Version, ...]:
        return self.chosen or cast(tuple[Version, ...], self.profile.versions)

    @property
    def endpoint(self) -> BrokerAddress:
        """The address connected to: over WebSocket, the profile's path when the address
        gives none (only '/')."""
        path = self.profile.websocket_path
        if self.address.websocket and path and self.address.path == "/":
            return replace(self.address, path=path)
        return self.address

    def offer(self, subprotocols: Sequence[str] | None = None) -> tuple[str, ...]:
        """The subprotocols a WebSocket connection offers: `subprotocols` when given, else
        the profile's, else the STOMP ones."""
        if subprotocols is None:
            subprotocols = self.profile.subprotocols
        return STOMP_SUBPROTOCOLS if subprotocols is None else tuple(subprotocols)

    async def open(self, timeout: float = 10.0, *,
                   subprotocols: Sequence[str] | None = None) -> Transport:
        """A transport to the broker (`open_transport` with the TLS options, and over
        WebSocket the path and the subprotocols of `offer`)."""
        return await open_transport(self.endpoint, tls=self.tls, timeout=timeout,
                                    subprotocols=self.offer(subprotocols))
