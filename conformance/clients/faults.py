"""The reference driver's fault switches: each makes the client break one client statement,
so that `clients --selftest` can show every client case able to fail."""

from __future__ import annotations

from typing import Final

#: name -> (the statement it breaks, what the client does instead)
CLIENT_FAULTS: Final[dict[str, tuple[str, str]]] = {
    # -- what it writes: the frame grammar ------------------------------------------------
    "crlf-eols": ("frames.eol-lf-required-v11",
                  "ends every line in CR LF, at every version (only 1.2 allows the CR)"),
    "stomp-command": ("frames.command-grammar-v10",
                      "sends STOMP instead of CONNECT at every version (1.0 has no STOMP)"),
    "newline-body": ("body.forbidden-frames",
                     "writes an EOL as the body of frames that have none"),
    "no-nul-after-body": ("content-length.nul-terminated",
                          "writes no NUL after a SEND body that content-length counts"),
    # -- what it writes: header values -----------------------------------------------------
    "escape-connect": ("value-encoding.connect-not-escaped",
                       "escapes CONNECT header values as it does SEND's"),
    "no-send-escape": ("value-encoding.encode-escapes",
                       "writes SEND header values without escaping them"),
    "escape-v10": ("value-encoding.no-escape-v10",
                   "escapes header values at STOMP 1.0 too, and decodes 1.0 escapes as 1.1's"),
    "trim-headers": ("value-encoding.no-trim",
                     "trims the spaces around the header values it writes and reads"),
    "count-characters": ("content-length.octet-count",
                         "writes a content-length counting characters, not octets"),
    "no-content-length": ("content-length.required-with-nul",
                          "writes no content-length header, even for a body holding NUL"),
    "no-content-type": ("content-type.should-include",
                        "writes no content-type for a text body the application gave"),
    "bad-content-type": ("content-type.mime-type",
                         "labels a text body content-type:text, which is not a MIME type"),
    "names-not-escaped": ("value-encoding.encode-escapes",
                          "escapes the values of SEND's headers but writes their names as "
                          "they are"),
    # -- what it writes: the headers each frame requires -----------------------------------
    "no-accept-version": ("negotiation.accept-version-required",
                          "sends CONNECT without accept-version"),
    "descending-accept-version": ("negotiation.accept-version-format",
                                  "offers its versions highest first (accept-version:1.2,1.0)"),
    "no-host": ("connect.required-headers", "sends CONNECT without host"),
    "no-passcode": ("connect.optional-headers",
                    "sends the passcode the application gave as a password header"),
    "heart-beat-spaces": ("heart-beating.header-format",
                          "writes CONNECT's heart-beat with a space after the comma"),
    "send-destination-capitalized": ("send.destination-required",
                                     "names SEND's destination header Destination"),
    "subscribe-no-id": ("subscribe-id.required",
                        "leaves the id header out of SUBSCRIBE, as 1.0 allows"),
    "reused-subscription-id": ("subscribe-id.unique",
                               "gives every subscription the id of its first"),
    "ack-mode-case": ("subscribe-ack.valid-values",
                      "writes SUBSCRIBE's ack mode in upper case"),
    "unsubscribe-by-destination": ("unsubscribe.id-required",
                                   "unsubscribes by destination, as 1.0 allows, at every version"),
    "unsubscribe-unknown-id": ("unsubscribe.id-matches",
                               "unsubscribes with the destination as the id, which no SUBSCRIBE "
                               "gave"),
    "ack-message-id": ("ack.id-required",
                       "takes a 1.2 ACK's id from the MESSAGE's message-id, not its ack"),
    "ack-no-subscription": ("ack.id-required-v11",
                            "leaves the subscription header out of a 1.1 ACK"),
    "ack-id-header": ("ack.message-id-required-v10",
                      "acknowledges with 1.2's id header at every version, not message-id"),
    "nack-message-id": ("nack.id-required",
                        "takes a 1.2 NACK's id from the MESSAGE's message-id, not its ack"),
    "nack-no-subscription": ("nack.id-required-v11",
                             "leaves the subscription header out of a 1.1 NACK"),
    "no-ack-in-client-mode": ("subscribe-ack.client-must-ack",
                              "writes no ACK for a message of a client-mode subscription"),
    "commit-without-transaction": ("commit.transaction-required",
                                   "writes COMMIT without its transaction header"),
    "abort-without-transaction": ("abort.transaction-required",
                                  "writes ABORT without its transaction header"),
    "reused-transaction-id": ("begin.unique-transaction",
                              "names every transaction it begins with the id of its first"),
    "stomp-not-connect": ("connect.client-prefers-connect",
                          "connects with a STOMP frame at 1.1 and 1.2, not CONNECT"),
    "ack-unacked-on-disconnect": ("subscribe-ack.nack-unprocessed",
                                  "ACKs the messages the application left unacknowledged "
                                  "before it sends DISCONNECT"),
    "frames-after-disconnect": ("disconnect.no-frames-after",
                                "unsubscribes its subscriptions after sending DISCONNECT"),
    # -- heart-beats ------------------------------------------------------------------------
    "no-heartbeats": ("heart-beating.send-interval",
                      "offers heart-beats in CONNECT but never sends one"),
    "slow-heartbeats": ("heart-beating.negotiated-interval",
                        "sends heart-beats at three times the negotiated interval"),
    "beat-regardless": ("heart-beating.none-if-zero",
                        "sends heart-beats every cx ms even when CONNECTED's sy is 0"),
    "beat-when-offered-zero": ("heart-beating.none-if-zero",
                               "sends heart-beats every sy ms when its CONNECT offered cx=0"),
    "crlf-heartbeat-fatal": ("heart-beating.send-eol",
                             "takes a CR LF heart-beat as a broken frame and drops the "
                             "connection"),
    "missing-heart-beat-mirrors-offer": ("heart-beating.missing-header",
                                         "takes a CONNECTED without heart-beat as agreeing to "
                                         "its own offer"),
    "heartbeat-no-tolerance": ("heart-beating.tolerance",
                               "drops the connection after 0.9 of the negotiated interval "
                               "without data from the server (no error margin)"),
    "ignore-close": ("heart-beating.receiver-may-drop",
                     "never reports that the server dropped the connection"),
    # -- what it reads ---------------------------------------------------------------------
    "read-to-nul": ("content-length.read-octets",
                    "reads a body up to its first NUL, whatever content-length says"),
    "read-past-nul": ("content-length.first-null-ends-v10",
                      "reads a frame without content-length up to the last NUL of the octets "
                      "that came together, not its first"),
    "eol-after-nul-fatal": ("frames.trailing-eols",
                            "takes EOLs after a frame's NUL (when no heart-beats were "
                            "negotiated) as a broken frame and drops the connection"),
    "content-length-only-with-body": ("content-length.all-frames-may",
                                      "takes a content-length on a frame that has no body "
                                      "(a RECEIPT) as a protocol error and drops the connection"),
    "last-header-wins": ("repeated-headers.first-wins",
                         "reports the last of repeated MESSAGE headers"),
    "case-insensitive-headers": ("frames.case-sensitive",
                                 "reads header names case-insensitively (lower-cased)"),
    "latin1-headers": ("value-encoding.utf8",
                       "decodes header values as Latin-1, not UTF-8"),
    "crlf-not-eol": ("frames.eol-cr-optional",
                     "reads a CR before LF as part of the line (as STOMP 1.1 does)"),
    "crlf-kept-outside-message": ("frames.eol-cr-optional",
                                  "reads CR LF as an EOL in MESSAGE frames only: CONNECTED, "
                                  "RECEIPT and ERROR header values keep the CR"),
    "headers-in-one-read": ("frames.frame-grammar",
                            "drops a frame whose command and header lines are cut across "
                            "reads"),
    "body-as-text": ("content-type.binary-blob-default",
                     "hands the application a body without content-type decoded as UTF-8 "
                     "(octets that are not UTF-8 replaced)"),
    "backslash-escape-greedy": ("value-encoding.decode-escapes",
                                "decodes escapes one kind after another, \\n before \\\\: "
                                "an escaped backslash followed by n becomes a newline"),
    "no-cr-escape": ("value-encoding.decode-escapes",
                     "knows only 1.1's escapes: 1.2's \\r is undefined to it, a fatal error"),
    "raw-header-names": ("value-encoding.decode-escapes",
                         "decodes the escapes of header values but not of header names"),
    "lenient-escapes": ("value-encoding.undefined-escape-fatal",
                        "keeps an undefined escape (\\t) as it came and delivers the frame"),
    "ignore-receipt": ("receipt-header.may-request",
                       "never reports the RECEIPT it asked for"),
    "ignore-error": ("content-length.read-octets",
                     "never reports an ERROR frame, nor reads its body"),
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
