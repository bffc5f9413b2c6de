"""Differential parsing: the same bytes through our parser, stomp.py's and stompest's, and
each disagreement judged by the spec.

`differential(data, version=...)` returns at most one `Disagreement` per peer: the first
frame on which the peer and ours part ways (what follows is usually its consequence).
Each is classified by a rule of `_classify`, which names the statement that decides it and
the side the spec supports: ours (the peer is lenient or wrong), the peer (a bug in ours),
either, or a leniency of ours (written down in conformance/codec/parser.py and
conformance/spec/grammar.py). A disagreement
no rule explains is `Side.UNKNOWN`: a new class to triage, and a failure for the fuzzer.

Input of the fuzz target: [version] stream.

`Tally` gathers the disagreements of many inputs into classes (peer, version, kind), each
with a count and its shortest example, and writes them as JSON Lines or a Markdown table.
"""

from __future__ import annotations

import base64
import enum
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from conformance.fuzz.parsing.draw import Draw
from conformance.fuzz.parsing.peers import Reading, Seen, read_ours, read_stompest, read_stomppy
from conformance.report.markdown import table
from conformance.spec import catalogue, statement_id
from conformance.spec.grammar import COMMANDS, UNESCAPED_COMMANDS, VERSIONS, Version


class Side(enum.StrEnum):
    """Which reading the spec supports."""

    OURS = "ours"          #: ours; the peer is lenient or wrong
    PEER = "peer"          #: the peer's: a bug in ours
    EITHER = "either"      #: the spec allows both
    LENIENCY = "leniency"  #: the peer's by the letter; ours departs on purpose, in writing
    UNKNOWN = "unknown"    #: no rule explains it yet: triage, then add a rule


@dataclass(frozen=True, slots=True)
class Disagreement:
    peer: str
    version: Version
    #: Stable name of the class of disagreement, e.g. "undefined-escape".
    kind: str
    side: Side
    #: The statement that decides it (None where the spec has no sentence for it).
    statement: str | None
    #: What each side made of the frame at issue.
    ours: str
    theirs: str
    #: What the peer does, as a sentence ("accepts an undefined escape ...").
    explanation: str

    def __str__(self) -> str:
        verdict = {
            Side.OURS: "ours is right", Side.PEER: "the spec supports it: a bug in ours",
            Side.EITHER: "the spec allows both", Side.UNKNOWN: "unclassified",
            Side.LENIENCY: "the spec supports it; ours is lenient on purpose",
        }[self.side]
        rule = f", statement {self.statement}" if self.statement else ""
        return f"STOMP {self.version}: {self.peer} {self.explanation}: {verdict}{rule}"


PEERS: dict[str, Callable[[bytes, Version], Reading]] = {
    "stomp.py": lambda data, version: read_stomppy(data),
    "stompest": read_stompest,
}


def differential(data: bytes, *, version: Version,
                 peers: Mapping[str, Callable[[bytes, Version], Reading]] | None = None
                 ) -> list[Disagreement]:
    """Parse `data` as a stream of `version` with ours and each peer (default: PEERS);
    the disagreements."""
    ours = read_ours(data, version)
    found = []
    for peer, read in (PEERS if peers is None else peers).items():
        disagreement = _compare(_Case(data, version, peer, ours, read(data, version)))
        if disagreement is not None:
            found.append(disagreement)
    return found


def differential_target(data: bytes, *, tally: Tally | None = None,
                        on_new: Callable[[Example], None] | None = None) -> None:
    """The fuzz target: fails on a disagreement no rule classifies. With a `tally`, counts
    every disagreement in it and calls `on_new` with each class seen for the first time."""
    version, stream = version_of(data)
    found = differential(stream, version=version)
    if tally is not None:
        for example in tally.add(stream, found):
            if on_new is not None:
                on_new(example)
    for disagreement in found:
        if disagreement.side is Side.UNKNOWN:
            raise UnclassifiedDisagreement(f"{disagreement}: ours {disagreement.ours}; "
                                           f"{disagreement.peer} {disagreement.theirs}")


