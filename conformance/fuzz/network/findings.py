"""A finding: one distinct way a broker departs from the spec, with the input that shows
it. Findings are told apart by a signature (`signature`), the one notion of "the same bug"
that the campaign, `replay` and the pipeline's buckets share: the rule the broker's answer
breaks (the statement in 1.2's wording, so that one rule broken in 1.0, 1.1 and 1.2
sessions is one bug) and the answer's class (the anomaly's kind, and for a broken frame its
command). What the input was is left out (its mutation, version, frames, how it was cut),
and so are the answer's incidental details (what followed an ERROR, a receipt's value): one
fault shows through many inputs, and where the input changes the answer, the class or the
rule changes with it. Of the inputs that show a finding, it keeps the worst graded.

A finding file is JSON (`Finding.to_json`): the reproducer (the minimised input once the
minimiser is done: its writes as latin-1 text and as hex), the first MAX_RESPONSE octets
the broker answered with (passcode masked), the classification (kind, statement, grade,
detail), where it was found (campaign, seed, input number, time), the broker, and the
command that replays it. `FORMAT` and `SCHEMA_VERSION` head every file.
"""

from __future__ import annotations

import hashlib
import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from conformance.fuzz.inputs.fuzz_input import FuzzInput
from conformance.fuzz.network.oracle import Anomaly, Kind, grade
from conformance.report.scrub import Scrubber
from conformance.runner.results import Outcome
from conformance.spec import rule_of
from conformance.wire.transport import is_loopback, parse_broker

FORMAT = "stomp-conformance-fuzz-finding"
SCHEMA_VERSION = 1


def signature_of(kind: str, statement: str, about: str = "") -> tuple[str, ...]:
    """(kind, rule, about): what makes two anomalies the same finding."""
    return (kind, rule_of(statement), about)


def signature(anomaly: Anomaly) -> tuple[str, ...]:
    return signature_of(anomaly.kind.value, anomaly.statement, anomaly.about)


def signature_text(sig: tuple[str, ...]) -> str:
    """The signature as one line: `KIND RULE [ABOUT]` (the records' `signature`)."""
    return " ".join(part for part in sig if part)


def finding_id(sig: tuple[str, ...]) -> str:
    """`KIND-HASH`: readable in a folder listing, stable for a signature."""
    digest = hashlib.sha256("\x1f".join(sig).encode()).hexdigest()[:10]
    return f"{sig[0]}-{digest}"


@dataclass(frozen=True)
class BrokerInfo:
    """The broker a finding was found on: enough to replay it, no credentials. `id` is
    PROFILE@WHERE (WHERE is `embedded`, or `ws://embedded` over WebSocket, for the reference
    broker the command starts). `transport`: tcp, or ws for STOMP over WebSocket."""

    id: str
    address: str  # host:port, or "" for the reference broker the command starts
    profile: str
    faults: tuple[str, ...] = ()
    embedded: bool = False
    tls: bool = False
    transport: str = "tcp"
    #: the command that started it, when the campaign launched it (`fuzz --launch`)
    launch: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "address": self.address, "profile": self.profile,
                "faults": list(self.faults), "embedded": self.embedded, "tls": self.tls,
                "transport": self.transport, "launch": self.launch}

    @classmethod
    def from_json(cls, data: Any) -> BrokerInfo:
        return cls(id=str(data["id"]), address=str(data.get("address", "")),
                   profile=str(data.get("profile", "reference")),
                   faults=tuple(str(f) for f in data.get("faults", ())),
                   embedded=bool(data.get("embedded", False)), tls=bool(data.get("tls", False)),
                   transport=str(data.get("transport", "tcp")),
                   launch=str(data.get("launch") or ""))


