"""What a run produces: outcomes, per-case results with their transcript, and the
summary. Every reporter (console, JSON, JUnit, records, pytest) reads these."""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any


class Outcome(enum.StrEnum):
    #: every expectation met, every received frame valid
    PASSED = "passed"
    #: a MUST, MUST NOT or REQUIRED statement broken
    FAILED = "failed"
    #: a SHOULD statement broken
    NON_STRICT = "non-strict"
    #: a MAY or implementation-defined behaviour, recorded
    INFORMATIONAL = "informational"
    #: the profile declares the capability absent, or the version is not spoken
    UNSUPPORTED = "unsupported"
    #: a failure listed in the profile with a reason
    KNOWN_DEVIATION = "known-deviation"
    #: the harness or the case could not run
    ERROR = "error"
    #: not run (deselected, or the global deadline passed)
    SKIPPED = "skipped"


#: How bad each outcome is, for combining grades: the worst wins.
SEVERITY = {
    Outcome.PASSED: 0, Outcome.SKIPPED: 0, Outcome.UNSUPPORTED: 0,
    Outcome.INFORMATIONAL: 1, Outcome.KNOWN_DEVIATION: 2, Outcome.NON_STRICT: 3,
    Outcome.FAILED: 4, Outcome.ERROR: 5,
}

#: The outcome of a broken statement of each strength.
BROKEN = {"must": Outcome.FAILED, "should": Outcome.NON_STRICT, "may": Outcome.INFORMATIONAL}


def worst(*outcomes: Outcome) -> Outcome:
    return max(outcomes, key=SEVERITY.__getitem__, default=Outcome.PASSED)


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


@dataclass(slots=True)
class CaseResult:
    id: str
    title: str
    version: str
    outcome: Outcome
    level: str
    statements: tuple[str, ...]
    versions: tuple[str, ...]
    area: str
    file: str = ""
    line: int = 0
    duration_ms: float = 0.0
    #: one line: why it did not pass (empty when it passed)
    message: str = ""
    #: the statement broken, when one is
    statement: str = ""
    expected: str = ""
    observed: str = ""
    #: the step that decided it (its YAML line)
    step_line: int = 0
    transcript: list[Record] = field(default_factory=list)
    #: violations the validator found in frames the case did not look at
    violations: list[str] = field(default_factory=list)
    deviation: str = ""
    #: an error because the broker refused the session the case needed (its settings,
    #: not the statement checked)
    setup_refused: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.id, self.version)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "title": self.title, "version": self.version,
            "outcome": self.outcome.value, "level": self.level,
            "statements": list(self.statements), "versions": list(self.versions),
            "area": self.area, "file": self.file, "line": self.line,
            "duration_ms": round(self.duration_ms, 3), "message": self.message,
            "statement": self.statement, "expected": self.expected, "observed": self.observed,
            "step_line": self.step_line, "violations": self.violations,
            "deviation": self.deviation,
            "transcript": [r.to_json() for r in self.transcript],
        }


def summarise(results: list[CaseResult]) -> dict[str, Any]:
    """Counts per outcome and, per level, how many passed of those that ran."""
    by_outcome = {o.value: 0 for o in Outcome}
    by_level: dict[str, dict[str, int]] = {}
    for r in results:
        by_outcome[r.outcome.value] += 1
        level = by_level.setdefault(r.level, {"passed": 0, "total": 0})
        if r.outcome not in (Outcome.SKIPPED, Outcome.UNSUPPORTED):
            level["total"] += 1
            level["passed"] += r.outcome == Outcome.PASSED
    return {"total": len(results), "outcomes": by_outcome, "levels": by_level}
