"""The small choices an input is built from, read off a few wide random words.

A Hypothesis draw costs tens of microseconds, so the many small choices of a frame (which
header, which piece of text, which line ends in CR LF) are read in mixed radix off 128-bit
words: a handful of words per input. The words come from Hypothesis (`from_draw`: tests,
shrinking; zero words give the plainest input) or from a seeded `random.Random` (`seeded`:
campaigns, where input N of seed S is the same input on every run).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
WORD_BITS = 128


class Choices:
    """Numbers below a bound read off words from `word`; a new word is taken when the
    last one has no distinct values left for the next choice."""

    __slots__ = ("_word", "_value", "_left")

    def __init__(self, word: Callable[[], int]) -> None:
        self._word = word
        self._value = 0
        self._left = 1  # how many distinct values the rest of _value can still tell apart

    @classmethod
    def seeded(cls, rng: random.Random) -> Choices:
        return cls(lambda: rng.getrandbits(WORD_BITS))

    @classmethod
    def from_draw(cls, draw: Callable[[Any], Any], word: Any) -> Choices:
        """Words drawn from the Hypothesis strategy `word` (see strategies.WORD)."""
        return cls(lambda: int(draw(word)))

    def below(self, n: int) -> int:
        """A number in [0, n)."""
        if n <= 1:
            return 0
        if self._left < n:
            self._value, self._left = self._word(), 1 << WORD_BITS
        self._left //= n
        self._value, chosen = divmod(self._value, n)
        return chosen

    def between(self, low: int, high: int) -> int:
        return low + self.below(high - low + 1)

    def pick(self, choices: Sequence[T]) -> T:
        return choices[self.below(len(choices))]

    def flag(self) -> bool:
        return self.below(2) == 1
