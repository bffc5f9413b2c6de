"""The reference STOMP codec, sans-IO: `Parser` (bytes in, events out), `encode` and
`encode_raw` (frames out), `validate_server_frame` and `validate_client_frame` (what
a broker or a client sent, judged)."""

from conformance.codec.encoder import encode, encode_headers, encode_raw
from conformance.codec.errors import (
    BodyNotAllowed,
    BodyTooLarge,
    ContentLengthError,
    EncodingError,
    EscapeError,
    FrameTooLarge,
    FramingError,
    HeaderCountExceeded,
    HeaderLineTooLong,
    LimitExceeded,
    LocalProtocolError,
    ProtocolViolation,
    StompError,
)
from conformance.codec.escaping import escape, unescape
from conformance.codec.events import Event, Frame, Heartbeat, Violation
from conformance.codec.limits import Limits
from conformance.codec.parser import Parser
from conformance.codec.validator import validate_client_frame, validate_server_frame

__all__ = [
    "BodyNotAllowed", "BodyTooLarge", "ContentLengthError", "EncodingError", "EscapeError",
    "Event", "Frame", "FrameTooLarge", "FramingError", "HeaderCountExceeded",
    "HeaderLineTooLong", "Heartbeat", "LimitExceeded", "Limits", "LocalProtocolError",
    "Parser", "ProtocolViolation", "StompError", "Violation", "encode", "encode_headers",
    "encode_raw", "escape", "unescape", "validate_client_frame", "validate_server_frame",
]
