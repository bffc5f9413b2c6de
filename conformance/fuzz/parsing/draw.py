"""Choices read off the front of a fuzz input.

A coverage-guided fuzzer mutates bytes; a target turns the leading bytes into its
choices (version, mode, chunking, header count) and the rest into data. Past the end of
the input every choice is 0 and every string empty, so each input is a valid program and
a short one means "the defaults". Pure Python and deterministic, so the same input
replays the same way with or without atheris.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class Draw:
    """A cursor over one fuzz input."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        """The next octet, or 0 past the end."""
        pos = self.pos
        if pos >= len(self.data):
            return 0
        self.pos = pos + 1
        return self.data[pos]

    def pick(self, choices: Sequence[T]) -> T:
        return choices[self.byte() % len(choices)]

    def take(self, count: int) -> bytes:
        """The next `count` octets (fewer at the end)."""
        start = self.pos
        self.pos = min(start + count, len(self.data))
        return self.data[start:self.pos]

    def text(self, max_size: int) -> str:
        """A string of up to `max_size` octets, decoded leniently: any octet sequence is a
        string, multi-byte characters included."""
        return self.take(self.byte() % (max_size + 1)).decode("utf-8", "replace")

    def rest(self) -> bytes:
        start = self.pos
        self.pos = len(self.data)
        return self.data[start:]
