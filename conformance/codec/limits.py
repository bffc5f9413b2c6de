"""How much a parser accepts from its peer: the bounds that keep its memory bounded."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """The most this side accepts from its peer. The defaults are generous for a judge of
    brokers and still bound memory to about `max_frame` plus one read per connection."""

    max_headers: int = 1_000
    max_header_line: int = 64 * 1024
    max_body: int = 64 * 1024 * 1024
    max_frame: int = 65 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_headers", "max_header_line", "max_body", "max_frame"):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be a positive integer")
