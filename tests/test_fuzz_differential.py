"""Differential parsing against stomp.py and stompest: inputs on which the parsers are known
to disagree get the class and the side the spec supports; the harness runs under atheris
and writes its report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.fuzz.parsing.differential import (
    Side,
    Tally,
    UnclassifiedDisagreement,
    differential,
    differential_target,
)
from conformance.fuzz.parsing.peers import Reading, Seen, read_ours
from conformance.spec import catalogue
from conformance.spec.grammar import Version

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"

# (stream, version, peer, class, side, statement)
KNOWN: list[tuple[bytes, Version, str, str, Side, str | None]] = [
    # The grammar allows a NUL among the headers; both peers end the frame there.
    (b"SEND\nk:a\x00b\n\nbody\x00", "1.2", "stomp.py", "nul-in-header", Side.OURS,
     "frames.header-grammar"),
    (b"SEND\nk:a\x00b\n\nbody\x00", "1.2", "stompest", "nul-in-header", Side.OURS,
     "frames.header-grammar"),
    (b"SEND\x00\n\n\x00", "1.2", "stomp.py", "nul-in-command", Side.OURS,
     "frames.command-grammar"),
    # Undefined escapes are fatal; stomp.py keeps them as they are.
    (b"SEND\nk:a\\tb\n\n\x00", "1.2", "stomp.py", "undefined-escape", Side.OURS,
     "value-encoding.undefined-escape-fatal"),
    (b"SEND\nk:a\\tb\n\n\x00", "1.1", "stomp.py", "undefined-escape", Side.OURS,
     "value-encoding.undefined-escape-fatal-v11"),
    # 1.0 takes headers literally; stomp.py decodes 1.2 escapes in every version.
    (b"SEND\nk:a\\nb\n\n\x00", "1.0", "stomp.py", "escape-in-1.0", Side.OURS,
     "value-encoding.no-escape-v10"),
    (b"CONNECTED\nk:a\\cb\n\n\x00", "1.2", "stomp.py", "escape-in-connect", Side.OURS,
     "value-encoding.connect-not-escaped"),
    # stomp.py misses a blank line written LF then CR LF, and keeps a CR of an EOL.
    (b"SEND\r\nk:v\n\r\nbody\x00", "1.2", "stomp.py", "lf-crlf-blank-line", Side.OURS,
     "frames.eol-cr-optional"),
    # ... and reads on into the body, where a content-length line makes it wait for more
    (b"SEND\nk:\n\r\nbody\ncontent-length:5\n\n\x00", "1.2", "stomp.py",
     "lf-crlf-blank-line", Side.OURS, "frames.eol-cr-optional"),
    # ... or, while ours waits for the content-length octets, ends it at a NUL in the body
    (b"SEND\ncontent-length:9\n\r\nab\x00", "1.2", "stomp.py", "lf-crlf-blank-line",
     Side.OURS, "frames.eol-cr-optional"),
    (b"SEND\r\n\n\x00", "1.2", "stomp.py", "cr-of-eol-kept", Side.OURS,
     "frames.eol-cr-optional"),
    (b"SEND\nk:v\r\n\n\x00", "1.2", "stomp.py", "cr-of-eol-kept", Side.OURS,
     "frames.eol-cr-optional"),
    # Before 1.2 a CR is an octet of the line, not part of its EOL.
    (b"SEND\r\n\r\n\x00", "1.1", "stomp.py", "cr-eol-before-1.2", Side.OURS,
     "frames.eol-lf-required-v11"),
    # A CR LF heart-beat: an EOL in 1.2; ours reads it so in every version (a leniency).
    (b"\r\nRECEIPT\nreceipt-id:1\n\n\x00", "1.2", "stompest", "crlf-heart-beat", Side.OURS,
     "heart-beating.send-eol"),
    (b"\r\nRECEIPT\nreceipt-id:1\n\n\x00", "1.1", "stompest", "crlf-heart-beat",
     Side.LENIENCY, "heart-beating.send-eol-v11"),
    # Two heart-beat EOLs before a frame: stomp.py takes them for its blank line.
    (b"\n\nRECEIPT\nreceipt-id:1\n\n\x00", "1.2", "stomp.py", "eols-before-frame", Side.OURS,
     "frames.trailing-eols"),
    # content-length: an octet count, and the NUL right after its octets.
    (b"SEND\ncontent-length: 1\n\na\x00", "1.2", "stompest", "content-length-not-a-count",
     Side.OURS, "content-length.read-octets"),
    (b"SEND\ncontent-length:1\n\nab\x00", "1.2", "stomp.py", "content-length-without-nul",
     Side.OURS, "content-length.nul-terminated"),
    (b"SEND\ndestination:/q\x00", "1.2", "stomp.py", "no-blank-line", Side.OURS,
     "frames.blank-line-ends-headers"),
    (b"SEND\nk:\xff\n\n\x00", "1.2", "stomp.py", "invalid-utf8", Side.OURS,
     "value-encoding.utf8"),
    (b"send\n\n\x00", "1.2", "stomp.py", "command-case", Side.OURS, "frames.case-sensitive"),
    (b"SEND\nnocolon\n\n\x00", "1.2", "stomp.py", "header-without-colon", Side.OURS,
     "frames.header-grammar"),
    (b"SEND\n:v\n\n\x00", "1.2", "stompest", "empty-header-name", Side.OURS,
     "frames.header-grammar"),
    (b"SUBSCRIBE\nid:0\n\nbody\x00", "1.2", "stomp.py", "body-not-allowed", Side.OURS,
     "body.forbidden-frames"),
    # Where stompest takes the 1.0 grammar by the letter and ours departs on purpose.
    (b"NACK\nid:1\n\n\x00", "1.0", "stompest", "command-not-in-1.0", Side.LENIENCY,
     "frames.command-grammar-v10"),
    (b"SEND\nk:caf\xc3\xa9\n\n\x00", "1.0", "stompest", "non-ascii-in-1.0", Side.LENIENCY,
     "frames.header-grammar-v10"),
    # Past our limits: the spec lets a side set them.
    (b"SEND\nk:" + b"v" * 70_000 + b"\n\n\x00", "1.2", "stomp.py", "limit", Side.EITHER,
     "size-limits.may-limit"),
]


@pytest.mark.parametrize(("stream", "version", "peer", "kind", "side", "statement"), KNOWN,
                         ids=[f"{k[2]}-{k[3]}-{k[1]}-{i}" for i, k in enumerate(KNOWN)])
def test_a_known_disagreement_gets_its_class_and_side(stream: bytes, version: Version,
                                                      peer: str, kind: str, side: Side,
                                                      statement: str | None) -> None:
    found = {d.peer: d for d in differential(stream, version=version)}
    assert peer in found, f"no disagreement with {peer}: {list(found.values())}"
    disagreement = found[peer]
    assert (disagreement.kind, disagreement.side, disagreement.statement) == \
        (kind, side, statement), str(disagreement)
    if statement is not None:
        assert version in catalogue()[statement].versions


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_frames_every_parser_reads_alike_give_no_disagreement(version: Version) -> None:
    stream = (b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:0\ncontent-length:3\n\n"
              b"a\x00b\x00\nRECEIPT\nreceipt-id:7\n\n\x00")
    assert differential(stream, version=version) == []


def wrong_peer(data: bytes, version: Version) -> Reading:
    """A peer with a bug no rule explains: it reads every command backwards."""
    ours = read_ours(data, version)
    return Reading(tuple(Seen(f.command[::-1], f.headers, f.body) for f in ours.frames),
                   ours.error, pending=ours.pending)


def test_a_disagreement_no_rule_explains_fails_the_fuzz_target() -> None:
    stream = b"RECEIPT\nreceipt-id:1\n\n\x00"
    (found,) = differential(stream, version="1.2", peers={"backwards": wrong_peer})
    assert found.side is Side.UNKNOWN
    with pytest.raises(UnclassifiedDisagreement, match="backwards"):
        import conformance.fuzz.parsing.differential as module
        saved = dict(module.PEERS)
        module.PEERS.clear()
        module.PEERS["backwards"] = wrong_peer
        try:
            differential_target(b"\x02" + stream)
        finally:
            module.PEERS.clear()
            module.PEERS.update(saved)


def test_the_tally_keeps_the_shortest_example_and_counts() -> None:
    tally = Tally()
    long, short = b"SEND\nk:a\\tbbbbbbb\n\n\x00", b"SEND\nk:\\t\n\n\x00"
    assert len(tally.add(long, differential(long, version="1.2"))) == 1
    assert tally.add(short, differential(short, version="1.2")) == []
    (example,) = tally.examples()
    assert example.stream == short and example.count == 2
    record = json.loads(tally.jsonl())
    assert record["kind"] == "undefined-escape" and record["side"] == "ours"
    assert "| stomp.py | 1.2 | undefined-escape | ours |" in tally.markdown()


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(FUZZ / "differential.py"), *args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)


def test_the_harness_fuzzes_and_reports_each_class_once(tmp_path: Path) -> None:
    report = tmp_path / "report.jsonl"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    result = harness(f"--report={report}", "-runs=1500", f"-artifact_prefix={tmp_path}/",
                     str(corpus), str(FUZZ / "corpus" / "differential"))
    assert result.returncode == 0, result.stdout[-3000:]
    records = [json.loads(line) for line in report.read_text().splitlines()]
    classes = [(r["peer"], r["version"], r["kind"]) for r in records]
    assert len(classes) == len(set(classes)) >= 20
    assert {r["side"] for r in records} <= {"ours", "peer", "either", "leniency"}


def test_classify_writes_every_class_of_a_corpus_with_its_statement(tmp_path: Path) -> None:
    report, table = tmp_path / "report.jsonl", tmp_path / "report.md"
    result = harness("--classify", f"--report={report}", f"--markdown={table}",
                     str(FUZZ / "corpus" / "differential"))
    assert result.returncode == 0, result.stdout[-3000:]
    records = [json.loads(line) for line in report.read_text().splitlines()]
    assert records and all(r["side"] != "unknown" for r in records)
    known = catalogue()
    for r in records:
        assert r["statement"] is None or r["version"] in known[r["statement"]].versions, r
        assert r["count"] >= 1 and r["input_base64"]
    assert table.read_text().count("\n") == len(records) + 2
