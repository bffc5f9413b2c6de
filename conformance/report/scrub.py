"""Secrets out of results before any report is written: the passcode becomes `***` in
transcripts, messages and notes, and every `passcode:` header line is masked whatever it
holds (a case may send a wrong passcode on purpose, or the broker may echo one back).

Transcripts are scrubbed as streams, one per connection and direction, so that a passcode
sent one octet per record (the byte-at-a-time cases) is found all the same."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import quote

from conformance.runner.results import CaseResult
from conformance.wire.transcript import Record

if TYPE_CHECKING:
    from conformance.wire.target import Target

MASK = "***"
_HEADER = re.compile(rb"(?im)^passcode:([^\r\n\x00]*)")
_TEXT_HEADER = re.compile(r"(?i)(\bpasscode[:=])[^\s,;]*")
_STREAMED = ("in", "out")


def _forms(passcode: str) -> list[str]:
    """The passcode as sent, STOMP-escaped (1.2 rules; some clients escape CONNECT too)
    and percent-encoded (as in a broker URL), longest first."""
    escaped = (passcode.replace("\\", "\\\\").replace(":", "\\c").replace("\n", "\\n")
               .replace("\r", "\\r"))
    return sorted({passcode, escaped, quote(passcode, safe="")}, key=len, reverse=True)


class Scrubber:
    def __init__(self, passcode: str | None) -> None:
        forms = _forms(passcode) if passcode else []
        self._text = re.compile("|".join(map(re.escape, forms))) if forms else None
        self._bytes = (re.compile(b"|".join(re.escape(f.encode("utf-8")) for f in forms))
                       if forms else None)

    def text(self, text: str) -> str:
        if self._text is not None:
            text = self._text.sub(MASK, text)
        return _TEXT_HEADER.sub(lambda m: m.group(1) + MASK, text)

    def spans(self, stream: bytes) -> list[tuple[int, int]]:
        """Octet ranges to mask, sorted and merged (an empty range marks an empty header)."""
        found = [m.span(1) for m in _HEADER.finditer(stream)]
        if self._bytes is not None:
            found += [m.span() for m in self._bytes.finditer(stream)]
        merged: list[tuple[int, int]] = []
        for start, end in sorted(found):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def transcript(self, records: list[Record]) -> list[Record]:
        streams: dict[tuple[str, str], list[int]] = {}
        for i, r in enumerate(records):
            if r.direction in _STREAMED and r.data:
                streams.setdefault((r.conn, r.direction), []).append(i)
        data = {i: r.data for i, r in enumerate(records)}
        for indexes in streams.values():
            chunks = [records[i].data for i in indexes]
            for i, chunk in zip(indexes, _mask(chunks, self.spans(b"".join(chunks))),
                                strict=True):
                data[i] = chunk
        return [replace(r, data=(data[i] if r.direction in _STREAMED
                                 else self.octets(r.data)), note=self.text(r.note))
                for i, r in enumerate(records)]

    def octets(self, data: bytes) -> bytes:
        """`data` with the passcode and every passcode header's value masked."""
        return _mask([data], self.spans(data))[0] if data else data


def _mask(chunks: list[bytes], spans: list[tuple[int, int]]) -> list[bytes]:
    """Each chunk with the spans of the whole stream cut out; a span's `***` goes in the
    chunk where it starts, an empty span at the very end in the last chunk."""
    out: list[bytes] = []
    offset, stars = 0, MASK.encode()
    for n, chunk in enumerate(chunks):
        start, end, last = offset, offset + len(chunk), n == len(chunks) - 1
        piece, pos = bytearray(), start
        for s, e in spans:
            if s < start and e <= start:
                continue
            if s > end or (s == end and not last):
                break
            if s >= start:
                piece += chunk[pos - start:s - start] + stars
            pos = max(pos, min(e, end))
        piece += chunk[pos - start:]
        out.append(bytes(piece))
        offset = end
    return out


def scrub(results: list[CaseResult], target: Target | None,
          passcode: str | None = None) -> list[CaseResult]:
    """Copies of `results` without the target's passcode (or `passcode`, with no target);
    `results` are left as they are."""
    scrubber = Scrubber(target.credentials[1] if target is not None else passcode)
    return [replace(r, title=scrubber.text(r.title), message=scrubber.text(r.message),
                    expected=scrubber.text(r.expected), observed=scrubber.text(r.observed),
                    deviation=scrubber.text(r.deviation),
                    violations=[scrubber.text(v) for v in r.violations],
                    transcript=scrubber.transcript(r.transcript))
            for r in results]