class UnclassifiedDisagreement(Exception):
    """A disagreement with a peer that no rule of the differential explains."""


# -- the report -------------------------------------------------------------------------------

def version_of(data: bytes) -> tuple[Version, bytes]:
    """The version and stream a fuzz input stands for (its first octet picks the version)."""
    draw = Draw(data)
    return draw.pick(VERSIONS), draw.rest()


@dataclass(slots=True)
class Example:
    """One class of disagreement: how often it was seen and its shortest input."""

    disagreement: Disagreement
    stream: bytes
    count: int = 0

    def record(self) -> dict[str, object]:
        """A flat JSON object: the class, the verdict, both readings, the input."""
        d = self.disagreement
        return {
            "schema": 1, "peer": d.peer, "version": d.version, "kind": d.kind,
            "side": d.side.value, "statement": d.statement, "explanation": d.explanation,
            "ours": d.ours, "theirs": d.theirs, "count": self.count,
            "input": self.stream.decode("latin-1").encode("unicode_escape").decode("ascii"),
            "input_base64": base64.b64encode(self.stream).decode("ascii"),
        }


@dataclass(slots=True)
class Tally:
    """Disagreements by class: (peer, version, kind)."""

    classes: dict[tuple[str, str, str], Example] = field(default_factory=dict)

    def add(self, stream: bytes, found: Iterable[Disagreement]) -> list[Example]:
        """Count each disagreement of `stream`; the classes seen for the first time."""
        new = []
        for d in found:
            key = (d.peer, d.version, d.kind)
            example = self.classes.get(key)
            if example is None:
                example = self.classes[key] = Example(d, stream)
                new.append(example)
            elif len(stream) < len(example.stream):
                example.disagreement, example.stream = d, stream
            example.count += 1
        return new

    def examples(self) -> list[Example]:
        """Classes ordered by side (unknown first, then the peer's), peer, kind, version."""
        order = {Side.UNKNOWN: 0, Side.PEER: 1, Side.LENIENCY: 2, Side.EITHER: 3, Side.OURS: 4}
        return sorted(self.classes.values(), key=lambda e: (
            order[e.disagreement.side], e.disagreement.peer, e.disagreement.kind,
            e.disagreement.version))

    def jsonl(self) -> str:
        return "".join(json.dumps(e.record(), sort_keys=True) + "\n" for e in self.examples())

    def markdown(self) -> str:
        """A table: one row per class, with the statement that decides it and an input."""
        rows = []
        for e in self.examples():
            d = e.disagreement
            shown = e.record()["input"]
            assert isinstance(shown, str)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            cell = shown.replace("|", "\\|").replace("`", "'")
            rows.append([d.peer, d.version, d.kind, d.side.value, d.statement or "-",
                         str(e.count), f"`{cell}`"])
        return "\n".join(table(["peer", "version", "class", "spec supports", "statement",
                                 "seen", "example"], rows)) + "\n"


# -- comparison -------------------------------------------------------------------------------

