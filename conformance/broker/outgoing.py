"""The octets of what the reference broker sends: its frames encoded for the connection's
version, as the fault switches bend them, and MESSAGE frames built from header lines
encoded once per subscription (the path every message of a broker without faults takes).
Functions of their arguments alone: the protocol (protocol.py) decides what to send."""

from __future__ import annotations

from collections.abc import Sequence

from conformance.broker.destinations import Message, Subscription, is_topic
from conformance.broker.faults import Faults
from conformance.codec import Frame, LocalProtocolError, encode, encode_headers, encode_raw
from conformance.spec.grammar import Version


def frame_bytes(frame: Frame, version: str, faults: Faults) -> bytes:
    """`frame` as the broker writes it in a `version` session."""
    if faults.escape_v10:
        version = "1.2"
    no_length = frame.command == ("MESSAGE" if faults.no_content_length else
                                  "ERROR" if faults.error_without_content_headers
                                  else None)
    if frame.command == "MESSAGE" and frame.body and faults.content_length_counts_characters:
        return encode_raw(frame.command, _header_lines(frame, version, faults), frame.body,
                          content_length=len(frame.body.decode("utf-8", "replace")))
    try:
        if faults.no_escaping:
            raise LocalProtocolError("headers written as they are")
        return encode(frame, version=version,  # type: ignore[arg-type]
                      content_length=False if no_length else None)
    except LocalProtocolError:
        if version == "1.0" and not faults.no_escaping:  # a header 1.0 cannot carry: left out
            frame = frame.replace(headers=[(k, v) for k, v in frame.headers
                                           if "\n" not in k + v and ":" not in k])
            if not no_length:
                return encode(frame, version=version)  # type: ignore[arg-type]
        # a fault asked for what the encoder refuses (no content-length before a NUL, or
        # no escaping): write it as it is, breaking that fault's statement and no other
        return encode_raw(frame.command, _header_lines(frame, version, faults), frame.body,
                          content_length=len(frame.body) if frame.body and not no_length
                          else None)


def _header_lines(frame: Frame, version: str, faults: Faults
                  ) -> Sequence[tuple[str, str]] | list[bytes]:
    if faults.no_escaping:
        return frame.headers
    try:
        text = encode_headers(frame.headers, version=version,  # type: ignore[arg-type]
                              command=frame.command)
    except LocalProtocolError:
        return frame.headers
    return [line.encode() for line in text.split("\n")[:-1]]


def message_bytes(subscription: Subscription, message: Message, ack: str | None,
                  version: Version, colon_ids: bool) -> bytes | None:
    """The MESSAGE frame from header lines the codec escaped: the ones every delivery of
    the subscription shares (encoded once, kept in `subscription.head`), the per-delivery
    ids (which never need escaping, unless `colon_ids`) and the message's own. None when a
    header cannot be written in this version (the generic path leaves it out)."""
    try:
        if subscription.head is None:
            subscription.head = ("MESSAGE\n" + encode_headers(
                [("subscription", subscription.id),
                 ("destination", subscription.destination)], version=version)).encode()
        lines = encode_headers(message.headers, version=version)
    except LocalProtocolError:
        return None
    ids = [("message-id", message.id)]
    if ack is not None and version == "1.2":
        ids.append(("ack", ack))
    lines = (encode_headers(ids, version=version) if colon_ids else
             "".join(f"{k}:{v}\n" for k, v in ids)) + lines
    if message.redelivered:
        lines += "redelivered:true\n"
    body = message.body
    if body:  # content-length always: a body may hold NUL
        lines += f"content-length:{len(body)}\n"
    return b"".join((subscription.head, lines.encode(), b"\n", body, b"\x00"))


def message_frame(subscription: Subscription, message: Message, ack: str | None,
                  version: str, faults: Faults) -> Frame:
    """The MESSAGE frame as a Frame, for the faults to bend."""
    headers = [("subscription", subscription.id), ("message-id", message.id),
               ("destination", message.destination)]
    if faults.no_subscription_header or (faults.topic_message_without_subscription
                                         and is_topic(subscription.destination)):
        headers.pop(0)
    if faults.no_message_id:
        headers = [h for h in headers if h[0] != "message-id"]
    if faults.no_destination_header:
        headers = [h for h in headers if h[0] != "destination"]
    if ack is not None and version == "1.2" and not faults.no_ack_header:
        headers.append(("ack", ack))
    if message.redelivered:
        headers.append(("redelivered", "true"))
    if not faults.drop_user_headers:
        headers += [(k, v.rpartition("/")[2] if k == "content-type"
                     and faults.content_type_not_mime else v)
                    for k, v in message.headers
                    if k != "content-type" or not faults.no_content_type]
    return Frame("MESSAGE", headers, message.body)


def error_frame(message: str, frame: Frame | None, detail: str, faults: Faults) -> Frame:
    """ERROR saying `message` (the body: `detail`, or `message` again) about `frame`."""
    headers = [] if faults.error_without_message else [("message", message)]
    receipt = frame.get("receipt") if frame is not None else None
    if receipt is not None and not faults.no_receipt_id_on_error:
        headers.append(("receipt-id", receipt + "-x" if faults.error_misidentifies_frame
                        else receipt))
    if not faults.error_without_content_headers:
        headers.append(("content-type", "text/plain"))
    return Frame("ERROR", headers, (detail or message).encode())


def receipt_frame(receipt: str, faults: Faults) -> Frame:
    value = receipt + "-x" if faults.wrong_receipt_id else receipt
    return Frame("RECEIPT", [("receipt-id", value)], b"receipt" if faults.body_on_receipt
                 else b"")
