"""The reference broker's fault switches: each breaks one statement on purpose, so that
every case of the catalogue can be shown able to fail. `stomp-conformance broker --fault
NAME` (repeatable) turns them on; tests pass them to BrokerConfig."""

from __future__ import annotations

from typing import Final

#: fault name -> (the statement it breaks, what the broker then does)
FAULTS: Final[dict[str, tuple[str, str]]] = {
    "no-ack-header": ("message.ack-required",
                      "MESSAGE on client and client-individual subscriptions has no ack header"),
    "no-message-id": ("message.id-and-subscription-required", "MESSAGE has no message-id"),
    "no-subscription-header": ("message.id-and-subscription-required",
                               "MESSAGE has no subscription header"),
    "no-destination-header": ("message.destination-required", "MESSAGE has no destination"),
    "drop-user-headers": ("send.user-headers-passed",
                          "user headers of SEND are not passed on in MESSAGE"),
    "no-escaping": ("value-encoding.encode-escapes",
                    "headers of MESSAGE, RECEIPT and ERROR are written without escaping"),
    "accept-undefined-escape": ("value-encoding.undefined-escape-fatal",
                                "an undefined escape is kept as it is, not refused"),
    "trim-headers": ("value-encoding.no-trim", "header values are trimmed of spaces"),
    "ignore-content-length": ("content-length.read-octets",
                              "bodies are read up to the first NUL, whatever content-length says"),
    "error-without-close": ("error.close-after", "the connection stays open after ERROR"),
    "error-without-message": ("error.message-header", "ERROR has no message header"),
    "no-receipt-id-on-error": ("error.receipt-id", "ERROR does not name the frame's receipt"),
    "drop-receipts": ("receipt-header.server-acknowledges", "no RECEIPT is sent"),
    "wrong-receipt-id": ("receipt.receipt-id-required",
                         "RECEIPT carries receipt-id of a different value"),
    "wrong-version": ("negotiation.highest-common",
                      "CONNECTED chooses the lowest common version, not the highest"),
    "no-version-header": ("connected.version-required", "CONNECTED has no version header"),
    "accept-any-version": ("negotiation.no-common-version-error",
                           "a CONNECT with no common version is accepted as 1.2"),
    "ignore-stomp-frame": ("connect.stomp-frame", "a STOMP frame is answered with ERROR"),
    "accept-frames-before-connect": ("connecting.connected-response",
                                     "frames before CONNECT are processed"),
    "no-heartbeats": ("heart-beating.send-eol", "heart-beats are offered but never sent"),
    "bad-heartbeat-header": ("heart-beating.header-format",
                             "CONNECTED's heart-beat header is not two integers"),
    "cumulative-ack-crosses-subscriptions": (
        "subscribe-ack.client-cumulative",
        "a client-mode ACK acknowledges messages of the connection's other subscriptions"),
    "individual-ack-cumulative": ("subscribe-ack.individual-not-cumulative",
                                  "a client-individual ACK also acknowledges earlier messages"),
    "no-redelivery": ("subscribe-ack.client-cumulative",
                      "unacknowledged messages are dropped when their consumer goes"),
    "ignore-transactions": ("begin.atomic",
                            "frames of a transaction take effect at once; ABORT undoes nothing"),
    "no-implicit-abort": ("begin.implicit-abort",
                          "a transaction left open at disconnect is committed"),
    "accept-unknown-transaction": ("commit.transaction-required",
                                   "COMMIT and ABORT of an unknown transaction are accepted"),
    "body-on-receipt": ("body.forbidden-frames", "RECEIPT carries a body"),
    "accept-body-on-subscribe": ("body.forbidden-frames",
                                 "a body on a frame that must not have one is accepted"),
}