@dataclass(slots=True)
class _Case:
    """One peer against ours on one stream, and the frame index where they part."""

    data: bytes
    version: Version
    peer: str
    ours: Reading
    theirs: Reading
    index: int = 0

    def frame(self, reading: Reading) -> Seen | None:
        return reading.frames[self.index] if self.index < len(reading.frames) else None

    @property
    def start(self) -> int:
        """Where the frame at issue starts: ours, or past the EOLs after our last frame."""
        spans = self.ours.spans
        if self.index < len(spans):
            return spans[self.index][0]
        start = sum(spans[-1]) if spans else 0
        while start < len(self.data) and self.data[start] in b"\r\n":
            start += 1
        return start

    def gap(self, index: int) -> bytes:
        """The octets between frame `index - 1` (or the stream's start) and frame `index`
        (or, past our last frame, the next octet that is no EOL)."""
        spans = self.ours.spans
        end = spans[index][0] if index < len(spans) else self.start
        return self.data[sum(spans[index - 1]) if index else 0:end]

    @property
    def raw(self) -> bytes:
        """Our bytes of the frame at issue (all that is left if ours has no such frame)."""
        spans = self.ours.spans
        if self.index < len(spans):
            start, size = spans[self.index]
            return self.data[start:start + size]
        return self.data[self.start:]

    def cite(self, rule: str) -> str | None:
        """The id of `rule` in this version, if some statement states it for it."""
        found = statement_id(rule, self.version)
        known = catalogue()
        return found if found in known and self.version in known[found].versions else None


def _describe(reading: Reading, frame: Seen | None) -> str:
    if frame is not None:
        return f"reads {frame}"
    if reading.error is not None:
        rule = f" [{reading.statement}]" if reading.statement else ""
        return f"rejects it: {reading.error[:160]}{rule}"
    return "waits for more bytes" if reading.pending else "reads no frame"


def _compare(case: _Case) -> Disagreement | None:
    ours, theirs = case.ours, case.theirs
    count = min(len(ours.frames), len(theirs.frames))
    case.index = next((i for i in range(count) if ours.frames[i] != theirs.frames[i]), count)
    mine, other = case.frame(ours), case.frame(theirs)
    if mine is None and other is None:
        # Same frames; where the stream ends one side may still be waiting for the rest of
        # a frame the other has judged already: too early to call a disagreement.
        if ours.pending or theirs.pending or (ours.error is None) == (theirs.error is None):
            return None
    kind, side, statement, explanation = _classify(case, mine, other)
    return Disagreement(case.peer, case.version, kind, side, statement,
                        _describe(ours, mine), _describe(theirs, other), explanation)


# -- classification ---------------------------------------------------------------------------

#: A classifier's answer: the class, which side the spec supports, the statement, why.
Classified = tuple[str, Side, str | None, str]


def _classify(case: _Case, mine: Seen | None, other: Seen | None) -> Classified:
    classified = _nul_in_head(case) or _eols_before_frame(case) or _crlf_between_frames(case)
    if classified is None and (mine is not None or case.ours.error is None):
        classified = _lf_crlf_blank_line(case)  # where ours reads the frame or waits on it
    if classified is not None:
        return classified
    if case.ours.error is not None and mine is None:
        return _ours_rejects(case, other)
    if mine is not None and other is None:
        return _peer_refuses(case, mine)
    if mine is not None and other is not None:
        return _frames_differ(case, mine, other)
    return _ours_waits(case, other)


def _nul_in_head(case: _Case) -> Classified | None:
    """A NUL among the headers of the frame at issue (or of the one before, which a peer
    cut short there), which a peer took for the frame's end. The grammar allows it. Where
    ours rejects the frame for a fault before that NUL, that fault is the class instead."""
    spans = case.ours.spans
    raws = [(case.raw, case.start)]
    if 0 < case.index <= len(spans):
        raws.append((case.data[spans[case.index - 1][0]:sum(spans[case.index - 1])], -1))
    for raw, start in raws:
        head = _head(raw, case.version)
        line = head.find(b"\n")
        nul = head.find(b"\x00", line + 1) if line >= 0 else -1
        if nul < 0 or len(head) == len(raw):  # no NUL among headers, or no blank line after
            continue
        fault = case.ours.offset if case.ours.error is not None else None
        if start >= 0 and fault is not None and fault - start < nul:
            continue
        return ("nul-in-header", Side.OURS, case.cite("frames.header-grammar"),
                "ends a frame at a NUL among its headers (the grammar allows any octet there "
                "but LF, CR and ':')")
    return None


