"""The STOMP grammar as data: commands, escapes, EOLs and header rules per version.

Each rule quotes the spec text it comes from (the Augmented BNF of STOMP 1.2 and the
prose of 1.0 and 1.1). Nothing here has behaviour; the codec and the broker read it.

    NULL                = <US-ASCII null (octet 0)>
    LF                  = <US-ASCII line feed (aka newline) (octet 10)>
    CR                  = <US-ASCII carriage return (octet 13)>
    EOL                 = [CR] LF
    frame               = command EOL *( header EOL ) EOL *OCTET NULL *( EOL )
    header              = header-name ":" header-value
    header-name         = 1*<any OCTET except CR or LF or ":">
    header-value        = *<any OCTET except CR or LF or ":">
"""

from __future__ import annotations

import re
from typing import Final, Literal

Version = Literal["1.0", "1.1", "1.2"]

#: Every version this project speaks, oldest first.
VERSIONS: Final[tuple[Version, ...]] = ("1.0", "1.1", "1.2")

#: client-command = "SEND" | "SUBSCRIBE" | "UNSUBSCRIBE" | "BEGIN" | "COMMIT" | "ABORT"
#:                | "ACK" | "NACK" | "DISCONNECT" | "CONNECT" | "STOMP"
CLIENT_COMMANDS: Final = frozenset(
    {"SEND", "SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT", "ACK", "NACK",
     "DISCONNECT", "CONNECT", "STOMP"}
)
#: server-command = "CONNECTED" | "MESSAGE" | "RECEIPT" | "ERROR"
SERVER_COMMANDS: Final = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})
COMMANDS: Final = CLIENT_COMMANDS | SERVER_COMMANDS

#: "Only the SEND, MESSAGE, and ERROR frames MAY have a body. All other frames MUST NOT
#: have a body." (1.1 and 1.2; STOMP 1.0 states no such rule.)
BODY_COMMANDS: Final = frozenset({"SEND", "MESSAGE", "ERROR"})

#: "The CONNECT and CONNECTED frames do not escape the carriage return, line feed or colon
#: octets in order to remain backward compatible with STOMP 1.0."
#: Leniency: STOMP is exempt too, because "STOMP servers MUST handle a STOMP frame in the
#: same manner as a CONNECT frame", and clients in the field send it unescaped.
UNESCAPED_COMMANDS: Final = frozenset({"CONNECT", "CONNECTED", "STOMP"})

#: Header escapes by version: the character after the backslash -> the decoded character.
#: 1.0 has none ("headers taken literally"); 1.1: \n \c \\ ("Undefined escape sequences
#: such as \r ... MUST be treated as a fatal protocol error"); 1.2 adds \r.
ESCAPES: Final[dict[Version, dict[str, str] | None]] = {
    "1.0": None,
    "1.1": {"n": "\n", "c": ":", "\\": "\\"},
    "1.2": {"r": "\r", "n": "\n", "c": ":", "\\": "\\"},
}

#: Whether a CR before the LF ends a line ("EOL = [CR] LF" is new in 1.2; in 1.0 and 1.1 a
#: CR is an ordinary octet of the line).
CRLF_EOL: Final[dict[Version, bool]] = {"1.0": False, "1.1": False, "1.2": True}

#: Headers a server frame must carry, per version, with the statement that requires each.
#: MESSAGE's `ack` (1.2, client and client-individual subscriptions) depends on the
#: subscription, so the validator checks it apart from this table.
SERVER_REQUIRED_HEADERS: Final[dict[str, dict[Version, tuple[tuple[str, str], ...]]]] = {
    "CONNECTED": {
        "1.0": (),
        "1.1": (("version", "connected.version-required"),),
        "1.2": (("version", "connected.version-required"),),
    },
    "MESSAGE": {
        "1.0": (("destination", "message.destination-required-v10"),
                ("message-id", "message.message-id-required-v10")),
        "1.1": (("destination", "message.destination-required-v11"),
                ("message-id", "message.id-and-subscription-required-v11"),
                ("subscription", "message.id-and-subscription-required-v11")),
        "1.2": (("destination", "message.destination-required"),
                ("message-id", "message.id-and-subscription-required"),
                ("subscription", "message.id-and-subscription-required")),
    },
    "RECEIPT": {
        "1.0": (("receipt-id", "receipt.receipt-id-required-v10"),),
        "1.1": (("receipt-id", "receipt.receipt-id-required-v11"),),
        "1.2": (("receipt-id", "receipt.receipt-id-required"),),
    },
    "ERROR": {v: () for v in VERSIONS},
}

