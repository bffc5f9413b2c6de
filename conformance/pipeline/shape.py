"""The shape of a fuzz input: what stays when the particulars go. A bucket shows the shape
of its smallest reproducer and counts the shapes of its findings; it is not keyed by shape
(one bug shows through many inputs: the finding's signature says which bug it is).

A frame's shape is its command and the set of what it carries: the spec's header names
(any other name counts as `x-*`), and the marks of a broken grammar: a header line
without a colon (`no-colon`), an escape the spec does not define (`bad-escape`), CR LF
line ends (`crlf`), no blank line after the headers (`no-blank-line`), no NUL at the end
(`no-nul`), and a body (`body`). A line that is not a command shows as `?`. Values, order,
repetition and sizes are dropped: a fuzzer varies them freely and they seldom make another
bug. The input's shape is its frames' shapes, a run of equal ones kept once.

Pure Python, no Spark: the pipeline applies it as a UDF and tests call it directly."""

from __future__ import annotations

import re

#: Longest shape kept; a longer one ends in an ellipsis (a bucket key, not a transcript).
MAX_SHAPE = 400
#: The header names the STOMP 1.0-1.2 specs define.
SPEC_HEADERS = frozenset({
    "accept-version", "host", "login", "passcode", "heart-beat", "version", "session",
    "server", "destination", "id", "ack", "subscription", "message-id", "receipt",
    "receipt-id", "transaction", "content-length", "content-type", "message",
})
_COMMAND = re.compile(r"[A-Z]{1,24}")
_BAD_ESCAPE = re.compile(r"\\(?![rnc\\])")


def _frame(text: str, terminated: bool) -> str:
    marks: set[str] = set()
    if "\r\n" in text:
        marks.add("crlf")
        text = text.replace("\r\n", "\n")
    head, blank, body = text.partition("\n\n")
    lines = head.split("\n")
    command = lines[0] if _COMMAND.fullmatch(lines[0]) else "?"
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            marks.add("no-colon")
            continue
        marks.add(name if name in SPEC_HEADERS else "x-*")
        if _BAD_ESCAPE.search(name) or _BAD_ESCAPE.search(value):
            marks.add("bad-escape")
    if not blank:
        marks.add("no-blank-line")
    elif body:
        marks.add("body")
    if not terminated:
        marks.add("no-nul")
    return f"{command}{{{','.join(sorted(marks))}}}"


def input_shape(data: str | None) -> str | None:
    """The shape of an input given one character per octet; None for None."""
    if data is None:
        return None
    frames: list[str] = []
    pieces = data.split("\x00")
    for index, piece in enumerate(pieces):
        text = piece.lstrip("\r\n")  # heart-beats between frames are no part of a shape
        if text:
            shape = _frame(text, terminated=index < len(pieces) - 1)
            if not frames or frames[-1] != shape:
                frames.append(shape)
    shape = " ".join(frames) or "empty"
    return shape if len(shape) <= MAX_SHAPE else shape[:MAX_SHAPE] + "…"