def _eols_before_frame(case: _Case) -> Classified | None:
    """stomp.py skips single LFs after a NUL; two EOLs left before a frame look to its
    parse_frame like the blank line that ends the headers, and it drops the frame."""
    if case.peer != "stomp.py":
        return None
    for index in range(case.index + 1):  # a lost frame shifts every later one
        gap = case.gap(index).lstrip(b"\n") if index else case.gap(index)
        if b"\n\n" in gap or b"\r\n\r\n" in gap:
            return ("eols-before-frame", Side.OURS, case.cite("frames.trailing-eols"),
                    "loses the frame after two or more EOLs (heart-beats) that it did not "
                    "skip")
    return None


def _crlf_between_frames(case: _Case) -> Classified | None:
    """stompest skips a LF between frames, not a CR LF: it starts a frame at the CR."""
    if case.peer != "stompest" or b"\r\n" not in case.gap(case.index):
        return None
    if case.version == "1.2":
        return ("crlf-heart-beat", Side.OURS, case.cite("heart-beating.send-eol"),
                "takes a CR LF heart-beat for the start of a frame (1.2: EOL is CR LF or LF)")
    return ("crlf-heart-beat", Side.LENIENCY, case.cite("heart-beating.send-eol"),
            "takes a CR LF between frames for the start of a frame (ours reads "
            "it as an EOL in every version: conformance/codec/parser.py)")


def _head(raw: bytes, version: Version) -> bytes:
    """The command and header lines of `raw`: up to the blank line (LF LF; in 1.2 also an
    LF then a CR LF), or all of it when there is none."""
    end = raw.find(b"\n\n")
    if version == "1.2":
        crlf = raw.find(b"\n\r\n", 0, end + 1 if end >= 0 else len(raw))
        if crlf >= 0:
            end = crlf
    return raw if end < 0 else raw[:end]


def _unknown(what: str) -> Classified:
    return "unclassified", Side.UNKNOWN, None, what


def _first_line(raw: bytes, offset: int) -> bytes:
    """The line of `raw` that holds `offset`."""
    start = raw.rfind(b"\n", 0, offset) + 1
    end = raw.find(b"\n", offset)
    return raw[start:end if end >= 0 else len(raw)]


def _ours_rejects(case: _Case, other: Seen | None) -> Classified:
    """Ours raised on a frame the peer read (or skipped)."""
    statement = case.ours.statement
    if case.ours.limit or statement is None:
        return ("limit", Side.EITHER, case.cite("size-limits.may-limit"),
                "reads a frame past our limits")
    rule = statement.removesuffix("-v10").removesuffix("-v11")
    raw = case.raw
    v = case.version
    if (case.ours.error or "").startswith("EncodingError"):
        return ("invalid-utf8", Side.OURS, statement, "accepts a command or header that is "
                "not UTF-8" + (" (nor US-ASCII, all STOMP 1.0 allows)" if v == "1.0" else ""))
    if rule == "frames.command-grammar":
        command = raw.split(b"\n", 1)[0]
        if b"\x00" in command:
            return ("nul-in-command", Side.OURS, statement,
                    "ends a frame at a NUL in its command line, and reads (or skips) the "
                    "cut or empty command, which the grammar does not have")
        if v != "1.2" and command.endswith(b"\r"):
            return ("cr-eol-before-1.2", Side.OURS, case.cite("frames.eol-lf-required"),
                    f"ends a line at CR LF, which STOMP {v} does not (a CR is an octet)")
        if other is not None and other.command.upper() in COMMANDS:
            return ("command-case", Side.OURS, case.cite("frames.case-sensitive"),
                    f"passes the command {other.command[:20]!r}, which differs in case from "
                    "one of the grammar's (commands are case-sensitive)")
        return ("unknown-command", Side.OURS, statement,
                f"passes a command outside the STOMP {v} grammar")
    line = _first_line(raw, max((case.ours.offset or 0) - case.start, 0))
    kinds = {
        "value-encoding.undefined-escape-fatal":
            ("undefined-escape", f"accepts an undefined escape that STOMP {v} says MUST be "
             "treated as fatal"),
        "content-length.read-octets":
            ("content-length-not-a-count", "accepts a content-length that is not an octet "
             "count (a sign, a space, a non-ASCII digit)"),
        "content-length.nul-terminated":
            ("content-length-without-nul", "accepts a frame whose content-length octets "
             "are not followed by NUL"),
        "body.forbidden-frames": ("body-not-allowed", "accepts a body on a frame that "
                                  "must not have one"),
    }
    if rule in kinds:
        kind, explanation = kinds[rule]
        return kind, Side.OURS, statement, explanation
    if rule == "frames.header-grammar":
        if v == "1.2" and line.endswith(b"\r"):
            line = line[:-1]  # the CR of its EOL
        name, colon, value = line.partition(b":")
        if not colon:
            kind, what = "header-without-colon", "a header line without ':'"
        elif not name:
            kind, what = "empty-header-name", "a header with an empty name"
        elif b"\r" in line and v == "1.2":
            kind, what = "cr-in-header", "a CR inside a header line"
        else:
            kind, what = "colon-in-value", "an unescaped ':' in a header value"
        return kind, Side.OURS, statement, f"accepts {what}"
    return rule, Side.OURS, statement, f"accepts what {statement} forbids"


