"""The report writers: JSON (against its schema), JUnit XML (against a JUnit XSD in the shape
Jenkins reads), pipeline records; the transcript rendering; no passcode in any file."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import xmlschema

from conformance.broker import BrokerConfig, embedded
from conformance.cli.options import default_cases
from conformance.files import write_atomic
from conformance.profiles import Deviation, Profile, load_profile
from conformance.report import (
    ReportWriter,
    case_records,
    render_html,
    render_markdown,
    render_record,
    render_transcript,
    report_json,
    report_junit,
    schema,
    scrub,
    write_json,
    write_junit,
    write_records,
)
from conformance.report.json_report import chunks, dumps
from conformance.report.junit import ALLOWED
from conformance.report.verdict import certify
from conformance.runner.engine import Engine
from conformance.runner.events import RunFinished, RunStarted
from conformance.runner.results import CaseResult, Outcome
from conformance.scenario import Selection, load_cases
from conformance.spec import catalogue
from conformance.wire.target import Target
from conformance.wire.transcript import Record
from conformance.wire.transport import parse_broker

XSD = Path(__file__).parent / "data" / "junit.xsd"
SECRET = b"s3cr"
CONNECT = (b"CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:s3cr:et\\\n"
           b"heart-beat:0,0\n\n\x00")
ERROR = (b"ERROR\nmessage:<script>alert(1)</script>\ncontent-type:text/plain\n\n"
         b"bad ]]> frame <script>alert(1)</script>\x00")
SERVER = {"server": "RabbitMQ/3.12.0", "version": "1.2"}
RECORD_KEYS = {"schema_version", "kind", "run_id", "timestamp", "tool_version", "broker_id",
               "broker_server", "case_id", "version", "statements", "area", "level", "outcome",
               "duration_ms", "message"}


@pytest.fixture
def target() -> Target:
    return Target(parse_broker("stomp://guest:s3cr%3Aet@127.0.0.1:61613"),
                  load_profile("rabbitmq"))


def transcript() -> list[Record]:
    return [
        Record(0.0001, "note", "main", note="open 127.0.0.1:61613"),
        Record(0.001234, "out", "main", CONNECT),
        Record(0.002, "in", "main", b"CONNECTED\r\nversion:1.2\r\nserver:RabbitMQ/3.12.0\r\n"
                                    b"\r\n\x00"),
        Record(0.003, "out", "main", b"SEND\ndestination:/queue/a\n\n\xff\xfe\x00"),
        Record(0.004, "in", "main", ERROR),
        Record(0.005, "close", "main", note="closed by the broker"),
    ]


def result(outcome: Outcome, **fields: object) -> CaseResult:
    base: dict[str, object] = dict(
        id=f"frames.{outcome.value}", title=f"a case that ends {outcome.value}",
        version="1.2", outcome=outcome, level="must", statements=("frames.nul-terminated",),
        versions=("1.1", "1.2"), area="frames", file="cases/frames/nul.yaml", line=3,
        duration_ms=12.5, transcript=transcript())
    base.update(fields)
    return CaseResult(**base)  # type: ignore[arg-type]


def results() -> list[CaseResult]:
    return [
        result(Outcome.PASSED),
        result(Outcome.FAILED, statement="frames.nul-terminated", step_line=9,
               message="line 9: expected ERROR frame; observed <script>alert(1)</script> ]]>",
               expected="ERROR frame", observed="MESSAGE with body ]]> <script>",
               violations=["frames.nul-terminated: no NUL after the body (offset 41)"]),
        result(Outcome.NON_STRICT, id="content-type.utf8", area="content-type", level="should",
               statements=("content-type.should-include",), message="no content-type",
               expected="content-type header", observed="none"),
        result(Outcome.INFORMATIONAL, level="may", message="broker closed after ERROR"),
        result(Outcome.UNSUPPORTED, version="1.0", transcript=[],
               message="profile 'rabbitmq' does not speak STOMP 1.0"),
        result(Outcome.KNOWN_DEVIATION, deviation="sends no NUL (fixed in 4.0)"),
        result(Outcome.ERROR, id="connecting.reject", area="connecting",
               message="login refused for passcode s3cr:et (url stomp://guest:s3cr%3Aet@h)"),
        result(Outcome.SKIPPED, id="connecting.slow", area="connecting", version="1.1",
               transcript=[], message="deselected by -k"),
    ]


def assert_no_secret(path: Path) -> None:
    data = path.read_bytes()
    assert SECRET not in data, f"{path.name} holds the passcode"
    assert b"s3cr%3Aet" not in data and b"s3cr\\cet" not in data


# -- transcripts ---------------------------------------------------------------------------

def test_render_record_shows_every_octet() -> None:
    send = Record(0.001234, "out", "main", b"SEND\ndestination:/queue/a\n\n\x00")
    pad = " " * len("+0.001234 out main  ")
    assert render_record(send) == (f"+0.001234 out main  SEND\\n\n{pad}destination:/queue/a"
                                   f"\\n\n{pad}\\n\n{pad}^@")
    odd = Record(1.5, "in", "b", b"A\r\n\xff\t\x7f\\ \xc3\xa9 \xc2\x85 \xe2\x80\xae\x00\n")
    assert render_record(odd) == ("+1.500000 in b  A\\r\\n\n" + " " * len("+1.500000 in b  ")
                                  + "\\xff\\x09\\x7f\\\\ é \\xc2\\x85 \\xe2\\x80\\xae^@\\n")


def test_render_record_notes_and_heartbeats() -> None:
    assert render_record(Record(0.5, "note", "main", note="open h:1")) == (
        "+0.500000 note main  open h:1")
    assert render_record(Record(2, "in", "main", b"\n")) == "+2.000000 in main  \\n"
    records = transcript()
    assert render_transcript(records).split("\n+") == [
        render_record(r).removeprefix("+") if i else render_record(r)
        for i, r in enumerate(records)]


# -- scrubbing -----------------------------------------------------------------------------

def test_scrub_masks_the_passcode_and_keeps_the_login(target: Target) -> None:
    original = results()
    clean = scrub(original, target)
    assert original[0].transcript[1].data == CONNECT  # copies: the input is untouched
    assert clean[0] is not original[0]
    connect = clean[0].transcript[1].data
    assert b"\nlogin:guest\npasscode:***\nheart-beat:0,0\n" in connect
    error = next(r for r in clean if r.outcome == Outcome.ERROR)
    assert error.message == "login refused for passcode *** (url stomp://guest:***@h)"


def test_scrub_finds_a_passcode_sent_one_octet_at_a_time(target: Target) -> None:
    split = [Record(i / 1000, "out", "c", CONNECT[i:i + 1]) for i in range(len(CONNECT))]
    notes = [Record(0.0, "note", "c", note="sending CONNECT byte by byte")]
    clean = scrub([result(Outcome.PASSED, transcript=notes + split)], target)[0]
    sent = b"".join(r.data for r in clean.transcript)
    assert SECRET not in sent
    assert sent == CONNECT.replace(b"s3cr:et\\", b"***")
    assert len(clean.transcript) == len(notes) + len(split)  # timings kept, record by record


def test_scrub_masks_any_passcode_header_and_a_login_equal_to_it() -> None:
    target = Target(parse_broker("stomp://same:same@127.0.0.1"), load_profile("reference"))
    frames = [Record(0, "out", "m", b"CONNECT\nlogin:same\npasscode:\n\n\x00"),
              Record(0, "out", "m", b"STOMP\npasscode:wrong-on-purpose\n\n\x00")]
    clean = scrub([result(Outcome.PASSED, transcript=frames)], target)[0]
    assert [r.data for r in clean.transcript] == [
        b"CONNECT\nlogin:***\npasscode:***\n\n\x00", b"STOMP\npasscode:***\n\n\x00"]


# -- JSON ----------------------------------------------------------------------------------

def test_json_report_has_the_documented_shape(target: Target) -> None:
    report = report_json(results(), target=target, server=SERVER, duration=1.23456,
                         tool_version="0.1.0")
    jsonschema.Draft202012Validator(schema()).validate(report)
    assert report["schema_version"] == 1
    assert report["tool"] == {"name": "stomp-conformance", "version": "0.1.0"}
    # 1.0 was unsupported and 1.1 skipped: neither was negotiated
    assert report["broker"] == {"url": "127.0.0.1:61613", "profile": "rabbitmq",
                                "server": "RabbitMQ/3.12.0", "versions": ["1.2"]}
    summary = report["summary"]
    assert summary["total"] == 8 and summary["duration_s"] == 1.235
    assert summary["outcomes"]["failed"] == 1 and summary["outcomes"]["skipped"] == 1
    assert summary["versions"] == {
        "1.0": {}, "1.1": {},  # nothing graded: nothing counted
        "1.2": {"must": {"passed": 1, "total": 4}, "should": {"passed": 0, "total": 1},
                "may": {"passed": 0, "total": 1}},
    }
    case = report["cases"][1]
    for key in ("id", "title", "outcome", "level", "statements", "versions", "duration_ms",
                "message", "transcript"):
        assert key in case
    assert case["outcome"] == "failed" and case["statements"] == ["frames.nul-terminated"]
    assert case["transcript"][1]["data"].startswith("CONNECT\n")
    assert report_json([], target=target, server={}, duration=0,
                       tool_version="0.1.0")["broker"]["server"] is None


def test_write_json_is_utf8_indented_and_secret_free(target: Target, tmp_path: Path) -> None:
    report = report_json(results(), target=target, server=SERVER, duration=1.0,
                         tool_version="0.1.0")
    path = tmp_path / "out" / "report.json"
    write_json(path, report)
    text = path.read_bytes().decode("utf-8")
    assert text.startswith('{\n  "schema_version": 1,')
    loaded = json.loads(text)
    assert loaded == report
    jsonschema.Draft202012Validator(schema()).validate(loaded)
    assert_no_secret(path)
    assert "passcode:***" in text
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # no temp file left


def test_schema_refuses_a_url_with_credentials(target: Target) -> None:
    report = report_json(results()[:1], target=target, server=SERVER, duration=0,
                         tool_version="0.1.0")
    report["broker"]["url"] = "stomp://guest:x@127.0.0.1:61613"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(report, schema())


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_atomic(path, b"old")
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.raises(OSError):
        write_atomic(folder, b"cannot replace a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-folder", "r.json"]


# -- JUnit ---------------------------------------------------------------------------------

def broker_report(given: list[CaseResult], target: Target) -> dict[str, Any]:
    return report_json(given, target=target, server=SERVER, duration=1.0, tool_version="0.1.0")


def junit(target: Target, tmp_path: Path) -> tuple[Path, ET.Element]:
    path = tmp_path / "junit.xml"
    write_junit(path, broker_report(results(), target))
    xmlschema.XMLSchema(XSD).validate(str(path))
    return path, ET.parse(path).getroot()


def cases_of(root: ET.Element) -> dict[str, ET.Element]:
    return {f"{c.get('classname')}/{c.get('name')}": c for c in root.iter("testcase")}


def test_junit_validates_against_the_xsd(target: Target, tmp_path: Path) -> None:
    path, root = junit(target, tmp_path)
    assert path.read_bytes().startswith(b'<?xml version="1.0" encoding="utf-8"?>')
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["connecting", "content-type", "frames"]
    frames = suites["frames"]
    assert (frames.get("tests"), frames.get("failures"), frames.get("errors"),
            frames.get("skipped")) == ("5", "1", "0", "1")
    assert root.get("tests") == "8" and root.get("failures") == "2"
    properties = {p.get("name"): p.get("value") for p in frames.iter("property")}
    assert properties == {"broker": "127.0.0.1:61613", "profile": "rabbitmq",
                          "server": "RabbitMQ/3.12.0", "versions": "1.2"}
    passed = cases_of(root)["stomp.frames/frames.passed [STOMP 1.2]"]
    # Jenkins' schema gives a testcase no file or line attribute.
    assert (passed.get("time"), passed.get("file"), passed.get("line")) == ("0.013000", None, None)


def test_junit_outcomes(target: Target, tmp_path: Path) -> None:
    path, root = junit(target, tmp_path)
    assert_no_secret(path)
    cases = cases_of(root)
    failed = cases["stomp.frames/frames.failed [STOMP 1.2]"]
    failure = failed.find("failure")
    assert failure is not None and failure.text is not None
    assert failure.get("type") == "failed"
    assert failure.get("message") == ("frames.nul-terminated: line 9: expected ERROR frame; "
                                      "observed <script>alert(1)</script> ]]>")
    quote = catalogue()["frames.nul-terminated"].quote
    assert failure.text.startswith(quote + "\nexpected: ERROR frame\n"
                                   "observed: MESSAGE with body ]]> <script>\n")
    assert "violation: frames.nul-terminated: no NUL" in failure.text
    non_strict = cases["stomp.content-type/content-type.utf8 [STOMP 1.2]"].find("failure")
    assert non_strict is not None and non_strict.get("type") == "non-strict"
    assert (non_strict.get("message") or "").startswith("content-type.should-include: ")
    error = cases["stomp.connecting/connecting.reject [STOMP 1.2]"].find("error")
    assert error is not None and "passcode ***" in (error.get("message") or "")
    for name, message in [("frames.unsupported [STOMP 1.0]", "unsupported: profile"),
                          ("connecting.slow [STOMP 1.1]", "skipped: deselected by -k")]:
        skipped = cases_of(root)[f"stomp.{name.split('.')[0]}/{name}"].find("skipped")
        assert skipped is not None and (skipped.get("message") or "").startswith(message)
    for name, note in [("frames.informational", "informational"),
                       ("frames.known-deviation", "known deviation declared by the profile: "
                                                  "sends no NUL (fixed in 4.0)")]:
        case = cases[f"stomp.frames/{name} [STOMP 1.2]"]
        assert [child.tag for child in case] == ["system-out"]  # a pass, with a note
        assert (case.findtext("system-out") or "").startswith(note)


def test_junit_system_out_holds_the_readable_transcript(target: Target,
                                                        tmp_path: Path) -> None:
    _, root = junit(target, tmp_path)
    out = cases_of(root)["stomp.frames/frames.failed [STOMP 1.2]"].findtext("system-out")
    expected = render_transcript(scrub(results(), target)[1].transcript)
    assert out == expected
    assert "passcode:***\\n" in expected and "^@" in expected and "\\xff\\xfe^@" in expected
    assert "\\r\\n" in expected
    assert "message:<script>alert(1)</script>\\n" in expected and "bad ]]> frame" in expected


def test_junit_survives_hostile_text(target: Target) -> None:
    nasty = "]]><script>alert(1)</script>\x00\x1b[31m\r\n&amp; \udcff \ufffe"
    hostile = result(Outcome.FAILED, message=nasty, expected=nasty, observed="]]>",
                     title=nasty, violations=[nasty],
                     transcript=[Record(0, "in", "main", nasty.encode("utf-8", "surrogatepass"))])
    text = report_junit(broker_report([hostile], target))
    xmlschema.XMLSchema(XSD).validate(text.encode("utf-8"))
    failure = ET.fromstring(text.encode("utf-8")).find("testsuite/testcase/failure")
    assert failure is not None
    assert (failure.get("message") or "").startswith(
        "frames.nul-terminated: ]]><script>alert(1)</script>^@\\x1b[31m &amp; ")


# -- records -------------------------------------------------------------------------------

def test_records_one_flat_line_per_result(target: Target, tmp_path: Path) -> None:
    when = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    path = write_records(tmp_path / "records", results(), target=target, run_id="ab12cd34",
                         tool_version="0.1.0", when=when, server="RabbitMQ/3.12.1")
    assert path == tmp_path / "records" / "results-ab12cd34.jsonl"
    assert_no_secret(path)
    lines = path.read_text("ascii").splitlines()
    assert len(lines) == len(results())
    records = [json.loads(line) for line in lines]
    assert all(set(r) == RECORD_KEYS for r in records)
    first, error = records[0], records[6]
    assert first == {
        "schema_version": 1, "kind": "case_result", "run_id": "ab12cd34",
        "timestamp": "2024-05-01T12:00:00.123Z", "tool_version": "0.1.0",
        "broker_id": "rabbitmq@127.0.0.1:61613", "broker_server": "RabbitMQ/3.12.1",
        "case_id": "frames.passed", "version": "1.2",
        "statements": ["frames.nul-terminated"], "area": "frames", "level": "must",
        "outcome": "passed", "duration_ms": 12.5, "message": ""}
    assert error["outcome"] == "error" and "***" in error["message"]
    assert [r["outcome"] for r in records] == [o.outcome.value for o in results()]


def test_records_default_timestamp_is_utc_now(target: Target) -> None:
    stamp = case_records(results()[:1], target=target, run_id="r", tool_version="0")[0][
        "timestamp"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
    parsed = datetime.fromisoformat(stamp)
    assert abs((datetime.now(UTC) - parsed).total_seconds()) < 60


@pytest.mark.parametrize("run_id", ["", "../x", "a/b", ".hidden", "a b"])
def test_records_refuse_a_run_id_that_cannot_name_a_file(target: Target, tmp_path: Path,
                                                          run_id: str) -> None:
    with pytest.raises(ValueError, match="run id"):
        write_records(tmp_path, [], target=target, run_id=run_id, tool_version="0")
    assert list(tmp_path.iterdir()) == []


# -- the certification verdict -------------------------------------------------------------

def graded(*runs: tuple[Outcome, str, str, str]) -> list[CaseResult]:
    """Results from (outcome, level, version, deviation) tuples."""
    return [result(outcome, id=f"c.{i}", level=level, version=version, deviation=deviation)
            for i, (outcome, level, version, deviation) in enumerate(runs)]


P, F, N, K = Outcome.PASSED, Outcome.FAILED, Outcome.NON_STRICT, Outcome.KNOWN_DEVIATION


def test_certification_lines() -> None:
    every = [(P, "must", v, "") for v in ("1.2", "1.0", "1.1")]
    cases = [
        (every, True, "conforms to STOMP 1.0, 1.1 and 1.2: every MUST passed"),
        (every[:2], True, "conforms to STOMP 1.0 and 1.2: every MUST passed"),
        (every[:1] + [(N, "should", "1.2", ""), (Outcome.INFORMATIONAL, "may", "1.2", ""),
                      (Outcome.UNSUPPORTED, "must", "1.0", ""), (Outcome.SKIPPED, "must",
                                                                  "1.1", "")],
         True, "conforms to STOMP 1.2: every MUST passed, 1 SHOULD not met"),
        # a SHOULD-level case whose frames broke a MUST fails conformance all the same
        (every + [(F, "should", "1.2", "")], False,
         "does not conform: 1 MUST case run failed"),
        (every + [(F, "must", "1.2", ""), (K, "must", "1.1", "x"), (K, "must", "1.2", "x")],
         False, "does not conform: 3 MUST case runs failed, 2 of them known deviations"),
        (every + [(K, "must", "1.2", "x")], False,
         "does not conform: 1 MUST case run failed, a known deviation"),
        (every + [(F, "must", "1.2", ""), (Outcome.ERROR, "must", "1.1", "")], False,
         "does not conform: 1 MUST case run failed; 1 case run could not be graded"),
        (every + [(Outcome.ERROR, "must", "1.1", "")] * 2, None,
         "inconclusive: 2 case runs could not be graded"),
        ([(P, "should", "1.2", ""), (Outcome.SKIPPED, "must", "1.2", "")], None,
         "inconclusive: no MUST case ran"),
        ([], None, "inconclusive: no MUST case ran"),
    ]
    for runs, conforms, text in cases:
        certification = certify(graded(*runs))
        assert (certification.conforms, certification.text) == (conforms, text), runs


def test_strict_grades_read_as_the_same_certification() -> None:
    """A known deviation reads the same whether the run kept its grade (strict) or not."""
    tolerant = graded((P, "must", "1.2", ""), (F, "must", "1.2", ""), (K, "must", "1.1", "x"),
                      (K, "must", "1.2", "x"), (K, "should", "1.2", "x"))
    strict = graded((P, "must", "1.2", ""), (F, "must", "1.2", ""), (F, "must", "1.1", "x"),
                    (F, "must", "1.2", "x"), (N, "should", "1.2", "x"))
    one, other = certify(tolerant), certify(strict, strict=True)
    assert one.text == other.text == (
        "does not conform: 3 MUST case runs failed, 2 of them known deviations")
    assert (one.strict, other.strict) == (False, True)
    assert one.to_json() | {"strict": True} == other.to_json()
    assert other.to_json() == {"strict": True, "conforms": False, "verdict": other.text,
                               "must_failed": 3, "known_deviations": 2, "should_not_met": 1,
                               "errors": 0}


@pytest.mark.parametrize("strict", [False, True])
def test_every_format_opens_with_the_same_verdict(target: Target, strict: bool) -> None:
    report = report_json(results(), target=target, server=SERVER, duration=1.0,
                         tool_version="0.1.0", strict=strict)
    jsonschema.Draft202012Validator(schema()).validate(report)
    line = ("does not conform: 2 MUST case runs failed, 1 of them a known deviation; "
            "1 case run could not be graded")
    assert list(report)[:2] == ["schema_version", "certification"]
    assert report["certification"] == {
        "strict": strict, "conforms": False, "verdict": line, "must_failed": 2,
        "known_deviations": 1, "should_not_met": 1, "errors": 1}
    assert render_markdown(report).splitlines()[0] == f"**{line}**"
    page = render_html(report)
    body = page[page.index("<body>"):]
    assert body.index(f'<div class="verdict o-failed" id="verdict">{line}</div>') \
        < body.index('<header class="top">')
    # a report saved before the field existed is still a report, and says the same
    del report["certification"]
    jsonschema.Draft202012Validator(schema()).validate(report)
    assert render_markdown(report).splitlines()[0] == f"**{line}**"
    assert f'id="verdict">{line}</div>' in render_html(report)


DIGEST = "sha256:" + "ab" * 32


def selection(selected: int, total: int = 253, *, shipped: bool = True) -> Selection:
    return Selection("0.1.0", DIGEST, shipped, shipped and selected == total, selected, total)


def test_only_the_whole_shipped_catalogue_is_certified() -> None:
    """A selection says what it is in place of a verdict, passing or failing; the whole
    shipped catalogue reads as the runs alone do; the counts behind the line stay."""
    passing = graded((P, "must", "1.2", ""), (P, "must", "1.1", ""))
    failing = graded((P, "must", "1.2", ""), (F, "must", "1.2", ""), (K, "must", "1.1", "x"))
    for runs in (passing, failing):
        picked = certify(runs, catalogue=selection(17))
        assert (picked.conforms, picked.text) == (
            None, "17 of 253 case runs selected: no certification verdict")
        other = certify(runs, client=True, catalogue=selection(2, 2, shipped=False))
        assert (other.conforms, other.text) == (
            None, "2 case runs of cases outside the shipped catalogue: no certification verdict")
        whole = certify(runs, catalogue=selection(253))
        assert (whole.conforms, whole.text) == (certify(runs).conforms, certify(runs).text)
    assert certify(passing, catalogue=selection(253)).text == \
        "conforms to STOMP 1.1 and 1.2: every MUST passed"
    counted = certify(failing, catalogue=selection(17)).to_json()
    assert (counted["must_failed"], counted["known_deviations"]) == (2, 1)
    assert counted["catalogue"] == {"version": "0.1.0", "digest": DIGEST, "shipped": True,
                                    "whole": False, "selected": 17, "total": 253}


@pytest.mark.parametrize("picked", [17, 253])
def test_the_json_report_records_the_catalogue_beside_the_verdict(target: Target,
                                                                  picked: int) -> None:
    """The JSON holds the catalogue's identity; HTML and Markdown show it and the line it
    makes; a report saved before the field existed reads as it always did."""
    given = [r for r in results() if r.outcome != Outcome.FAILED]
    report = report_json(given, target=target, server=SERVER, duration=1.0,
                         tool_version="0.1.0", catalogue=selection(picked))
    jsonschema.Draft202012Validator(schema()).validate(report)
    certification = report["certification"]
    assert certification["catalogue"] == selection(picked).to_json()
    line = "17 of 253 case runs selected: no certification verdict" if picked == 17 else \
        "does not conform: 1 MUST case run failed, a known deviation; 1 case run could not " \
        "be graded"
    assert (certification["verdict"], certification["conforms"]) == (
        line, None if picked == 17 else False)
    shown = "the shipped catalogue of 0.1.0 (sha256:abababababab): " + (
        "17 of 253 case runs selected" if picked == 17 else "all 253 case runs")
    markdown = render_markdown(report)
    assert markdown.splitlines()[0] == f"**{line}**" and f"Catalogue: {shown}\n" in markdown
    page = render_html(report)
    assert f'id="verdict">{line}</div>' in page
    assert f'<dt>catalogue</dt><dd id="catalogue">{shown}</dd>' in page
    # from a saved report: the same line, whatever the saved verdict text says
    saved = json.loads(dumps(report))
    saved["certification"]["verdict"] = "conforms to everything"
    assert render_markdown(saved).splitlines()[0] == f"**{line}**"
    # a report written before the catalogue was recorded: valid, its line from its cases
    del saved["certification"]["catalogue"]
    jsonschema.Draft202012Validator(schema()).validate(saved)
    old = "does not conform: 1 MUST case run failed, a known deviation; 1 case run could " \
          "not be graded"
    assert render_markdown(saved).splitlines()[0] == f"**{old}**"
    assert "Catalogue:" not in render_markdown(saved)
    assert 'id="catalogue"' not in render_html(saved)
    for bad in ({"digest": "md5:00"}, {"selected": -1}, {"whole": "yes"}):
        broken = json.loads(dumps(report))
        broken["certification"]["catalogue"].update(bad)
        assert not jsonschema.Draft202012Validator(schema()).is_valid(broken), bad


# -- as an engine handler ------------------------------------------------------------------

def test_report_writer_writes_every_file_on_run_finished(target: Target,
                                                         tmp_path: Path) -> None:
    writer = ReportWriter(run_id="run1", json_path=tmp_path / "r.json",
                          junit_path=tmp_path / "r.xml", records_dir=tmp_path / "rec",
                          tool_version="9.9", catalogue=selection(17))
    writer(RunStarted(target, total=8))
    assert writer.written == []
    writer(RunFinished(results(), duration=2.0, server=SERVER))
    assert writer.written == [tmp_path / "r.json", tmp_path / "r.xml",
                              tmp_path / "rec" / "results-run1.jsonl"]
    for path in writer.written:
        assert_no_secret(path)
    written = json.loads((tmp_path / "r.json").read_text("utf-8"))
    assert written["tool"]["version"] == "9.9"
    assert written["certification"]["catalogue"] == selection(17).to_json()
    xmlschema.XMLSchema(XSD).validate(str(tmp_path / "r.xml"))


def test_report_writer_writes_the_page_and_summary_without_the_passcode(
        target: Target, tmp_path: Path) -> None:
    writer = ReportWriter(run_id="run2", json_path=tmp_path / "r.json",
                          html_path=tmp_path / "r.html", markdown_path=tmp_path / "r.md")
    writer(RunStarted(target, total=8))
    writer(RunFinished(results(), duration=2.0, server=SERVER))
    assert writer.written == [tmp_path / "r.json", tmp_path / "r.html", tmp_path / "r.md"]
    for path in writer.written:
        assert_no_secret(path)
    page = (tmp_path / "r.html").read_text("utf-8")
    for outcome in Outcome:  # a row of each, and the broker's markup as text
        assert f'data-outcome="{outcome.value}" data-area=' in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    summary = (tmp_path / "r.md").read_text("utf-8")
    assert summary.startswith("**does not conform: 2 MUST case runs failed, 1 of them a known "
                              "deviation; 1 case run could not be graded**\n")
    assert "- STOMP 1.2: MUST 1/4" in summary  # passed of those that ran at 1.2


def test_the_xsd_is_strict_enough_to_matter() -> None:
    junit_xsd = xmlschema.XMLSchema(XSD)
    good = '<testsuites><testsuite name="a" tests="1" failures="0" errors="0">' \
           '<testcase name="t" classname="c"/></testsuite></testsuites>'
    junit_xsd.validate(good)
    for bad in [good.replace(' name="t"', ""),                      # a case without a name
                good.replace('tests="1"', 'tests="-1"'),            # a negative count
                good.replace('"c"/>', '"c"><failure/><error/></testcase>'),  # two outcomes
                good.replace('"c"/>', '"c" time="1e-05"/>'),        # no exponents
                good.replace('"c"/>', '"c" line="3"/>'),            # Jenkins has no line
                good.replace('<testsuite ', '<testsuite disabled="0" '),    # junit-xml's
                good.replace('<testsuites>', '<testsuites disabled="0">'),  # ... disabled
                good.replace('<testsuites>', '<testsuites skipped="0">'),   # not on the root
                good.replace(' failures="0"', "")]:                 # counts Jenkins requires
        assert not junit_xsd.is_valid(bad), bad


def attribute_sets(root: ET.Element) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for element in root.iter():
        found.setdefault(element.tag, set()).update(element.attrib)
    return found


@pytest.mark.slow
def test_junit_of_a_full_run_against_a_faulty_broker_is_what_jenkins_reads(
        tmp_path: Path) -> None:
    """The whole catalogue against a broker with faults (failures, errors from cases that
    cannot go on, unsupported and known-deviation runs from the profile): only the
    attributes junit-10.xsd allows, on every element."""
    profile = Profile("faulty", capabilities={"nack": False}, deviations={
        # everything the faults break in it: its ERROR's ':' written unescaped too
        "escaping.trailing-backslash": Deviation(
            "no ERROR", "the faults", ("value-encoding.undefined-escape-fatal",
                                       "frames.header-grammar"))})

    async def run() -> list[CaseResult]:
        faults = frozenset({"drop-receipts", "no-escaping"})
        async with embedded(BrokerConfig(port=0, faults=faults)) as broker:
            target = Target(parse_broker(f"127.0.0.1:{broker.port}"), profile)
            return await Engine(target, jobs=32, case_timeout=1.5).run(
                load_cases([default_cases()]))

    given = asyncio.run(run())
    outcomes = {r.outcome for r in given}
    assert {Outcome.FAILED, Outcome.ERROR, Outcome.UNSUPPORTED, Outcome.KNOWN_DEVIATION,
            Outcome.PASSED} <= outcomes, outcomes
    path = tmp_path / "junit.xml"
    write_junit(path, broker_report(given, Target(parse_broker("127.0.0.1:61613"), profile)))
    xmlschema.XMLSchema(XSD).validate(str(path))
    root = ET.parse(path).getroot()
    children = {child.tag for case in root.iter("testcase") for child in case}
    assert {"failure", "error", "skipped", "system-out"} <= children
    sets = attribute_sets(root)
    for tag, allowed in ALLOWED.items():
        assert sets[tag] <= set(allowed), (tag, sets[tag] - set(allowed))
    assert sets["testsuites"] == {"name", "time", "tests", "failures", "errors"} - {"name"}
    assert sets["testsuite"] == {"name", "tests", "failures", "errors", "skipped", "time"}
    assert sets["testcase"] == {"name", "classname", "time"}


def test_results_are_not_changed_by_reporting(target: Target, tmp_path: Path) -> None:
    given = results()
    before = [dataclasses.asdict(r) for r in given]
    report_junit(report_json(given, target=target, server=SERVER, duration=0,
                             tool_version="0"))
    write_records(tmp_path, given, target=target, run_id="x", tool_version="0")
    assert [dataclasses.asdict(r) for r in given] == before


def test_the_json_report_written_a_case_at_a_time_is_the_same_document() -> None:
    report = {"schema_version": 1, "summary": {"a": [1, 2]},
              "cases": [{"id": "x", "transcript": [{"data": "\x00é\n"}]}, {"id": "y"}]}
    assert b"".join(chunks(report)) == dumps(report)
    assert b"".join(chunks({**report, "cases": []})) == dumps({**report, "cases": []})
