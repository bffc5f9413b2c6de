"""A connection's transcript: every octet sent and received, closes and notes, in order,
bounded (a case keeps its head and tail, the run a budget of all transcripts)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Record:
    """One entry of a transcript: bytes sent or received, a close, or a note."""

    #: seconds since the case started
    t: float
    #: "out" (to the broker), "in" (from the broker), "close", "note"
    direction: str
    conn: str
    data: bytes = b""
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": round(self.t, 6), "dir": self.direction,
                               "conn": self.conn}
        if self.data:
            out["data"] = self.data.decode("latin-1")
        if self.note:
            out["note"] = self.note
        return out


def octets(n: int) -> str:
    """'512 B', '256 KiB', '1.2 GiB'."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


class Transcript(list[Record]):
    """A case's records, bounded whatever a broker sends: the first `head` and the last
    `tail` octets of data are kept, in at most MAX_RECORDS records each; the middle is
    cut, and `finish` puts a note where the cut is."""

    MAX_RECORDS = 4096

    def __init__(self, head: int = 256 << 10, tail: int = 64 << 10) -> None:
        super().__init__()
        self._reset(head, tail)

    def _reset(self, head: int, tail: int) -> None:
        self.clear()
        self.head, self.tail = head, tail
        self._head_left = head
        self._tail: deque[Record] = deque()
        self._tail_size = 0
        #: octets of data sent and received, kept or not
        self.total = 0

    @property
    def kept(self) -> int:
        return sum(len(r.data) for r in self) + self._tail_size

    def records(self) -> Iterator[Record]:
        """Every record kept so far, the tail's too (before `finish` puts it in the list)."""
        yield from self
        yield from self._tail

    @property
    def cut(self) -> bool:
        return self.total > self.kept

    def add(self, record: Record) -> None:
        size = len(record.data)
        self.total += size
        if not self._tail and size <= self._head_left and len(self) < self.MAX_RECORDS:
            self._head_left -= size
            self.append(record)
            return
        if not self._tail and self._head_left and len(self) < self.MAX_RECORDS:
            self.append(replace(record, data=record.data[:self._head_left]))
            record = replace(record, data=record.data[self._head_left:])
            self._head_left = 0
        self._tail.append(record)
        self._tail_size += len(record.data)
        while self._tail_size > self.tail or len(self._tail) > self.MAX_RECORDS:
            first = self._tail[0]
            over = self._tail_size - self.tail
            if len(self._tail) <= self.MAX_RECORDS and 0 < over < len(first.data):
                self._tail[0] = replace(first, data=first.data[over:])  # keep its end
                self._tail_size -= over
            else:
                self._tail.popleft()
                self._tail_size -= len(first.data)

    def finish(self, head: int | None = None, tail: int | None = None,
               why: str = "") -> Transcript:
        """Put the kept tail after the head, with a note of the cut when there is one;
        with `head` and `tail`, cut what is kept to those sizes first (`why`: for the
        note). Returns itself."""
        if head is not None and tail is not None:
            kept, total = [*self, *self._tail], self.total
            self._reset(head, tail)
            for record in kept:
                if not record.note.startswith("transcript cut"):
                    self.add(record)
            self.total = total
        if self.cut and self._tail:
            where = self._tail[0]
            self.append(Record(where.t, "note", where.conn, note=(
                f"transcript cut: {octets(self.total)} exchanged, first "
                f"{octets(self.head)} and last {octets(self.tail)} kept{why}")))
        self.extend(self._tail)
        self._tail.clear()
        self._tail_size = 0
        return self


class Budget:
    """What a run keeps of all its transcripts, for the reports: a case's transcript is
    cut to a small remainder once the run has kept `total` octets (a hostile broker's
    cases cannot make the reports grow with their number)."""

    #: what a case keeps once the budget is spent
    SMALL = (16 << 10, 4 << 10)

    def __init__(self, total: int = 16 << 20) -> None:
        self.total = self.left = total

    def keep(self, transcript: Transcript) -> None:
        if transcript.kept > self.left:
            transcript.finish(*self.SMALL, why=f" (the run's {octets(self.total)} for "
                              "transcripts were spent: --transcript-budget)")
        self.left = max(0, self.left - transcript.kept)
