"""One input of the network fuzzer: the bytes it writes (segmentation included), the
handshake before them, and what the spec requires a broker to answer."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any, cast

from conformance.spec.grammar import VERSIONS, Version


class Expect(enum.StrEnum):
    """What the spec requires of a broker for an input."""

    #: Well-formed frames: a RECEIPT for the last one, no ERROR, the connection open.
    VALID = "valid"
    #: A broken rule: ERROR, then the connection closed.
    ERROR = "error"
    #: Beyond a size limit a broker MAY have: accepted (RECEIPT), or ERROR then close.
    LIMIT = "limit"


@dataclass(frozen=True, slots=True)
class FuzzInput:
    """`chunks` are written one by one after the handshake; `receipt` is the receipt header
    of the last frame, so that accepting the input has a definite answer."""

    version: Version
    chunks: tuple[bytes, ...]
    expect: Expect
    #: the statement the input exercises or breaks, as the version words it
    statement: str
    #: what was generated: a mutation's name, or "valid:FEATURE"
    mutation: str
    receipt: str
    #: the handshake the harness sends first ("CONNECT" or "STOMP"); None: no handshake
    connect: str | None = "CONNECT"
    #: handshake headers that replace or join the harness's own (the input's part of it)
    connect_headers: tuple[tuple[str, str], ...] = ()

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)

    def with_chunks(self, chunks: tuple[bytes, ...]) -> FuzzInput:
        return dataclasses.replace(self, chunks=chunks)

    def to_json(self) -> dict[str, object]:
        """JSON fields; bytes as latin-1 text (one character per octet, lossless)."""
        return {
            "version": self.version, "expect": self.expect.value, "statement": self.statement,
            "mutation": self.mutation, "receipt": self.receipt, "connect": self.connect,
            "connect_headers": [list(h) for h in self.connect_headers],
            "chunks": [c.decode("latin-1") for c in self.chunks],
        }

    @classmethod
    def from_json(cls, data: Any) -> FuzzInput:
        """The input of `to_json`; ValueError saying which field is wrong."""
        if not isinstance(data, dict):
            raise ValueError("expected an object with version, expect, chunks, ...")
        try:
            version = data["version"]
            if version not in VERSIONS:
                raise ValueError(f"version {version!r} is not one of {', '.join(VERSIONS)}")
            chunks = tuple(str(c).encode("latin-1") for c in data["chunks"])
            connect = data.get("connect", "CONNECT")
            return cls(
                version=cast(Version, version), chunks=chunks, expect=Expect(data["expect"]),
                statement=str(data["statement"]), mutation=str(data["mutation"]),
                receipt=str(data["receipt"]),
                connect=None if connect is None else str(connect),
                connect_headers=tuple((str(k), str(v)) for k, v in data.get("connect_headers", ())),
            )
        except KeyError as missing:
            raise ValueError(f"missing field {missing}") from None
        except (TypeError, UnicodeEncodeError) as error:
            raise ValueError(f"malformed field: {error}") from None
