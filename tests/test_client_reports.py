"""The reports of `stomp-conformance clients`, from real runs through the reference driver
(with a fault, and with a profile declaring what it breaks): JSON, JUnit, HTML and Markdown
written as `run` writes them, each from the one report dict (a saved report renders the
same), speaking of the client; `-` for standard output; the passcode scrubbed; and
`compare` of client reports, a column per library and transport. A hostile library's text
in the page and summary: tests/test_html_report.py."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import xmlschema
from helpers import cli

from conformance.cli.options import default_cases
from conformance.clients import REFERENCE_DRIVER
from conformance.report import render_html, render_markdown, report_junit, schema
from conformance.report.compare import compare, compare_json, compare_markdown
from conformance.report.verdict import certify
from conformance.runner.results import CaseResult, Outcome
from conformance.scenario import load_catalogue

# the client runs the module shares take a while
pytestmark = pytest.mark.slow

XSD = Path(__file__).parent / "data" / "junit.xsd"
FORMATS = {"json": "r.json", "junit": "r.xml", "html": "r.html", "markdown": "r.md"}
#: a library that fails the NUL-body case, and a profile that declares it
FAULTY = f"{REFERENCE_DRIVER} --fault no-content-length"
PROFILE = """\
name: my-library
capabilities:
  versions: ["1.1", "1.2"]
deviations:
  clients.send.nul-body:
    observed: a SEND with a NUL in its body and no content-length
    statement: [content-length.required-with-nul, content-length.should-include]
    reason: the library leaves content-length to the application
"""


def clients(out: Path, *args: str, code: int = 0) -> dict[str, Any]:
    """`clients ARGS` writing every format into `out`; the JSON report."""
    out.mkdir(exist_ok=True)
    paths = [arg for name, file in FORMATS.items() for arg in (f"--{name}", str(out / file))]
    done = cli("clients", *args, *paths)
    assert done.returncode == code, done.stderr
    for file in FORMATS.values():
        assert f"wrote {out / file}" in done.stderr
    report: dict[str, Any] = json.loads((out / "r.json").read_text("utf-8"))
    jsonschema.validate(report, schema())
    return report


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A clean run of the send cases over TCP, the faulty library graded with and without
    its profile, and a run over WebSocket: each folder holds every format."""
    out = tmp_path_factory.mktemp("clients")
    (out / "profile.yaml").write_text(PROFILE)
    clients(out / "clean", "-k", "clients.send")
    clients(out / "faulty", "-k", "clients.send.nul-body", "--driver", FAULTY, code=1)
    clients(out / "declared", "-k", "clients.send.nul-body", "--driver", FAULTY,
            "--profile", str(out / "profile.yaml"))
    clients(out / "ws", "-k", "clients.send", "--transport", "ws")
    return {name: out / name for name in ("clean", "faulty", "declared", "ws")}


def selected(chosen: str, transport: str = "tcp") -> str:
    """The line of a run of the client cases whose id holds `chosen`: a selection of the
    client catalogue, so no verdict."""
    runs = [case.id for case in load_catalogue([default_cases()], client=True).cases
            if transport in case.transports for _ in case.versions]
    return f"{sum(chosen in run for run in runs)} of {len(runs)} case runs selected: " \
        "no certification verdict"


def load(folder: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((folder / "r.json").read_text("utf-8"))
    return report


def test_every_format_speaks_of_the_client(runs: dict[str, Path]) -> None:
    report = load(runs["ws"])
    client = report["client"]
    assert (client["library"], client["transport"], client["profile"]) == (
        "stomp-conformance reference driver", "ws", None)
    line = selected("clients.send", "ws")
    assert report["certification"]["verdict"] == line
    markdown = (runs["ws"] / "r.md").read_text("utf-8")
    title = f"stomp-conformance reference driver {client['version']} over WebSocket (ws)"
    assert markdown.startswith(f"**{line}**\n\n### STOMP client conformance: {title}\n")
    assert f"driver `{client['driver']}` \u00b7 {report['summary']['total']} case runs" \
        in markdown
    page = (runs["ws"] / "r.html").read_text("utf-8")
    assert f"<title>STOMP client conformance: {title}</title>" in page
    assert f'id="verdict">{line}</div>' in page
    assert "<h1>STOMP client conformance report</h1>" in page
    meta = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]*)</dd>",
                           page[page.index('id="subject"'):page.index("</dl>")]))
    assert meta == {
        "client": f"stomp-conformance reference driver {client['version']}",
        "driver": client["driver"], "transport": "WebSocket (ws)", "profile": "(none)",
        "versions": "1.0, 1.1, 1.2",
        "subprotocols": "1.0: offered v10.stomp, accepted v10.stomp; 1.1: offered v11.stomp, "
                        "accepted v11.stomp; 1.2: offered v12.stomp, accepted v12.stomp"}
    xmlschema.XMLSchema(XSD).validate(str(runs["ws"] / "r.xml"))
    root = ET.parse(runs["ws"] / "r.xml").getroot()
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "clients"
    assert {p.get("name"): p.get("value") for p in suite.iter("property")} == meta
    assert root.get("tests") == str(len(report["cases"])) == str(report["summary"]["total"])


