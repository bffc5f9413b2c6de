"""The reference broker's configuration: BrokerConfig (every choice the spec leaves to a
server, the bounds of what one broker holds, the fault switches on), and the tables the CLI
reads to set it (CHOICES, LIMITS)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, get_args

from conformance.broker.faults import check as check_faults
from conformance.codec import Limits

#: What the broker does with a NACKed message. 1.2 NACK: "The server can then either send
#: the message to a different client, discard it, or put it in a dead letter queue. The
#: exact behavior is server specific."
NackPolicy = Literal["redeliver", "discard"]
#: A host header that names no configured virtual host. 1.1/1.2 CONNECT: "If this header
#: does not match a known virtual host, servers supporting virtual hosting MAY select a
#: default virtual host or reject the connection."
UnknownVhost = Literal["reject", "default"]
#: A frame whose command is not one a client sends. 1.2 Client Frames: "A client MAY send a
#: frame not in this list, but for such a frame a STOMP 1.2 server MAY respond with an
#: `ERROR` frame and then close the connection" (1.1: "MAY respond with an `ERROR` frame").
UnknownCommand = Literal["error", "ignore"]
#: BrokerConfig field -> its legal values, for the fields of the three types above
CHOICES: Final[dict[str, tuple[str, ...]]] = {
    "nack": get_args(NackPolicy), "unknown_vhost": get_args(UnknownVhost),
    "unknown_command": get_args(UnknownCommand)}

#: `--limit NAME=VALUE`: NAME -> the BrokerConfig field it sets ("limits.FIELD": a field
#: of the codec's Limits). 1.1/1.2 Size Limits: "servers MAY place maximum limits on: the
#: number of frame headers allowed in a single frame, the maximum length of header lines,
#: the maximum size of a frame body"; the others bound what one client may make the
#: broker hold (the spec sets no minimum for any).
LIMITS: Final[dict[str, str]] = {
    "headers": "limits.max_headers", "header-line": "limits.max_header_line",
    "body": "limits.max_body", "frame": "limits.max_frame",
    "subscriptions": "max_subscriptions", "pending": "max_pending",
    "transactions": "max_transactions", "transaction-frames": "max_transaction_frames",
    "held-bytes": "max_held_bytes", "connections": "max_connections",
    "write-high-water": "write_high_water",
}


@dataclass(frozen=True)
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 61613
    #: also serve STOMP over WebSocket on this port (0: a free one; None: not at all), at
    #: `ws_path` only
    ws_port: int | None = None
    ws_path: str = "/ws"
    #: a WebSocket client offering no STOMP subprotocol: served without one (True) or
    #: refused with 400 (RFC 6455 lets a server do either; STOMP says nothing of it)
    ws_accept_unnegotiated: bool = False
    versions: tuple[str, ...] = ("1.0", "1.1", "1.2")
    #: login -> passcode; None: no authentication (a CONNECT without login is refused
    #: when users are set, unless `v10_anonymous` lets a 1.0 one in)
    users: dict[str, str] | None = field(default=None, repr=False)
    #: 1.0 CONNECT shows `login` and `passcode` but the 1.0 spec says nothing of
    #: authentication: a 1.0 CONNECT without login is served anonymously (True) or refused
    v10_anonymous: bool = False
    #: the virtual hosts served, the first the default; None: any host header is accepted.
    #: A 1.0 CONNECT without host (1.0 has no host header) is served as the default.
    vhosts: tuple[str, ...] | None = None
    #: a 1.1/1.2 host header naming none of `vhosts`: refused with ERROR or served as the
    #: default host (see UnknownVhost)
    unknown_vhost: UnknownVhost = "reject"
    #: the CONNECTED heart-beat: what the broker can send, what it wants (ms); any pair is
    #: legal: "0 means it cannot send heart-beats ... otherwise it is the smallest number
    #: of milliseconds between heart-beats that it can guarantee"
    heartbeat: tuple[int, int] = (1000, 1000)
    #: a client heart-beat may come this many times its interval late before the
    #: connection is dropped ("the receiver SHOULD be tolerant")
    heartbeat_tolerance: float = 2.0
    nack: NackPolicy = "redeliver"
    unknown_command: UnknownCommand = "error"
    #: CONNECTED without what 1.1/1.2 make optional ("STOMP 1.2 servers MAY set the
    #: following headers: heart-beat, session, server"): no server header, no session
    #: header in 1.1/1.2 (1.0's CONNECTED shows "session: <session-id>", so it keeps it),
    #: no heart-beat header when `heartbeat` is 0,0 ("A missing heart-beat header MUST be
    #: treated the same way as a heart-beat:0,0 header")
    minimal_connected: bool = False
    #: message-id and ack values holding ':' (as ActiveMQ's ID:host-...:1:1 do), escaped
    #: as \c in 1.1/1.2 headers. MESSAGE: "an `ack` header with an arbitrary value"; a
    #: message-id is "a unique identifier for that message"
    colon_ids: bool = False
    #: MESSAGE carries server specific headers (expires, priority, timestamp, as ActiveMQ
    #: adds) besides the sender's: "in addition to the server specific headers that MAY
    #: get added to the frame"
    server_headers: bool = False
    limits: Limits = Limits(max_headers=1000, max_header_line=64 * 1024,
                            max_body=8 * 1024 * 1024, max_frame=9 * 1024 * 1024)
    max_subscriptions: int = 1000
    max_pending: int = 1000
    max_transactions: int = 1000
    max_transaction_frames: int = 10_000
    max_held_bytes: int = 256 * 1024 * 1024
    max_connections: int = 1000
    write_high_water: int = 4 * 1024 * 1024
    connect_timeout: float = 10.0
    frame_timeout: float = 30.0
    idle_timeout: float = 600.0
    faults: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        check_faults(self.faults)
        if self.vhosts is not None and not self.vhosts:
            raise ValueError("vhosts: give at least one virtual host, or None for any")
        if min(self.heartbeat) < 0:
            raise ValueError(f"heart-beat {self.heartbeat}: two numbers of ms, 0 or more")
        for name, legal in CHOICES.items():
            if getattr(self, name) not in legal:
                raise ValueError(f"{name} {getattr(self, name)!r}: choose from "
                                 f"{', '.join(legal)}")

    @property
    def default_vhost(self) -> str | None:
        return self.vhosts[0] if self.vhosts else None

    def with_limits(self, values: Mapping[str, int]) -> BrokerConfig:
        """This configuration with `--limit` values (LIMITS names) set."""
        codec: dict[str, int] = {}
        own: dict[str, Any] = {}  # BrokerConfig's int fields
        for name, value in values.items():
            target = LIMITS.get(name)
            if target is None:
                raise ValueError(f"unknown limit {name!r}: choose from {', '.join(LIMITS)}")
            if value < 1:
                raise ValueError(f"limit {name} must be a positive whole number, not {value}")
            if target.startswith("limits."):
                codec[target.removeprefix("limits.")] = value
            else:
                own[target] = value
        return replace(self, limits=replace(self.limits, **codec), **own)