@dataclass(frozen=True)
class Replays:
    """How often the reproducer showed the finding when replayed after its campaign
    (`replay --times N --record`): every time, some of the times (an intermittent finding,
    whose replay command asks for enough tries to show it), or never."""

    tries: int
    reproduced: int
    at: str = ""
    tool_version: str = ""

    @property
    def sure(self) -> int:
        """How many tries show an intermittent finding at least once, 19 times in 20, at
        the low end of the rate measured (Wilson's interval, 90%: a few tries measure a
        rate loosely)."""
        n, rate, z = self.tries, self.reproduced / self.tries, 1.645
        low = (rate + z * z / (2 * n) - z * math.sqrt(rate * (1 - rate) / n
                                                       + z * z / (4 * n * n))) / (1 + z * z / n)
        return max(2, math.ceil(math.log(0.05) / math.log(1 - low)))

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: Any) -> Replays | None:
        if data is None:
            return None
        tries, reproduced = int(data["tries"]), int(data["reproduced"])
        if not 0 <= reproduced <= tries or tries < 1:
            raise ValueError(f"replays: {reproduced} of {tries} tries")
        return cls(tries, reproduced, str(data.get("at", "")),
                   str(data.get("tool_version", "")))


@dataclass(frozen=True)
class Finding:
    id: str
    signature: tuple[str, ...]
    kind: Kind
    statement: str
    grade: Outcome
    detail: str
    #: what the anomaly is about besides the input's mutation (a response frame's command)
    about: str
    generator: str
    input: FuzzInput
    #: the first octets the broker answered the reproducer with, passcode masked
    response: bytes
    #: how the exchange ended: "RECEIPT", "ERROR, open", "closed", "deadline", ...
    ended: str
    broker: BrokerInfo
    campaign: str
    seed: int
    #: the input's number in the campaign, and when it was found
    index: int
    found_at: str
    found_after_s: float
    found_after_inputs: int
    original_octets: int
    minimised: bool = False
    #: whether sending the input again showed the anomaly again (None: not tried yet)
    confirmed: bool | None = None
    #: for a crash: the inputs sent since the last good liveness check, oldest first
    suspects: tuple[FuzzInput, ...] = ()
    #: how many inputs showed it (this one included)
    hits: int = 1
    tool_version: str = ""
    #: what a generator other than the grammar one keeps about its input
    extra: dict[str, Any] = field(default_factory=dict)
    #: the replays after the campaign, when recorded
    replays: Replays | None = None

    @property
    def sent(self) -> tuple[FuzzInput, ...]:
        """What replaying it sends: its input, or for an outage not yet tied to one input
        (unattributed), the suspects in the order they were sent."""
        if self.kind.outage and not self.confirmed and self.suspects:
            return self.suspects
        return (self.input,)

    @property
    def reproduces(self) -> bool | None:
        """Whether sending it again shows it: as the replays after the campaign found, else
        as the campaign's own confirmation did (None: not known)."""
        if self.replays is not None:
            return self.replays.reproduced > 0
        if self.kind.outage and not self.confirmed:
            return None  # the broker went down; which of its suspects did it is not known
        return self.confirmed

    def replay_command(self, path: str) -> str:
        address = self.broker.address
        flags = " --allow-remote" if address and not _loopback(address) else ""
        if self.broker.launch:  # started again by the replay, as the campaign did
            flags += f" --launch {shlex.quote(self.broker.launch)}"
        if self.replays and 0 < self.replays.reproduced < self.replays.tries:
            flags += f" --times {self.replays.sure}"
        return f"stomp-conformance replay {path}{flags}"

    def updated(self, **changes: Any) -> Finding:
        return replace(self, **changes)

    def to_json(self, path: str = "") -> dict[str, Any]:
        return {
            "format": FORMAT, "schema_version": SCHEMA_VERSION, "id": self.id,
            "signature": list(self.signature), "kind": self.kind.value,
            "statement": self.statement, "grade": self.grade.value, "detail": self.detail,
            "about": self.about, "generator": self.generator,
            "input": self.input.to_json(),
            "input_hex": [c.hex() for c in self.input.chunks],
            "response": self.response.decode("latin-1"), "response_octets": len(self.response),
            "ended": self.ended, "broker": self.broker.to_json(), "campaign": self.campaign,
            "seed": self.seed, "index": self.index, "found_at": self.found_at,
            "found_after_s": round(self.found_after_s, 3),
            "found_after_inputs": self.found_after_inputs,
            "original_octets": self.original_octets, "minimised": self.minimised,
            "confirmed": self.confirmed, "suspects": [s.to_json() for s in self.suspects],
            "hits": self.hits, "tool_version": self.tool_version,
            "replay": self.replay_command(path) if path else "", "extra": self.extra,
            "replays": self.replays.to_json() if self.replays else None,
        }

    @classmethod
    def from_json(cls, data: Any) -> Finding:
        """The finding of `to_json`; ValueError saying what is wrong."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a finding file (no \"format\": \"{FORMAT}\")")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"finding schema version {data.get('schema_version')!r} is not "
                             f"{SCHEMA_VERSION}: written by another version of the tool")
        try:
            kind, statement = Kind(data["kind"]), str(data["statement"])
            about = str(data.get("about", ""))
            return cls(
                # computed, not read: a file written by an earlier version of the signature
                # is then the same finding as the anomalies this version finds
                id=str(data["id"]), signature=signature_of(kind.value, statement, about),
                kind=kind, statement=statement,
                grade=Outcome(data["grade"]), detail=str(data["detail"]),
                about=about, generator=str(data["generator"]),
                input=FuzzInput.from_json(data["input"]),
                response=str(data.get("response", "")).encode("latin-1"),
                ended=str(data.get("ended", "")), broker=BrokerInfo.from_json(data["broker"]),
                campaign=str(data.get("campaign", "")), seed=int(data.get("seed", 0)),
                index=int(data.get("index", 0)), found_at=str(data.get("found_at", "")),
                found_after_s=float(data.get("found_after_s", 0.0)),
                found_after_inputs=int(data.get("found_after_inputs", 0)),
                original_octets=int(data.get("original_octets", 0)),
                minimised=bool(data.get("minimised", False)), confirmed=data.get("confirmed"),
                suspects=tuple(FuzzInput.from_json(s) for s in data.get("suspects", ())),
                hits=int(data.get("hits", 1)), tool_version=str(data.get("tool_version", "")),
                extra=dict(data.get("extra") or {}),
                replays=Replays.from_json(data.get("replays")),
            )
        except KeyError as missing:
            raise ValueError(f"finding file lacks the field {missing}") from None
        except (TypeError, UnicodeEncodeError) as error:
            raise ValueError(f"malformed finding file: {error}") from None


@cache  # a finding is saved up to four times, and a host name needs a lookup
def _loopback(address: str) -> bool:
    try:
        return is_loopback(parse_broker(address))
    except ValueError:
        return False


def masked(response: bytes, passcode: str | None) -> bytes:
    """`response` with the passcode (and any passcode header's value) masked."""
    return Scrubber(passcode).octets(response)


def new_finding(anomaly: Anomaly, fuzz: FuzzInput, *, generator: str, response: bytes,
                ended: str, broker: BrokerInfo, campaign: str, seed: int, index: int,
                found_at: str, elapsed: float, inputs: int, tool_version: str,
                suspects: tuple[FuzzInput, ...] = ()) -> Finding:
    sig = signature(anomaly)
    return Finding(
        id=finding_id(sig), signature=sig, kind=anomaly.kind, statement=anomaly.statement,
        grade=grade(anomaly, fuzz), detail=anomaly.detail, about=anomaly.about,
        generator=generator, input=fuzz, response=response, ended=ended, broker=broker,
        campaign=campaign, seed=seed, index=index, found_at=found_at, found_after_s=elapsed,
        found_after_inputs=inputs, original_octets=len(fuzz.data), suspects=suspects,
        tool_version=tool_version)


def counts(finding: Finding) -> bool:
    """Whether a finding counts for the exit code: confirmed, or not sent again yet
    unless it is a timeout or a missing RECEIPT (which a broker slowed by the campaign's load
    may show once)."""
    if finding.confirmed is None:
        return finding.kind not in (Kind.TIMEOUT, Kind.NO_RECEIPT)
    return finding.confirmed


#: The grades a finding can have, worst first.
GRADES = (Outcome.FAILED, Outcome.NON_STRICT, Outcome.INFORMATIONAL)


def worse(grade_: Outcome, than: Outcome) -> bool:
    return GRADES.index(grade_) < GRADES.index(than)


def worst(findings: Sequence[Finding]) -> Outcome | None:
    """The worst grade among the `findings` that count (None: none does)."""
    grades = {f.grade for f in findings if counts(f)}
    return next((g for g in GRADES if g in grades), None)
