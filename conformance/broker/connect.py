"""The reference broker's answer to CONNECT and STOMP: version negotiation, virtual host,
login, heart-beats and the CONNECTED frame. Most of the choices the spec leaves to a server
are made here (see BrokerConfig). `answer` is a function of the frame and the configuration
alone: the protocol (protocol.py) carries its Answer out. It runs once per connection, so it
is kept apart from the per-frame code (and out of the mypyc build)."""

from __future__ import annotations

from dataclasses import dataclass, field

from conformance import __version__
from conformance.broker.config import BrokerConfig
from conformance.broker.faults import Faults
from conformance.codec import Frame, StompError, unescape
from conformance.spec.grammar import HEART_BEAT, parse_accept_version

SERVER = f"stomp-conformance/{__version__}"


@dataclass(slots=True)
class Answer:
    """What the connection does about one CONNECT, in this order: take `version` (and give
    its parser `parser_version`); if `refused`, answer ERROR with that message (then close,
    as every error); write `frames`; close if `close` (saying why); it is `connected` if
    so."""

    #: the connection's version from now on, and its parser's; None: unchanged
    version: str | None = None
    parser_version: str | None = None
    refused: str = ""
    #: the statement of the client's that the refused CONNECT breaks ('' for the broker's
    #: own choices: a host it does not serve, credentials)
    breaks: str = ""
    frames: list[Frame] = field(default_factory=list)
    close: str = ""
    connected: bool = False
    #: seconds between the broker's heart-beats (0: none), whether to start sending them,
    #: and seconds between the client's (0: none expected)
    send_every: float = 0.0
    beat: bool = False
    expect_every: float = 0.0


def answer(config: BrokerConfig, faults: Faults, frame: Frame, session: str,
           bound: tuple[str, ...] | None = None) -> Answer:
    """The answer to a CONNECT (or STOMP) `frame` on a connection not yet connected;
    `session` is the connection's id (CONNECTED's session header); `bound`: the versions
    the connection allows (a WebSocket client's subprotocols offered; None: any)."""
    if frame.command == "STOMP" and faults.ignore_stomp_frame:
        return Answer(refused="unknown command 'STOMP'")
    if faults.unescape_connect:
        try:
            frame = frame.replace(headers=[(unescape(k, "1.2"), unescape(v, "1.2"))
                                           for k, v in frame.headers])
        except StompError as problem:
            return Answer(refused=f"malformed CONNECT: {problem.message}")
    accept = frame.get("accept-version")
    if accept is None and faults.no_1_0_fallback:
        accept = "1.2"
    offered = parse_accept_version(accept)
    # on a WebSocket, the versions its subprotocols name are those the client speaks there
    speaks = tuple(v for v in config.versions if bound is None or v in bound)
    common = [v for v in speaks if v in offered or faults.ignore_accept_version]
    if not common and not faults.accept_any_version:
        why = "" if bound is None else " on this connection (its WebSocket subprotocols)"
        return Answer(version="1.2", close="no common protocol version", frames=[Frame("ERROR", [
            ("version", ",".join(speaks)), ("content-type", "text/plain"),
            ("message", "no common protocol version")],
            f"Supported protocol versions{why} are {' '.join(speaks)}".encode())])
    version = (common[0] if faults.wrong_version else common[-1]) if common else "1.2"
    # no-unescaping: a 1.0 parser leaves escapes in header values as they came
    done = Answer(version=version, parser_version="1.0" if faults.no_unescaping else
                  "1.1" if faults.crlf_cr_kept and version == "1.2" else version)
    done.refused, done.breaks = _refusal(config, faults, frame, version)
    if version == "1.0" and faults.heartbeat_refused_v10 and "heart-beat" in frame:
        done.refused = "heart-beat is not a STOMP 1.0 header"
    if done.refused:
        if (faults.host_refusal_silent and done.breaks == "connect.required-headers") or \
                (faults.unknown_vhost_silent and done.refused.startswith("unknown virtual")):
            return Answer(version=version)  # no answer at all, the connection left open
        return done
    headers = [("version", version)] if version != "1.0" and not faults.no_version_header \
        else []
    if version != "1.0":
        _negotiate_heartbeats(config, faults, frame, headers, done)
        if done.breaks == "heart-beating.header-format" and \
                faults.bad_heart_beat_closed_silently:
            return Answer(version=version, close=done.refused)  # closed, no ERROR said why
        if done.refused and not faults.error_without_close:
            return done  # (error-without-close: the ERROR, then CONNECTED all the same)
    if (version == "1.0" or not config.minimal_connected) and not (
            version == "1.0" and faults.no_session_v10):  # 1.0's CONNECTED shows session
        headers.append(("session", session))
    if not config.minimal_connected:
        headers.append(("server", "/0.1 x" if faults.bad_server_header else SERVER))
    if version == "1.0" and faults.heartbeat_in_1_0:
        headers.append(("heart-beat", "0,0"))
    done.connected = True
    done.frames.append(Frame("CONNECTED", headers))
    if faults.unsolicited_server_frame:
        done.frames.append(Frame("NOTICE", [("message", "welcome")]))
    receipt = frame.get("receipt")
    if receipt is not None and faults.receipt_for_connect:
        done.frames.append(Frame("RECEIPT", [("receipt-id", receipt)]))
    return done