def test_a_failing_library_and_its_declared_deviation(runs: dict[str, Path]) -> None:
    faulty, declared = load(runs["faulty"]), load(runs["declared"])
    assert {c["outcome"] for c in faulty["cases"]} == {"failed"}
    line = selected("clients.send.nul-body")
    assert faulty["certification"]["verdict"] == line
    assert faulty["certification"]["must_failed"] == 2
    root = ET.parse(runs["faulty"] / "r.xml").getroot()
    failures = [f.get("message") or "" for f in root.iter("failure")]
    assert len(failures) == 2 and all(
        m.startswith("content-length.required-with-nul: ") for m in failures)
    assert {c["outcome"] for c in declared["cases"]} == {"known-deviation"}
    assert declared["certification"]["verdict"] == line
    assert (declared["certification"]["must_failed"],
            declared["certification"]["known_deviations"]) == (2, 2)
    assert declared["client"]["profile"] == "my-library"
    markdown = (runs["declared"] / "r.md").read_text("utf-8")
    assert markdown.startswith(f"**{line}**\n") and "profile `my-library`" in markdown
    assert "the library leaves content-length to the application" in \
        (runs["declared"] / "r.html").read_text("utf-8")


@pytest.mark.slow
def test_the_whole_client_catalogue_is_certified(tmp_path: Path) -> None:
    """The shipped client catalogue, whole, through the reference driver: a verdict, and
    the catalogue it was given on."""
    report = clients(tmp_path / "whole")
    catalogue = load_catalogue([default_cases()], client=True)
    total = sum(len(case.versions) for case in catalogue.cases if "tcp" in case.transports)
    line = "conforms to STOMP 1.0, 1.1 and 1.2 as a client: every MUST passed"
    assert (report["certification"]["verdict"], report["certification"]["conforms"]) == (
        line, True)
    assert report["certification"]["catalogue"] == {
        "version": "0.1.0", "digest": catalogue.digest, "shipped": True, "whole": True,
        "selected": total, "total": total}
    assert (tmp_path / "whole" / "r.md").read_text("utf-8").startswith(f"**{line}**\n")