def _peer_refuses(case: _Case, mine: Seen) -> Classified:
    """Ours read a frame the peer rejected, waited on or skipped."""
    theirs, v = case.theirs, case.version
    error = theirs.error or ""
    if case.peer == "stompest":
        if mine.command in ("NACK", "STOMP") and v == "1.0" and "Invalid command" in error:
            return ("command-not-in-1.0", Side.LENIENCY, case.cite("frames.command-grammar"),
                    f"rejects {mine.command}, which the STOMP 1.0 grammar does not have "
                    "(ours reads every version's commands; its session refuses them)")
        if v == "1.0" and error.startswith("UnicodeDecodeError"):
            return ("non-ascii-in-1.0", Side.LENIENCY, case.cite("frames.header-grammar"),
                    "rejects a non-ASCII octet, which the STOMP 1.0 grammar (CHAR, US-ASCII) "
                    "does not allow (ours reads 1.0 headers as UTF-8, as 1.1 does)")
        if mine.command == "STOMP" and "escape" in error:
            return ("stomp-frame-escapes", Side.LENIENCY, case.cite("value-encoding.escape-"
                    "headers"), "decodes escapes in a STOMP frame (grammar.UNESCAPED_COMMANDS: "
                    "ours takes STOMP as literal as CONNECT)")
    return _unknown("rejects a frame ours reads")


_ESCAPE = re.compile(r"\\(.)")
_DECODED = {"r": "\r", "n": "\n", "c": ":", "\\": "\\"}


def _decode_escapes(text: str) -> str:
    """`text` with the escapes of STOMP 1.2 decoded and any other kept, as a peer that
    decodes them where the spec says there are none would read it."""
    return _ESCAPE.sub(lambda m: _DECODED.get(m.group(1), m.group(0)), text)


