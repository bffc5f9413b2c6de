"""The one search for a broker's limit on one dimension of a frame (its header count, a
header line, its body), for the `probe` verb's limit probes and the case format's
`probe_limit` step alike: grow the size until the broker refuses it or a ceiling is
reached, then bisect between the largest size accepted and the smallest refused.

The caller says how to try a size (a fresh connection, a SEND of that size, the answer);
the search only chooses the sizes, so each caller keeps its own frames and grading."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    """How the broker answered one size."""

    #: how it refused the size ("ERROR then close", ...); empty when it accepted it
    refusal: str = ""
    #: how long the answer took
    seconds: float = 0.0


class GaveUp(Exception):
    """No more sizes can be tried (the broker stopped answering CONNECT, say): the search
    ends with what it found so far, this error's message saying why."""


@dataclass(frozen=True)
class Limit:
    """What a search found."""

    #: the largest size accepted, and the smallest refused (None: none was)
    accepted: int | None
    refused: int | None
    #: how `refused` was refused
    how: str
    #: `accepted`, or one below the smallest size there is when none was accepted
    floor: int
    #: why the search ended before it was done (a GaveUp's message), else empty
    stopped: str = ""

    @property
    def exact(self) -> bool:
        """Whether the smallest size refused is one above the largest accepted."""
        return self.refused is not None and self.refused - self.floor <= 1


Attempt = Callable[[int], Awaitable[Answer]]


async def find_limit(attempt: Attempt, *, start: int, top: int, low: int = 1,
                     exact: bool = True, quick: float = 0.0,
                     deadline: float | None = None) -> Limit:
    """Try `start`, then grow the size until `attempt` gets a refusal or `top` is accepted:
    fourfold after an answer quicker than `quick` seconds, else twofold. Then bisect.

    `exact`: until the smallest refused size is one above the largest accepted (cutting
    the gap's untried sizes in half); else only until the gap is within a tenth of the
    size accepted (cutting at its lower middle), a coarser search of fewer tries. Either
    way every cut is strictly inside the gap. `low` is the smallest size there is; the
    search also stops at `deadline` (time.monotonic()) or when `attempt` gives up."""
    accepted: int | None = None
    refused: int | None = None
    how = stopped = ""
    size = start
    while deadline is None or time.monotonic() < deadline:
        try:
            answer = await attempt(size)
        except GaveUp as error:
            stopped = str(error)
            break
        if answer.refusal:
            refused, how = size, answer.refusal
        else:
            accepted = size
        floor = accepted if accepted is not None else low - 1
        if refused is None:
            if size >= top:
                break
            size = min(size * (4 if answer.seconds < quick else 2), top)
        elif refused - floor <= (1 if exact else max(floor // 10, 1)):
            break
        else:
            size = (floor + exact + refused) // 2
    floor = accepted if accepted is not None else low - 1
    return Limit(accepted, refused, how, floor, stopped)
