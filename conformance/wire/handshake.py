"""The harness's CONNECT: one way to build it for the runner's cases, the fuzzers and the
probes alike, from the Target's settings in their one order of precedence."""

from __future__ import annotations

from collections.abc import Sequence

from conformance.codec import encode_raw
from conformance.wire.target import Target


def connect_headers(target: Target, version: str, *, heart_beat: str | None = "0,0",
                    given: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """The headers of a CONNECT at `version`: accept-version, host, the heart-beat offer
    (None: none) and the credentials, each left out where `given` names it; `given` follows
    in its own order (a case or a fuzz input may send any header, repeated or broken).

    1.0 has no accept-version, host or heart-beat header, but brokers that serve virtual
    hosts read host in 1.0 too: it is sent there when the user or the profile named one."""
    login, passcode = target.credentials
    ours: list[tuple[str, str]] = []
    if version != "1.0":
        ours.append(("accept-version", version))
    if version != "1.0" or target.host_given:
        ours.append(("host", target.virtual_host))
    if version != "1.0" and heart_beat is not None:
        ours.append(("heart-beat", heart_beat))
    ours += [(k, v) for k, v in (("login", login), ("passcode", passcode)) if v is not None]
    names = {k for k, _ in given}
    return [h for h in ours if h[0] not in names] + list(given)


def connect_frame(target: Target, version: str, *, command: str = "CONNECT",
                  heart_beat: str | None = "0,0",
                  given: Sequence[tuple[str, str]] = ()) -> bytes:
    """The CONNECT (or STOMP) frame of connect_headers, as it goes on the wire."""
    return encode_raw(command, connect_headers(target, version, heart_beat=heart_beat,
                                               given=given))
