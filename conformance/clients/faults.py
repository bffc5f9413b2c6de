"""The reference driver's fault switches: each makes the client break one client statement,
so that `clients --selftest` can show every client case able to fail."""

from __future__ import annotations

from typing import Final

#: name -> (the statement it breaks, what the client does instead)
CLIENT_FAULTS: Final[dict[str, tuple[str, str]]] = {
    "escape-connect": ("value-encoding.connect-not-escaped",
                       "escapes CONNECT header values as it does SEND's"),
    "no-send-escape": ("value-encoding.encode-escapes",
                       "writes SEND header values without escaping them"),
    "no-content-length": ("content-length.required-with-nul",
                          "writes no content-length header, even for a body holding NUL"),
    "ack-message-id": ("ack.id-required",
                       "takes a 1.2 ACK's id from the MESSAGE's message-id, not its ack"),
    "ack-no-subscription": ("ack.id-required-v11",
                            "leaves the subscription header out of a 1.1 ACK"),
    "no-heartbeats": ("heart-beating.send-interval",
                      "offers heart-beats in CONNECT but never sends one"),
    "slow-heartbeats": ("heart-beating.negotiated-interval",
                        "sends heart-beats at three times the negotiated interval"),
    "read-to-nul": ("content-length.read-octets",
                    "reads a body up to its first NUL, whatever content-length says"),
    "last-header-wins": ("repeated-headers.first-wins",
                         "reports the last of repeated MESSAGE headers"),
    "crlf-not-eol": ("frames.eol-cr-optional",
                     "reads a CR before LF as part of the line (as STOMP 1.1 does)"),
    "raw-header-names": ("value-encoding.decode-escapes",
                         "decodes the escapes of header values but not of header names"),
    "no-accept-version": ("negotiation.accept-version-required",
                          "sends CONNECT without accept-version"),
    "no-host": ("connect.required-headers", "sends CONNECT without host"),
    "ignore-receipt": ("receipt-header.may-request",
                       "never reports the RECEIPT it asked for"),
    "ignore-error": ("content-length.read-octets",
                     "never reports an ERROR frame, nor reads its body"),
    "ignore-close": ("heart-beating.receiver-may-drop",
                     "never reports that the server dropped the connection"),
    # over WebSocket only: `clients --selftest --transport ws` tries it, over TCP it is idle
    "ws-message-is-frame": ("frames.frame-grammar",
                            "reads each WebSocket message as whole frames: a frame cut over "
                            "two messages is dropped"),
}
#: the faults that only bend what the driver does over WebSocket
WEBSOCKET_CLIENT_FAULTS: Final[frozenset[str]] = frozenset(
    n for n in CLIENT_FAULTS if n.startswith("ws-"))


def check(names: list[str]) -> None:
    """ValueError naming the names that are not client faults."""
    unknown = sorted(set(names) - CLIENT_FAULTS.keys())
    if unknown:
        raise ValueError(f"unknown client fault {', '.join(unknown)}: choose from "
                         f"{', '.join(sorted(CLIENT_FAULTS))}")