#: Headers a client frame must carry, per version, with the statement that requires each
#: ("Frames and Headers" in 1.2; the command sections of 1.1 and 1.0). 1.0's UNSUBSCRIBE
#: takes `id` or `destination`: destination is listed. NACK and STOMP are not in 1.0.
CLIENT_REQUIRED_HEADERS: Final[dict[str, dict[Version, tuple[tuple[str, str], ...]]]] = {
    "CONNECT": {"1.0": (),
                "1.1": (("accept-version", "connect.required-headers"),
                        ("host", "connect.required-headers")),
                "1.2": (("accept-version", "connect.required-headers"),
                        ("host", "connect.required-headers"))},
    "STOMP": {"1.1": (("accept-version", "connect.required-headers"),
                      ("host", "connect.required-headers")),
              "1.2": (("accept-version", "connect.required-headers"),
                      ("host", "connect.required-headers"))},
    "SEND": {"1.0": (("destination", "send.destination-required-v10"),),
             "1.1": (("destination", "send.destination-required"),),
             "1.2": (("destination", "send.destination-required"),)},
    "SUBSCRIBE": {"1.0": (("destination", "subscribe.destination-required-v10"),),
                  "1.1": (("destination", "subscribe.destination-required"),
                          ("id", "subscribe-id.required-v11")),
                  "1.2": (("destination", "subscribe.destination-required"),
                          ("id", "subscribe-id.required"))},
    "UNSUBSCRIBE": {"1.0": (("destination", "unsubscribe.id-or-destination-v10"),),
                    "1.1": (("id", "unsubscribe.id-matches-v11"),),
                    "1.2": (("id", "unsubscribe.id-required"),)},
    "ACK": {"1.0": (("message-id", "ack.message-id-required-v10"),),
            "1.1": (("message-id", "ack.id-required-v11"), ("subscription", "ack.id-required-v11")),
            "1.2": (("id", "ack.id-required"),)},
    "NACK": {"1.1": (("message-id", "nack.id-required-v11"),
                     ("subscription", "nack.id-required-v11")),
             "1.2": (("id", "nack.id-required"),)},
    "BEGIN": {"1.0": (("transaction", "begin.transaction-required-v10"),),
              "1.1": (("transaction", "begin.transaction-required"),),
              "1.2": (("transaction", "begin.transaction-required"),)},
    "COMMIT": {"1.0": (("transaction", "commit.transaction-required-v10"),),
               "1.1": (("transaction", "commit.transaction-required-v11"),),
               "1.2": (("transaction", "commit.transaction-required"),)},
    "ABORT": {"1.0": (("transaction", "abort.transaction-required-v10"),),
              "1.1": (("transaction", "abort.transaction-required-v11"),),
              "1.2": (("transaction", "abort.transaction-required"),)},
    "DISCONNECT": {v: () for v in VERSIONS},
}

#: Ack modes of SUBSCRIBE: "The valid values for the ack header are auto, client, or
#: client-individual. If the header is not set, it defaults to auto." (1.0: auto, client.)
ACK_MODES: Final[dict[Version, frozenset[str]]] = {
    "1.0": frozenset({"auto", "client"}),
    "1.1": frozenset({"auto", "client", "client-individual"}),
    "1.2": frozenset({"auto", "client", "client-individual"}),
}

#: heart-beat: "two positive integers separated by a comma" (0 is allowed: "0 means it
#: cannot send heart-beats").
HEART_BEAT: Final = re.compile(r"\A([0-9]+),([0-9]+)\Z")

#: server = name ["/" version] *(comment); comments "delimited by a space octet".
SERVER_HEADER: Final = re.compile(r"\A[^/ ]+(/[^/ ]+)?( [^ ]*)*\Z")

#: content-length: "an octet count for the length of the message body": ASCII digits only
#: (no sign, no padding: "clients and servers MUST never trim or pad headers with spaces").
CONTENT_LENGTH: Final = re.compile(r"\A[0-9]+\Z")

#: content-type: "its value MUST be a MIME type" (type "/" subtype, then parameters).
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
MIME_TYPE: Final = re.compile(rf"\A{_TOKEN}/{_TOKEN}(\s*;.*)?\Z")

#: accept-version: "a comma separated list of incrementing STOMP protocol versions".
def parse_accept_version(value: str | None) -> tuple[str, ...]:
    """The versions a CONNECT offers; a missing header means 1.0 only."""
    if value is None:
        return ("1.0",)
    return tuple(v for v in value.split(",") if v)


def negotiate(offered: tuple[str, ...],
              supported: tuple[Version, ...] = VERSIONS) -> Version | None:
    """The highest version in common, or None ("The protocol that will be used for the rest
    of the session will be the highest protocol version that both the client and server
    have in common")."""
    common = [v for v in supported if v in offered]
    return common[-1] if common else None