def test_a_saved_client_report_renders_the_same(runs: dict[str, Path]) -> None:
    for folder in runs.values():
        report = load(folder)
        assert render_markdown(report) == (folder / "r.md").read_text("utf-8")
        assert report_junit(report) == (folder / "r.xml").read_text("utf-8")
        page = (folder / "r.html").read_text("utf-8")
        made = re.search(r"<dt>report</dt><dd>([^<]+) UTC</dd>", page)
        assert made is not None  # the page's date: the JSON keeps none
        when = datetime.strptime(made.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        assert render_html(report, generated=when) == page


def test_the_passcode_is_in_no_client_report(tmp_path: Path) -> None:
    """The case gives the driver a passcode of the run's own, which every format masks."""
    report = clients(tmp_path, "-k", "connect.not-escaped")
    sent = [r["data"] for c in report["cases"] for r in c["transcript"]
            if "passcode:" in r.get("data", "")]
    assert sent and all("passcode:***" in data for data in sent)
    for file in FORMATS.values():
        assert re.search(r"pw-[0-9a-f]{6}", (tmp_path / file).read_text("utf-8")) is None


def test_one_report_to_standard_output(tmp_path: Path) -> None:
    done = cli("clients", "-k", "send.nul-body", "--markdown", "-",
               "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == render_markdown(json.loads((tmp_path / "r.json").read_text()))
    assert f"wrote {tmp_path / 'r.json'}" in done.stderr and "wrote -" not in done.stderr
    for args, says in [
            (["--json", "-", "--html", "-"], "--json, --html: only one report can go to "
                                             "standard output (-)"),
            (["--selftest", "--html", str(tmp_path / "s.html")],
             "--junit, --html, --markdown: the selftest writes no report"),
            (["--transport", "tcp", "-k", "clients.websocket"],
             "no client case chosen runs over TCP")]:
        done = cli("clients", *args)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith(f"stomp-conformance: {says}"), done.stderr
        assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "s.html").exists()


# -- compare -------------------------------------------------------------------------------

def test_compare_names_a_client_column_for_its_profile_and_transport(
        runs: dict[str, Path], tmp_path: Path) -> None:
    sources = [str(runs[name] / "r.json") for name in ("clean", "ws", "declared")]
    done = cli("compare", *sources, "--json", str(tmp_path / "c.json"),
               "--markdown", str(tmp_path / "c.md"), "--html", str(tmp_path / "c.html"),
               "--not-run", "other-lib=not installed")
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "c.json").read_text("utf-8"))
    assert "brokers" not in data and data["not_run"] == {"other-lib": "not installed"}
    columns = data["clients"]
    # the reference driver has no profile: its library names it, over each transport
    assert [(c["name"], c["profile"], c["transport"]) for c in columns] == [
        ("stomp-conformance reference driver (tcp)", None, "tcp"),
        ("stomp-conformance reference driver (ws)", None, "ws"),
        ("my-library", "my-library", "tcp")]
    for column, source in zip(columns, sources, strict=True):
        report = json.loads(Path(source).read_text("utf-8"))
        assert column["outcomes"] == {f"{c['id']}@{c['version']}": c["outcome"]
                                      for c in report["cases"]}
        assert (column["library"], column["version"], column["driver"]) == (
            report["client"]["library"], report["client"]["version"],
            report["client"]["driver"])
    markdown = (tmp_path / "c.md").read_text("utf-8")
    assert markdown.startswith("### STOMP client conformance: 3 client libraries compared\n")
    assert "| `clients.send.nul-body [1.2]` | \u2705 | \u2705 | \U0001f536 |" in markdown
    assert "| `clients.send.receipt [1.0]` | \u2705 | \u2705 | \u2014 |" in markdown
    page = (tmp_path / "c.html").read_text("utf-8")
    assert "<h2>Client libraries</h2>" in page and "<td class=\"mono\">my-library</td>" in page
    # one library over two transports with one profile: the transport tells them apart
    tcp, ws = load(runs["clean"]), load(runs["ws"])
    for report in (tcp, ws):
        report["client"]["profile"] = "client-x"
    names = [c["name"] for c in compare_json(compare([tcp, ws], ["a", "b"]))["clients"]]
    assert names == ["client-x (tcp)", "client-x (ws)"]
    # reports/refresh names each column for its library, version, language and transport
    given = {"a": "x 1.0 (Python, tcp)", "b": "x 1.0 (Python, ws)"}
    named = compare_json(compare([tcp, ws], ["a", "b"], names=given))["clients"]
    assert [c["name"] for c in named] == ["x 1.0 (Python, tcp)", "x 1.0 (Python, ws)"]
    with pytest.raises(ValueError, match="no report compared"):
        compare([tcp], ["a"], names={"c": "x"})


def test_compare_refuses_brokers_and_clients_together(runs: dict[str, Path],
                                                      tmp_path: Path) -> None:
    done = cli("run", "--cases", str(Path(__file__).parents[1] / "cases" / "escaping"),
               "--json", str(tmp_path / "broker.json"))
    assert done.returncode == 0, done.stderr
    client = str(runs["clean"] / "r.json")
    done = cli("compare", str(tmp_path / "broker.json"), client)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"stomp-conformance: {client} is a client library's report and "
                           f"{tmp_path / 'broker.json'} a broker's: compare brokers with "
                           "brokers and clients with clients\n")
    with pytest.raises(ValueError, match="compare brokers with brokers"):
        compare_markdown(compare([load(runs["clean"]), json.loads(
            (tmp_path / "broker.json").read_text())], ["a", "b"]))


def test_the_client_verdict_lines() -> None:
    def runs(*outcomes: Outcome) -> list[CaseResult]:
        return [CaseResult(id=f"c.{i}", title="t", version="1.2", outcome=o, level="must",
                           statements=(), versions=("1.2",), area="clients", file="f",
                           line=1) for i, o in enumerate(outcomes)]

    for given, line in [
            (runs(Outcome.PASSED), "conforms to STOMP 1.2 as a client: every MUST passed"),
            (runs(Outcome.PASSED, Outcome.FAILED),
             "does not conform as a client: 1 MUST case run failed"),
            (runs(Outcome.ERROR), "inconclusive as a client: 1 case run could not be graded"),
            (runs(Outcome.SKIPPED), "inconclusive as a client: no MUST case ran")]:
        assert certify(given, client=True).text == line
        assert " as a client" not in certify(given).text