def _refusal(config: BrokerConfig, faults: Faults, frame: Frame, version: str
             ) -> tuple[str, str]:
    """Why the broker turns this CONNECT down (its host or its credentials), or '', and the
    client's statement that breaks."""
    host = frame.get("host")
    if host is None and (version != "1.0" or faults.v10_connect_needs_host):
        return f"CONNECT without the host header STOMP {version} requires", \
            "connect.required-headers" if version != "1.0" else ""
    # 1.0 has no host header: a 1.0 CONNECT without one is served as the default host
    if config.vhosts is not None and host is not None and host not in config.vhosts \
            and (config.unknown_vhost == "reject" or faults.unknown_vhost_silent):
        return f"unknown virtual host {host!r}: this broker serves " \
            f"{', '.join(config.vhosts)}", ""
    users, login = config.users, frame.get("login")
    if users is None or (login is None and version == "1.0" and config.v10_anonymous):
        return "", ""
    if login is None:
        return "access refused: CONNECT without login", ""
    if users.get(login) != frame.get("passcode"):
        return "access refused: unknown login or wrong passcode", ""
    return "", ""


def mend(frame: Frame, breaks: str) -> Frame | None:
    """The CONNECT `frame` with the client rule `breaks` (an Answer's) let pass: a host of
    the broker's own, no heart-beat header; None for a refusal no leniency serves."""
    if breaks == "connect.required-headers":
        return frame.replace(headers=[*frame.headers, ("host", "localhost")])
    if breaks == "heart-beating.header-format":
        return frame.replace(headers=[h for h in frame.headers if h[0] != "heart-beat"])
    return None


def _negotiate_heartbeats(config: BrokerConfig, faults: Faults, frame: Frame,
                          headers: list[tuple[str, str]], done: Answer) -> None:
    """Add CONNECTED's heart-beat header and set the intervals of `done` (1.1, 1.2), or set
    its `refused`."""
    default = "1000,0" if faults.missing_heartbeat_header_default else "0,0"
    value = frame.get("heart-beat", default) or default
    match = HEART_BEAT.match(value)
    if match is None:
        done.refused = f"heart-beat {value[:40]!r} is not two integers"
        done.breaks = "heart-beating.header-format"
        return
    cx, cy = int(match.group(1)), int(match.group(2))
    sx, sy = config.heartbeat
    if faults.bad_heartbeat_header:
        headers.append(("heart-beat", "fast,slow"))
    elif sx or sy or not config.minimal_connected:  # absent means 0,0
        headers.append(("heart-beat", f"{sx},{sy}"))
    if sx and cy:
        done.send_every = max(sx, cy) / 1000
        done.beat = not faults.no_heartbeats
    if cx and sy:
        done.expect_every = (sy if faults.heartbeat_ignores_client_interval
                             else max(cx, sy)) / 1000
