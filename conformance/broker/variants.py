"""Legal configurations of the reference broker: each switch of BrokerConfig that stands
for a choice the spec leaves to a server, at each of its legal values, and a few
combinations. `stomp-conformance selftest --variants` runs the catalogue against each: a
case graded worse than passed on any of them judges the configuration, not the spec.

Each variant names the BrokerConfig fields it changes, its `--limit` values, and what a
user of such a broker passes to `run` (--login, --passcode, --vhost)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from conformance.broker.config import BrokerConfig

USERS = {"guest": "guest"}

#: Small but workable: what a broker configured for constrained clients might set.
SMALL_FRAME_LIMITS = {"headers": 32, "header-line": 1024, "body": 64 * 1024,
                      "frame": 66 * 1024}
SMALL_SESSION_LIMITS = {"subscriptions": 8, "pending": 4, "transactions": 4,
                        "transaction-frames": 64, "held-bytes": 1 << 20,
                        "connections": 24}  # what --jobs 8 needs at most


@dataclass(frozen=True)
class Variant:
    name: str
    about: str
    #: BrokerConfig field -> value
    config: Mapping[str, Any] = field(default_factory=dict)
    #: --limit NAME -> value (config.LIMITS)
    limits: Mapping[str, int] = field(default_factory=dict)
    #: what `run` is given for this broker
    login: str | None = None
    passcode: str | None = None
    vhost: str | None = None

    def broker_config(self, base: BrokerConfig | None = None) -> BrokerConfig:
        return replace(base or BrokerConfig(port=0), **self.config).with_limits(self.limits)

    def to_json(self) -> dict[str, object]:
        config = {k: sorted(v) if k in ("users", "faults") else
                  list(v) if isinstance(v, tuple) else v for k, v in self.config.items()}
        return {"name": self.name, "about": self.about, "config": config,
                "limits": dict(self.limits), "login": self.login, "vhost": self.vhost}


SECURED = {"users": USERS, "vhosts": ("/prod", "/test")}

VARIANTS: tuple[Variant, ...] = (
    Variant("default", "the reference broker's defaults"),
    # heart-beating: any pair is legal
    Variant("heartbeat-none", "CONNECTED heart-beat:0,0", {"heartbeat": (0, 0)}),
    Variant("heartbeat-250", "CONNECTED heart-beat:250,250", {"heartbeat": (250, 250)}),
    Variant("heartbeat-3000", "CONNECTED heart-beat:3000,3000", {"heartbeat": (3000, 3000)}),
    Variant("heartbeat-send-only", "CONNECTED heart-beat:1000,0 (wants none)",
            {"heartbeat": (1000, 0)}),
    Variant("heartbeat-receive-only", "CONNECTED heart-beat:0,1000 (sends none)",
            {"heartbeat": (0, 1000)}),
    Variant("nack-discard", "a NACKed message is discarded, not redelivered",
            {"nack": "discard"}),
    Variant("unknown-command-ignore", "a frame of unknown command is ignored, no ERROR",
            {"unknown_command": "ignore"}),
    Variant("minimal-connected", "CONNECTED without server, and session in 1.1/1.2",
            {"minimal_connected": True}),
    Variant("minimal-connected-no-heartbeat", "CONNECTED with version alone in 1.1/1.2",
            {"minimal_connected": True, "heartbeat": (0, 0)}),
    Variant("colon-ids", "message-id and ack values hold ':' (escaped as \\c)",
            {"colon_ids": True}),
    Variant("server-headers", "MESSAGE carries expires, priority and timestamp too",
            {"server_headers": True}),
    Variant("vhost-named", "serves /prod and /test, refuses other hosts; run --vhost /test",
            {"vhosts": ("/prod", "/test")}, vhost="/test"),
    Variant("vhost-default", "serves /prod, an unknown host as /prod; run without --vhost",
            {"vhosts": ("/prod",), "unknown_vhost": "default"}),
    Variant("credentials", "login guest/guest required, 1.0 too; run --login --passcode",
            {"users": USERS}, login="guest", passcode="guest"),
    Variant("credentials-v10-anonymous", "login required in 1.1/1.2, 1.0 may go without",
            {"users": USERS, "v10_anonymous": True}, login="guest", passcode="guest"),
    Variant("small-frame-limits", "headers 32, header line 1 KiB, body 64 KiB, frame 66 KiB",
            limits=SMALL_FRAME_LIMITS),
    Variant("small-session-limits", "8 subscriptions, 4 unacknowledged messages each, "
            "4 transactions of 64 frames, 1 MiB held, 24 connections",
            limits=SMALL_SESSION_LIMITS),
    Variant("prefetch-1", "one unacknowledged message per subscription at a time "
            "(the run finds several-unacked absent)", limits={"pending": 1}),
    # combinations
    Variant("austere", "no heart-beats, NACK discards, colon ids, minimal CONNECTED, "
            "unknown commands ignored, small limits, one unacknowledged message at a time",
            {"heartbeat": (0, 0), "nack": "discard", "colon_ids": True,
             "minimal_connected": True, "unknown_command": "ignore"},
            {**SMALL_FRAME_LIMITS, **SMALL_SESSION_LIMITS, "pending": 1}),
    Variant("secured", "credentials (1.0 too) and named hosts, server headers; run --login "
            "--passcode --vhost /prod", {**SECURED, "server_headers": True},
            login="guest", passcode="guest", vhost="/prod"),
    Variant("lenient", "credentials but anonymous 1.0, unknown hosts served as /prod, "
            "heart-beat 250,250; run --login --passcode",
            {**SECURED, "v10_anonymous": True, "unknown_vhost": "default",
             "heartbeat": (250, 250)}, login="guest", passcode="guest"),
)


def variant(name: str) -> Variant:
    for found in VARIANTS:
        if found.name == name:
            return found
    raise ValueError(f"unknown variant {name!r}: choose from "
                     f"{', '.join(v.name for v in VARIANTS)}")
