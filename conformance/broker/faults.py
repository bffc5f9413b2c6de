"""The reference broker's fault switches: each breaks one statement on purpose, so that
every case of the catalogue can be shown able to fail. `stomp-conformance broker --fault
NAME` (repeatable) turns them on; tests pass them to BrokerConfig. The broker reads them
as a Faults value, one bool per switch, built once from the names."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from conformance.broker.destinations import is_topic

#: fault name -> (the statement it breaks, what the broker then does)
FAULTS: Final[dict[str, tuple[str, str]]] = {
    "no-ack-header": ("message.ack-required",
                      "MESSAGE on client and client-individual subscriptions has no ack header"),
    "no-message-id": ("message.id-and-subscription-required", "MESSAGE has no message-id"),
    "no-subscription-header": ("message.id-and-subscription-required",
                               "MESSAGE has no subscription header"),
    "no-destination-header": ("message.destination-required", "MESSAGE has no destination"),
    "topic-message-without-subscription": (
        "message.id-and-subscription-required",
        "MESSAGE delivered from a topic has no subscription header (from a queue it has)"),
    "drop-user-headers": ("send.user-headers-passed",
                          "user headers of SEND are not passed on in MESSAGE"),
    "no-escaping": ("value-encoding.encode-escapes",
                    "headers of MESSAGE, RECEIPT and ERROR are written without escaping"),
    "accept-undefined-escape": ("value-encoding.undefined-escape-fatal",
                                "an undefined escape is kept as it is, not refused"),
    "trim-headers": ("value-encoding.no-trim", "header values are trimmed of spaces"),
    "trim-header-names": ("value-encoding.no-trim", "header names are trimmed of spaces"),
    "ignore-content-length": ("content-length.read-octets",
                              "bodies are read up to the first NUL, whatever content-length says"),
    "error-without-close": ("error.close-after", "the connection stays open after ERROR"),
    "error-without-message": ("error.message-header", "ERROR has no message header"),
    "error-without-content-headers": ("error.content-headers",
                                      "ERROR with a body has no content-length or content-type"),
    "limit-close-without-error": ("size-limits.error-then-close",
                                  "a frame beyond a limit gets the connection closed, no ERROR"),
    "no-receipt-id-on-error": ("error.receipt-id", "ERROR does not name the frame's receipt"),
    "drop-receipts": ("receipt-header.server-acknowledges", "no RECEIPT is sent"),
    "wrong-receipt-id": ("receipt.receipt-id-required",
                         "RECEIPT carries receipt-id of a different value"),
    "wrong-version": ("negotiation.highest-common",
                      "CONNECTED chooses the lowest common version, not the highest"),
    "ignore-accept-version": ("connecting.connected-response-v10",
                              "CONNECTED chooses the server's highest version whatever the "
                              "client offered"),
    "no-version-header": ("connected.version-required", "CONNECTED has no version header"),
    "accept-any-version": ("negotiation.no-common-version-error",
                           "a CONNECT with no common version is accepted as 1.2"),
    "ignore-stomp-frame": ("connect.stomp-frame", "a STOMP frame is answered with ERROR"),
    "accept-frames-before-connect": ("connecting.connected-response",
                                     "frames before CONNECT are processed"),
    "no-heartbeats": ("heart-beating.send-eol", "heart-beats are offered but never sent"),
    "bad-heartbeat-header": ("heart-beating.header-format",
                             "CONNECTED's heart-beat header is not two integers"),
    "bad-heart-beat-closed-silently": (
        "connecting.reject-error",
        "a CONNECT whose heart-beat header is not two integers gets the connection closed "
        "without an ERROR saying why"),
    "unknown-ack-closed-silently": (
        "ack.id-required",
        "an ACK or NACK of an id the broker never sent gets the connection closed without an "
        "ERROR saying why"),
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
    "no-content-length": ("content-length.should-include",
                          "MESSAGE frames with a body carry no content-length"),
    "escape-v10": ("value-encoding.no-escape-v10", "1.2 escaping is applied in 1.0 sessions"),
    "no-unescaping": ("value-encoding.decode-escapes",
                      "header values are kept as they were on the wire, escapes not decoded"),
    "unescape-connect": ("value-encoding.connect-not-escaped",
                         "CONNECT header values are decoded as if escaped"),
    "refuse-body-v10": ("body.subscribe-ignored-v10",
                        "a 1.0 frame other than SEND with a body gets ERROR"),
    "last-header-wins": ("repeated-headers.first-wins",
                         "of repeated headers, the last entry is used and kept first"),
    "last-header-wins-beyond-send": (
        "repeated-headers.first-wins",
        "of repeated headers on frames other than SEND, the last entry is used"),
    "ack-needs-all-id-headers": (
        "ack.id-required",
        "an ACK or NACK is refused unless it carries id, message-id and subscription, "
        "whatever its version requires"),
    "nack-settles-connection": (
        "nack.scope",
        "a NACK settles every unacknowledged message of the connection up to it, whatever "
        "its subscription and ack mode"),
    "auto-ack-redelivered": (
        "subscribe-ack.auto-mode",
        "messages of an auto subscription (1.1, 1.2) wait for an ACK: they are delivered "
        "again when their consumer goes"),
    "client-ack-v10-as-auto": (
        "subscribe-ack.client-mode-v10",
        "in 1.0, messages of an ack:client subscription count as delivered once sent"),
    "ack-v10-ignored": ("ack.message-id-required-v10",
                        "a 1.0 ACK is answered but acknowledges nothing"),
    "receipt-for-connect": ("receipt-header.may-request",
                            "a CONNECT with a receipt header also gets a RECEIPT"),
    "heartbeat-in-1-0": ("server-frames.kinds-v10",
                         "a 1.0 CONNECTED carries a heart-beat header"),
    "bad-server-header": ("connected.server-name",
                          "CONNECTED's server header does not start with a server-name"),
    "no-1-0-fallback": ("negotiation.missing-means-1-0",
                        "a CONNECT without accept-version is answered as 1.2"),
    "heartbeat-ignores-client-interval": (
        "heart-beating.negotiated-interval",
        "client heart-beats are expected every <sy> ms, not MAX(<cx>, <sy>)"),
    "heartbeat-no-tolerance": (
        "heart-beating.tolerance",
        "a client heart-beat is taken as missed unless it comes early (no error margin: the "
        "connection is dropped after 0.9 of the negotiated interval of silence)"),
    "missing-heartbeat-header-default": (
        "heart-beating.missing-header",
        "a CONNECT without heart-beat is taken as heart-beat:1000,0"),
    "crlf-heartbeat-refused": ("frames.eol-cr-optional",
                               "a CR LF heart-beat between frames is refused"),
    "accept-body-on-subscribe": ("body.forbidden-frames",
                                 "a body on a frame that must not have one is accepted"),
    "receipt-per-frame": ("receipt-header.server-acknowledges",
                          "every frame without a receipt header gets a RECEIPT too (its "
                          "receipt-id one the client never sent)"),
    "receipt-for-unrequested-disconnect": (
        "receipt-header.server-acknowledges",
        "a DISCONNECT without a receipt header gets a RECEIPT before the close"),
    "no-receipt-for-disconnect": ("receipt-header.server-acknowledges",
                                  "a DISCONNECT with a receipt header is closed without its "
                                  "RECEIPT"),
    "no-receipt-in-transaction": ("receipt-header.server-acknowledges",
                                  "a SEND, ACK or NACK carrying transaction gets no RECEIPT"),
    "receipts-twice-in-transaction": (
        "receipt-header.server-acknowledges",
        "a SEND, ACK or NACK carrying transaction and receipt gets its RECEIPT when it "
        "arrives and again when its transaction is committed or aborted"),
    "receipt-id-as-on-wire": ("receipt.receipt-id-required",
                              "a 1.1 or 1.2 RECEIPT's receipt-id is the receipt header as it "
                              "was on the wire (its escapes not decoded)"),
    "error-misidentifies-frame": ("frames-and-headers.error-identify",
                                  "an ERROR's receipt-id is not the receipt of the frame it "
                                  "answers (a suffix added)"),
    "unsolicited-server-frame": ("server-frames.kinds",
                                 "CONNECTED is followed by a NOTICE frame, a kind no STOMP "
                                 "server sends"),
    "host-refusal-silent": ("connect.required-headers",
                            "a 1.1 or 1.2 CONNECT without host gets no answer at all (no "
                            "ERROR, no CONNECTED) and the connection stays open"),
    "unknown-vhost-silent": ("connect.unknown-vhost",
                             "a CONNECT naming a virtual host the broker does not serve gets "
                             "no answer at all and the connection stays open"),
    "v10-connect-needs-host": ("connecting.connected-response-v10",
                               "a 1.0 CONNECT without a host header is refused (ERROR), as a "
                               "1.1 one would be"),
    "heartbeat-refused-v10": ("connecting.connected-response-v10",
                              "a 1.0 CONNECT carrying a heart-beat header is refused (ERROR)"),
    "no-session-v10": ("connecting.session-id-v10", "a 1.0 CONNECTED has no session header"),
    "content-length-send-only": (
        "content-length.read-octets",
        "content-length is honoured on SEND only: the body of another frame ends at its first "
        "NUL, and the octets after it are read as the next frames"),
    "body-as-text": ("content-length.read-octets",
                     "a SEND's body is decoded as UTF-8 (octets that are not UTF-8 become "
                     "U+FFFD) and re-encoded"),
    "body-eols-trimmed": ("content-length.read-octets",
                          "a SEND's body has its CR LF turned into LF and its trailing EOLs "
                          "stripped"),
    "content-length-counts-characters": (
        "content-length.octet-count",
        "a MESSAGE's content-length counts the body's characters (UTF-8 code points), not "
        "its octets"),
    "crlf-cr-kept": ("frames.eol-cr-optional",
                     "at 1.2 a CR before an LF is kept as an octet of the line (the command, a "
                     "header, the blank line), as the 1.1 grammar reads it"),
    "first-frame-per-read": ("frames.frame-grammar",
                             "of a read (a TCP segment) holding several frames, only the first "
                             "is read: the octets after its NUL are dropped"),
    "read-end-ends-frame": ("frames.nul-terminated",
                            "a read that ends inside a frame ends the frame there, as if its "
                            "NUL had come"),
    "cr-is-eol-v10": ("frames.eol-lf-required",
                      "at 1.0 and 1.1 a CR is read as an end of line (a CR LF as two)"),
    "content-length-nul-unchecked": (
        "content-length.nul-terminated",
        "an octet other than NUL after a content-length body is not refused: the body is "
        "read on to the next NUL"),
    "content-length-unreadable-ignored": (
        "content-length.octet-count",
        "a content-length that is not an octet count (-1, abc) is ignored: the body is read "
        "up to its NUL and the frame accepted"),
    "invalid-utf8-accepted": ("value-encoding.utf8",
                              "a 1.1 or 1.2 frame whose header names or values are not UTF-8 "
                              "is taken, its octets that are not UTF-8 read as U+FFFD"),
    "commands-case-insensitive": ("frames.case-sensitive",
                                  "commands are read whatever their case: 'send' is SEND"),
    "content-type-not-mime": ("content-type.mime-type",
                              "a MESSAGE's content-type is written without its type: "
                              "'application/json' becomes 'json'"),
    "no-content-type": ("content-type.should-include",
                        "MESSAGE frames carry no content-type, though the SEND gave one"),
    # over WebSocket only (WEBSOCKET_FAULTS): the upgrade and framing layer of
    # broker/websocket.py
    "ws-message-is-frame": ("frames.frame-grammar",
                            "each WebSocket message is taken as whole frames: one that does "
                            "not end a frame (with its NUL) is dropped"),
    "ws-first-frame-only": ("frames.frame-grammar",
                            "of a WebSocket message holding several frames, only the first "
                            "is read (the bytes after its NUL are dropped)"),
    "ws-binary-as-text": ("content-length.read-octets",
                          "a binary WebSocket message is read as UTF-8 text: octets that are "
                          "not UTF-8 become U+FFFD"),
    "ws-text-as-latin1": ("value-encoding.utf8",
                          "a text WebSocket message is read as Latin-1: characters outside "
                          "it become '?'"),
    "ws-version-outside-subprotocol": (
        "negotiation.highest-common",
        "the STOMP version is negotiated from CONNECT's accept-version alone, whatever "
        "versions the client's WebSocket subprotocols offered"),
    "ws-subprotocol-unoffered": ("connecting.connected-response",
                                 "the WebSocket upgrade is accepted naming v12.stomp, even "
                                 "when the client offered no subprotocol or other ones"),
}

#: the switches (Faults fields) behind each `bends_*` flag of Faults
_BENDS: Final[dict[str, tuple[str, ...]]] = {
    "bends_incoming": ("trim_headers", "trim_header_names", "last_header_wins",
                       "last_header_wins_beyond_send", "ack_needs_all_id_headers",
                       "refuse_body_v10", "commands_case_insensitive", "body_as_text",
                       "body_eols_trimmed", "content_length_send_only"),
    "bends_messages": ("no_ack_header", "no_message_id", "no_subscription_header",
                       "no_destination_header", "drop_user_headers", "no_escaping",
                       "escape_v10", "no_content_length", "content_length_counts_characters",
                       "content_type_not_mime", "no_content_type"),
    "bends_reads": ("first_frame_per_read", "read_end_ends_frame", "cr_is_eol_v10"),
    "bends_ws_messages": ("ws_binary_as_text", "ws_message_is_frame", "ws_first_frame_only"),
}

#: the faults of the WebSocket upgrade and framing layer: no case over TCP can see them
WEBSOCKET_FAULTS: Final[frozenset[str]] = frozenset(n for n in FAULTS if n.startswith("ws-"))


@dataclass(frozen=True, slots=True)
class Faults:
    """The switches on: one bool per FAULTS name, spelt with '_' for '-'."""

    no_ack_header: bool = False
    no_message_id: bool = False
    no_subscription_header: bool = False
    no_destination_header: bool = False
    topic_message_without_subscription: bool = False
    drop_user_headers: bool = False
    no_escaping: bool = False
    accept_undefined_escape: bool = False
    trim_headers: bool = False
    trim_header_names: bool = False
    ignore_content_length: bool = False
    error_without_close: bool = False
    error_without_message: bool = False
    error_without_content_headers: bool = False
    limit_close_without_error: bool = False
    no_receipt_id_on_error: bool = False
    drop_receipts: bool = False
    wrong_receipt_id: bool = False
    wrong_version: bool = False
    ignore_accept_version: bool = False
    no_version_header: bool = False
    accept_any_version: bool = False
    ignore_stomp_frame: bool = False
    accept_frames_before_connect: bool = False
    no_heartbeats: bool = False
    bad_heartbeat_header: bool = False
    bad_heart_beat_closed_silently: bool = False
    unknown_ack_closed_silently: bool = False
    cumulative_ack_crosses_subscriptions: bool = False
    individual_ack_cumulative: bool = False
    no_redelivery: bool = False
    ignore_transactions: bool = False
    no_implicit_abort: bool = False
    accept_unknown_transaction: bool = False
    body_on_receipt: bool = False
    no_content_length: bool = False
    escape_v10: bool = False
    no_unescaping: bool = False
    unescape_connect: bool = False
    refuse_body_v10: bool = False
    last_header_wins: bool = False
    last_header_wins_beyond_send: bool = False
    ack_needs_all_id_headers: bool = False
    nack_settles_connection: bool = False
    auto_ack_redelivered: bool = False
    client_ack_v10_as_auto: bool = False
    ack_v10_ignored: bool = False
    receipt_for_connect: bool = False
    heartbeat_in_1_0: bool = False
    bad_server_header: bool = False
    no_1_0_fallback: bool = False
    heartbeat_ignores_client_interval: bool = False
    heartbeat_no_tolerance: bool = False
    missing_heartbeat_header_default: bool = False
    crlf_heartbeat_refused: bool = False
    accept_body_on_subscribe: bool = False
    receipt_per_frame: bool = False
    receipt_for_unrequested_disconnect: bool = False
    no_receipt_for_disconnect: bool = False
    no_receipt_in_transaction: bool = False
    receipts_twice_in_transaction: bool = False
    receipt_id_as_on_wire: bool = False
    error_misidentifies_frame: bool = False
    unsolicited_server_frame: bool = False
    host_refusal_silent: bool = False
    unknown_vhost_silent: bool = False
    v10_connect_needs_host: bool = False
    no_session_v10: bool = False
    heartbeat_refused_v10: bool = False
    content_length_send_only: bool = False
    body_as_text: bool = False
    body_eols_trimmed: bool = False
    content_length_counts_characters: bool = False
    crlf_cr_kept: bool = False
    first_frame_per_read: bool = False
    read_end_ends_frame: bool = False
    cr_is_eol_v10: bool = False
    content_length_nul_unchecked: bool = False
    content_length_unreadable_ignored: bool = False
    invalid_utf8_accepted: bool = False
    commands_case_insensitive: bool = False
    content_type_not_mime: bool = False
    no_content_type: bool = False
    ws_message_is_frame: bool = False
    ws_first_frame_only: bool = False
    ws_binary_as_text: bool = False
    ws_text_as_latin1: bool = False
    ws_version_outside_subprotocol: bool = False
    ws_subprotocol_unoffered: bool = False
    #: a switch on that bends frames as they arrive (protocol.py `_fault_first`)
    bends_incoming: bool = field(default=False, init=False)
    #: a switch on that bends MESSAGE frames (off: the pre-encoded path of outgoing.py)
    bends_messages: bool = field(default=False, init=False)
    #: a switch on that bends what a read brings before the protocol parses it (session.py)
    bends_reads: bool = field(default=False, init=False)
    #: a switch on that bends whole WebSocket messages as they arrive (websocket.py)
    bends_ws_messages: bool = field(default=False, init=False)

    def bends_to(self, destination: str) -> bool:
        """Whether a MESSAGE to a subscription of `destination` takes the path the faults
        bend: a topic-only fault leaves a queue's MESSAGE on the pre-encoded path."""
        return self.bends_messages or (self.topic_message_without_subscription
                                       and is_topic(destination))

    def keeps_unacked(self, mode: str, version: str) -> bool:
        """Whether a message delivered to a subscription of ack `mode` waits for its ACK (and
        goes back to its destination if its consumer goes first), as the faults bend it."""
        if mode == "auto":
            return self.auto_ack_redelivered and version != "1.0"
        return not (self.client_ack_v10_as_auto and version == "1.0")

    def __post_init__(self) -> None:
        # each code path a fault bends is taken only when one of its own faults is on: a
        # switch changes nothing but the behaviour its statement names
        for flag, names in _BENDS.items():
            object.__setattr__(self, flag, any(getattr(self, name) for name in names))

    @classmethod
    def of(cls, names: Iterable[str]) -> Faults:
        """The switches `names` (FAULTS names) turned on; ValueError for another name."""
        wanted = set(names)
        check(wanted)
        return cls(**{name.replace("-", "_"): True for name in wanted})


def check(names: Iterable[str]) -> None:
    """ValueError naming the names that are not FAULTS names, if any."""
    unknown = sorted(set(names) - FAULTS.keys())
    if unknown:
        raise ValueError(f"unknown fault {', '.join(unknown)}: choose from "
                         f"{', '.join(sorted(FAULTS))}")