def _header_map(entries: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Seen's headers for `entries`, the first of repeated names winning (as all do)."""
    found: dict[str, str] = {}
    for name, value in entries:
        found.setdefault(name, value)
    return tuple(sorted(found.items()))


def _lf_crlf_blank_line(case: _Case) -> Classified | None:
    """A peer missed the blank line of a 1.2 frame whose headers end at LF CR LF (read on)."""
    if case.version == "1.2" and case.raw[len(_head(case.raw, "1.2")):].startswith(b"\n\r\n"):
        return ("lf-crlf-blank-line", Side.OURS, case.cite("frames.eol-cr-optional"),
                "misses the end of the headers at LF CR LF (an EOL, then a CR LF EOL: the "
                "blank line), looking only for LF LF and CR LF CR LF")
    return None


def _frames_differ(case: _Case, mine: Seen, other: Seen) -> Classified:
    if case.version == "1.2" and other.command == mine.command + "\r" and mine.body == other.body:
        return ("cr-of-eol-kept", Side.OURS, case.cite("frames.eol-cr-optional"),
                "keeps the CR of the CR LF that ends the command line when a bare LF "
                "follows (1.2: EOL is an optional CR then LF)")
    if mine.command == other.command and mine.body == other.body:
        classified = _explain_headers(case, mine, other)
        if classified is not None:
            return classified
    return _unknown("reads the frame differently")


def _explain_headers(case: _Case, mine: Seen, other: Seen) -> Classified | None:
    """Same command and body, other headers: reproduce the peer's headers from our entries
    by what it does wrong (a CR LF taken for an EOL before 1.2, escapes decoded where there
    are none, the CR of a 1.2 EOL kept), and name the first that does."""
    v = case.version
    if v == "1.2":
        ours_map, their_map = dict(mine.headers), dict(other.headers)
        if any(their_map.get(k) == value + "\r" for k, value in ours_map.items()):
            return ("cr-of-eol-kept", Side.OURS, case.cite("frames.eol-cr-optional"),
                    "keeps the CR of the CR LF that ends the last header line when a bare LF "
                    "follows (1.2: EOL is an optional CR then LF)")
    for strip, decode in ((True, False), (False, True), (True, True)):
        if strip and v == "1.2":
            continue
        entries = [(_decode_escapes(k) if decode else k,
                    _decode_escapes(x.removesuffix("\r") if strip else x) if decode
                    else x.removesuffix("\r") if strip else x) for k, x in mine.entries]
        if _header_map(entries) != other.headers:
            continue
        if strip:
            return ("cr-eol-before-1.2", Side.OURS, case.cite("frames.eol-lf-required"),
                    f"ends a line at CR LF, which STOMP {v} does not (a CR is an octet)")
        if v == "1.0":
            return ("escape-in-1.0", Side.OURS, case.cite("value-encoding.no-escape"),
                    "decodes escapes in STOMP 1.0, which takes headers literally")
        if mine.command == "STOMP":
            return ("stomp-frame-escapes", Side.LENIENCY,
                    case.cite("value-encoding.escape-headers"),
                    "decodes escapes in a STOMP frame (grammar.UNESCAPED_COMMANDS: ours "
                    "takes STOMP as literal as CONNECT)")
        if mine.command in UNESCAPED_COMMANDS:
            return ("escape-in-connect", Side.OURS,
                    case.cite("value-encoding.connect-not-escaped"),
                    f"decodes escapes in a {mine.command} frame, which has none")
    return None


def _ours_waits(case: _Case, other: Seen | None) -> Classified:
    """Ours waits for more bytes (or read nothing) where the peer has a frame or error."""
    raw, v = case.raw, case.version
    nul = raw.find(b"\x00")
    if other is not None and nul >= 0:
        line = raw.find(b"\n")
        if line < 0 or nul < line:
            return ("nul-in-command", Side.OURS, case.cite("frames.command-grammar"),
                    "ends a frame at a NUL in its command line, and reads the cut command, "
                    "which the grammar does not have")
        if v != "1.2" and b"\r\n\r\n" in raw[:nul]:
            return ("cr-eol-before-1.2", Side.OURS, case.cite("frames.eol-lf-required"),
                    f"ends the headers at CR LF CR LF, which STOMP {v} does not")
        if b"\n\n" not in raw[:nul] and not (v == "1.2" and b"\n\r\n" in raw[:nul]):
            return ("no-blank-line", Side.OURS, case.cite("frames.blank-line-ends-headers"),
                    "ends a frame at a NUL before the blank line that ends its headers")
    return _unknown("reads what ours waits on")
