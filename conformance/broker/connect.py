"""The reference broker's answer to CONNECT and STOMP: version negotiation, virtual host,
login, heart-beats and the CONNECTED frame. Most of the choices the spec leaves to a server
are made here (see BrokerConfig); it runs once per connection, so it is kept apart from
the per-frame code of session.py (and out of its mypyc build)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conformance import __version__
from conformance.codec import Frame, StompError, unescape
from conformance.spec.grammar import HEART_BEAT, parse_accept_version

if TYPE_CHECKING:
    from conformance.broker.session import Session

SERVER = f"stomp-conformance/{__version__}"


def connect(session: Session, frame: Frame) -> None:
    config, faults = session.config, session.faults
    if session.connected:
        session.error("a second CONNECT on one connection", frame)
        return
    if frame.command == "STOMP" and "ignore-stomp-frame" in faults:
        session.error("unknown command 'STOMP'", frame)
        return
    if "unescape-connect" in faults:
        try:
            frame.headers = [(unescape(k, "1.2"), unescape(v, "1.2")) for k, v in frame.headers]
        except StompError as problem:
            session.error(f"malformed CONNECT: {problem.message}", frame)
            return
    accept = frame.get("accept-version")
    if accept is None and "no-1-0-fallback" in faults:
        accept = "1.2"
    offered = parse_accept_version(accept)
    common = [v for v in config.versions if v in offered or "ignore-accept-version" in faults]
    if not common and "accept-any-version" not in faults:
        session.version = "1.2"
        session.write(Frame("ERROR", [
            ("version", ",".join(config.versions)), ("content-type", "text/plain"),
            ("message", "no common protocol version")],
            f"Supported protocol versions are {' '.join(config.versions)}".encode()))
        session.closing = True
        return
    version = (common[0] if "wrong-version" in faults else common[-1]) if common else "1.2"
    session.version = version
    # no-unescaping: a 1.0 parser leaves escapes in header values as they came
    session.parser.version = "1.0" if "no-unescaping" in faults else version  # type: ignore[assignment]
    refused = _refusal(session, frame, version)
    if refused:
        session.error(refused, frame)
        return
    headers = [("version", version)] if version != "1.0" and \
        "no-version-header" not in faults else []
    if version != "1.0":
        negotiate_heartbeats(session, frame, headers)
        if session.closing:
            return
    if version == "1.0" or not config.minimal_connected:  # 1.0's CONNECTED shows session
        headers.append(("session", session.id))
    if not config.minimal_connected:
        headers.append(("server", "/0.1 x" if "bad-server-header" in faults else SERVER))
    if version == "1.0" and "heartbeat-in-1-0" in faults:
        headers.append(("heart-beat", "0,0"))
    session.connected = True
    session.write(Frame("CONNECTED", headers))
    receipt = frame.get("receipt")
    if receipt is not None and "receipt-for-connect" in faults:
        session.write(Frame("RECEIPT", [("receipt-id", receipt)]))


def _refusal(session: Session, frame: Frame, version: str) -> str:
    """Why the broker turns this CONNECT down (its host or its credentials), or ''."""
    config = session.config
    host = frame.get("host")
    if host is None and version != "1.0":
        return f"CONNECT without the host header STOMP {version} requires"
    # 1.0 has no host header: a 1.0 CONNECT without one is served as the default host
    if config.vhosts is not None and host is not None and host not in config.vhosts \
            and config.unknown_vhost == "reject":
        return f"unknown virtual host {host!r}: this broker serves {', '.join(config.vhosts)}"
    users, login = config.users, frame.get("login")
    if users is None or (login is None and version == "1.0" and config.v10_anonymous):
        return ""
    if login is None:
        return "access refused: CONNECT without login"
    if users.get(login) != frame.get("passcode"):
        return "access refused: unknown login or wrong passcode"
    return ""


def negotiate_heartbeats(session: Session, frame: Frame, headers: list[tuple[str, str]]) -> None:
    """Add CONNECTED's heart-beat header and set the session's intervals (1.1, 1.2)."""
    faults = session.faults
    default = "1000,0" if "missing-heartbeat-header-default" in faults else "0,0"
    value = frame.get("heart-beat", default) or default
    match = HEART_BEAT.match(value)
    if match is None:
        session.error(f"heart-beat {value[:40]!r} is not two integers", frame)
        return
    cx, cy = int(match.group(1)), int(match.group(2))
    sx, sy = session.config.heartbeat
    if "bad-heartbeat-header" in faults:
        headers.append(("heart-beat", "fast,slow"))
    elif sx or sy or not session.config.minimal_connected:  # absent means 0,0
        headers.append(("heart-beat", f"{sx},{sy}"))
    if sx and cy:
        session.send_every = max(sx, cy) / 1000
        if "no-heartbeats" not in faults:
            session.start_heartbeats()
    if cx and sy:
        session.expect_every = (sy if "heartbeat-ignores-client-interval" in faults
                                else max(cx, sy)) / 1000
