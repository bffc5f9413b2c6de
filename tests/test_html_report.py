"""The HTML report, the Markdown summary and the `compare` matrix, from real runs: a hostile
peer whose server header and ERROR carry script, a hostile client library whose name,
version, decoded headers and errors do, and the reference broker with and without faults.
The page is checked as text and in a real headless Chromium: broker (and library) text
never runs and shows as text, the page fetches nothing, its Content-Security-Policy stops
script that got past escaping, the filters work, and the page renders."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shlex
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from helpers import cli
from markupsafe import escape
from peers import serving
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

from conformance.codec import Frame, Parser, encode
from conformance.report.compare import compare, compare_html, compare_markdown
from conformance.report.markdown import COMMENT_LIMIT, MESSAGE, ROWS, render_markdown, size
from conformance.report.rendering import pieces
from conformance.scenario import load_cases

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
#: Each piece would run script (setting window.__pwned, or an alert) were it markup.
PAYLOAD = ("<script>window.__pwned='script'</script>"
           "<img src=x onerror=\"window.__pwned='img'\">"
           "</textarea></title></style><svg onload=\"alert('svg')\"></svg>"
           "<a href=\"javascript:window.__pwned='link'\">x</a>")
SERVER = "evil/6.6 <script>window.__pwned='server'</script><b>bold</b>"
#: Markdown a broker could use to break out of a table cell.
NOTE = "a|b `tick`\nsecond line"
CASES = r"""
- id: hostile.receipt
  title: A SEND gets its RECEIPT
  statements: [receipt.receipt-id-required]
  versions: ["1.2"]
  steps:
    - connect: {}
    - send: {command: SEND, headers: {destination: "${queue}", receipt: r1}, body: hi}
    - expect: {command: RECEIPT, headers: {receipt-id: r1}, within: 5}
- id: hostile.bad-escape
  title: An undefined escape gets ERROR then close
  statements: [value-encoding.undefined-escape-fatal]
  versions: ["1.2"]
  steps:
    - connect: {}
    - raw: {data: "SEND\ndestination:${queue}\nk:\\t\n\n\0"}
    - expect_error_close: {within: 2}
"""
#: The line of the hostile run: its cases are not the shipped catalogue's.
HOSTILE_LINE = "2 case runs of cases outside the shipped catalogue: no certification verdict"
#: Catalogue folders and faults that give a quick run with several outcomes in each area.
FOLDERS = ("escaping", "headers", "errors-and-lifecycle")
FAULTS = ("no-escaping", "error-without-message")
ROOT = Path(__file__).resolve().parents[1]


async def hostile(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNECTED with script in its server header, then any frame gets an ERROR whose
    message header, another header and body hold script, then close."""
    parser = Parser(version="1.2", strict=False)
    try:
        while data := await reader.read(65536):
            for frame in parser.feed(data):
                if not isinstance(frame, Frame):
                    continue
                if frame.command == "CONNECT":
                    writer.write(encode(Frame("CONNECTED", {"version": "1.2",
                                                            "server": SERVER})))
                    continue
                writer.write(encode(Frame("ERROR", [
                    ("message", f"{NOTE} {PAYLOAD}"), ("x-evil", PAYLOAD),
                    ("content-type", "text/html")], PAYLOAD.encode()), version="1.2"))
                await writer.drain()
                writer.close()
                return
            await writer.drain()
    except (ConnectionError, OSError):
        pass


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run against the hostile peer, with every report; one case fails, one passes."""
    out = tmp_path_factory.mktemp("hostile")
    (out / "cases.yaml").write_text(CASES)
    with serving(hostile) as port:
        done = cli("run", "--broker", f"127.0.0.1:{port}", "--cases", str(out / "cases.yaml"),
                   "--json", str(out / "r.json"), "--html", str(out / "r.html"),
                   "--markdown", str(out / "r.md"))
    assert done.returncode == 1, done.stderr
    for name in ("r.json", "r.html", "r.md"):
        assert f"wrote {out / name}" in done.stderr
    return out


#: A client library's driver (cases/clients/README.md) whose library is hostile: its name,
#: its version and its standard error carry script; it connects over a bare socket with a
#: CONNECT holding a script header, and reports CONNECTED's version as sent at 1.1 but as
#: script (beside a header holding Markdown) at 1.2, failing that case run.
HOSTILE_DRIVER = r"""
import json, socket, sys

payload, server, version, note = json.loads(sys.argv[1])
def say(**event):
    print(json.dumps(event), flush=True)
say(event="ready", library=server, version=version)
print(payload, file=sys.stderr, flush=True)
for line in sys.stdin:
    command = json.loads(line)
    if command["op"] != "connect":
        break
    host, port = command["url"].removeprefix("tcp://").rsplit(":", 1)
    peer = socket.create_connection((host, int(port)))
    peer.sendall(f"CONNECT\naccept-version:{command['version']}\nhost:{command['host']}\n"
                 f"x-evil:{payload}\n\n\0".encode())
    data = b""
    while b"\0" not in data:
        data += peer.recv(4096)
    version = command["version"] if command["version"] == "1.1" else payload
    say(event="connected", headers=[["version", version], ["x-note", note]])
    say(event="done", op="connect")
"""
CLIENT_CASE = "clients.connect.required-headers"
#: the library's version (a report keeps 100 characters of it)
VERSION = "6.6<img src=x onerror=\"window.__pwned='version'\">"


def client_line() -> str:
    """The line of the hostile client's run: CLIENT_CASE of the client catalogue."""
    runs = [case.id for case in load_cases([ROOT / "cases"], client=True)
            if "tcp" in case.transports for _ in case.versions]
    return f"{runs.count(CLIENT_CASE)} of {len(runs)} case runs selected: " \
        "no certification verdict"


@pytest.fixture(scope="module")
def hostile_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client cases' CLIENT_CASE through the hostile driver, with every report; at 1.1
    it passes, at 1.2 it fails."""
    out = tmp_path_factory.mktemp("hostile-client")
    (out / "driver.py").write_text(HOSTILE_DRIVER)
    driver = shlex.join([sys.executable, str(out / "driver.py"),
                         json.dumps([PAYLOAD, SERVER, VERSION, NOTE])])
    done = cli("clients", "--driver", driver, "-k", CLIENT_CASE, "--json", str(out / "r.json"),
               "--html", str(out / "r.html"), "--markdown", str(out / "r.md"),
               "--junit", str(out / "r.xml"))
    assert done.returncode == 1, done.stderr
    report = load(out / "r.json")
    assert report["client"]["library"] == SERVER and report["client"]["version"] == VERSION
    assert [(c["version"], c["outcome"]) for c in report["cases"]] == [
        ("1.1", "passed"), ("1.2", "failed")]
    return out


def run_reference(out: Path, name: str, *faults: str) -> Path:
    """The FOLDERS cases against the reference broker (with `faults`, in a process of its
    own, since only `broker` turns them on); the JSON report's path."""
    folders = [arg for f in FOLDERS for arg in ("--cases", str(ROOT / "cases" / f))]
    report = out / f"{name}.json"
    if not faults:
        done = cli("run", *folders, "--json", str(report), "--html", str(out / f"{name}.html"))
        assert done.returncode == 0, done.stderr
        return report
    broker = subprocess.Popen(
        [sys.executable, "-m", "conformance", "broker", "--port", "0",
         *(arg for f in faults for arg in ("--fault", f))], stderr=subprocess.PIPE, text=True)
    try:
        assert broker.stderr is not None
        line = broker.stderr.readline()
        assert "listening on 127.0.0.1:" in line, line
        port = line.split("127.0.0.1:")[1].split()[0]
        done = cli("run", "--broker", f"127.0.0.1:{port}", *folders, "--json", str(report),
                   "--html", str(out / f"{name}.html"))
        assert done.returncode == 1, done.stderr
    finally:
        broker.terminate()
        broker.wait(10)
    return report


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("reference")
    return run_reference(out, "clean"), run_reference(out, "faulty", *FAULTS)


def load(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return report


# -- transcripts ---------------------------------------------------------------------------

def test_pieces_mark_nul_eol_and_hidden_octets_and_keep_escapes() -> None:
    assert pieces(b"SEND\nk:a\\cb\\n\r\n\n\x00") == [
        ("SEND", False), ("\u21b5", True), ("\nk:a\\cb\\n", False), ("^M", True),
        ("\u21b5", True), ("\n", False), ("\u21b5", True), ("\n", False), ("^@", True)]
    # a trailing LF gets no line break after its mark; bad UTF-8 and controls are octets
    assert pieces(b"\xff\x1b\xc3\xa9\n") == [
        ("\\xff", True), ("\\x1b", True), ("\u00e9", False), ("\u21b5", True)]
    assert pieces(b"") == []


def test_transcript_shows_nul_eol_and_escapes_as_sent(hostile_run: Path) -> None:
    page = (hostile_run / "r.html").read_text("utf-8")
    lf = '<span class="m" title="LF (octet 10)">\u21b5</span>'
    nul = '<span class="m" title="NUL (octet 0)">^@</span>'
    assert f"CONNECT{lf}\naccept-version:1.2{lf}" in page
    assert f"k:\\t{lf}\n{lf}\n{nul}" in page  # the undefined escape, as the case sent it
    # the ERROR's header escapes (1.2: a LF in a value is \n) are shown as the broker sent them
    assert "a|b `tick`\\nsecond line" in page


# -- HTML: broker text is text -------------------------------------------------------------

def test_hostile_broker_text_is_escaped(hostile_run: Path) -> None:
    page = (hostile_run / "r.html").read_text("utf-8")
    for tag in ("<img", "<svg", "<a ", "<b>", "</textarea>", "</title>", "</style>"):
        assert page.count(tag) == (1 if tag == "</title>" or tag == "</style>" else 0), tag
    assert page.count("<script") == 1  # the page's own filter script
    assert escape(PAYLOAD) in page and escape(SERVER) in page
    report = load(hostile_run / "r.json")
    assert report["broker"]["server"] == SERVER
    failed = next(c for c in report["cases"] if c["outcome"] == "failed")
    assert PAYLOAD in failed["observed"]  # the JSON holds it; the page escaped it


def test_page_is_self_contained(hostile_run: Path) -> None:
    """No URL the page could fetch, and a policy that forbids fetching anything."""
    page = (hostile_run / "r.html").read_text("utf-8")
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert policy is not None and policy.start() < page.index("<title>")
    assert policy.group(1).startswith("default-src 'none';")
    assert "'unsafe-inline'" not in policy.group(1).split("script-src")[1]
    assert re.search(r"""(src|href|url)\s*[=(]\s*["']?[a-z]+:""", page, re.I) is None
    assert "@import" not in page and "<link" not in page


def test_summary_and_area_bars_match_the_json(runs: tuple[Path, Path]) -> None:
    for path in runs:
        report = load(path)
        page = path.with_suffix(".html").read_text("utf-8")
        for version, levels in report["summary"]["versions"].items():
            ran = [f"{level.upper()} {levels[level]['passed']}/{levels[level]['total']}"
                   for level in ("must", "should", "may") if levels.get(level, {}).get("total")]
            assert f"<li>STOMP {version}: {', '.join(ran)}</li>" in page
        counts = Counts()
        counts.feed(page)
        assert counts.badges == report["summary"]["outcomes"]
        by_area = Counter((c["area"], c["outcome"]) for c in report["cases"])
        assert counts.bars == {(area, o): n for (area, o), n in by_area.items()}
        assert {area for area, _ in counts.bars} == set(FOLDERS)
    faulty = load(runs[1])["summary"]["outcomes"]
    assert faulty["passed"] and faulty["failed"] and faulty["non-strict"]


def test_every_format_opens_with_the_certification_verdict(hostile_run: Path,
                                                           runs: tuple[Path, Path]) -> None:
    """Each run here is part of the shipped catalogue, or other cases: the line says so in
    place of a verdict, in every format, and the counts behind it stay."""
    certification = load(hostile_run / "r.json")["certification"]
    line = certification["verdict"]
    assert line == HOSTILE_LINE and certification["must_failed"] == 1
    assert (hostile_run / "r.md").read_text("utf-8").startswith(f"**{line}**\n")
    assert f'<div class="verdict o-error" id="verdict">{line}</div>' in \
        (hostile_run / "r.html").read_text("utf-8")
    clean, faulty = (load(path)["certification"] for path in runs)
    selected = sum(len(c.versions) for c in load_cases([ROOT / "cases" / f for f in FOLDERS]))
    total = sum(len(c.versions) for c in load_cases([ROOT / "cases"]) if "tcp" in c.transports)
    line = f"{selected} of {total} case runs selected: no certification verdict"
    assert (clean["conforms"], clean["verdict"], clean["must_failed"]) == (None, line, 0)
    assert (faulty["conforms"], faulty["verdict"]) == (None, line)
    assert faulty["must_failed"] > 0
    for path, certification in zip(runs, (clean, faulty), strict=True):
        page = path.with_suffix(".html").read_text("utf-8")
        assert f'id="verdict">{certification["verdict"]}</div>' in page
        assert f"of 0.1.0 ({certification['catalogue']['digest'][:19]}): {selected} of " \
            f"{total} case runs selected</dd>" in page


class Counts(HTMLParser):
    """The data-count of each outcome badge and of each segment of each area's bar."""

    def __init__(self) -> None:
        super().__init__()
        self.area: str | None = None
        self.badges: dict[str, int] = {}
        self.bars: dict[tuple[str, str], int] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        classes = found.get("class", "").split()
        if "bar" in classes:
            self.area = found["data-area"]
        elif "seg" in classes and self.area is not None:
            self.bars[self.area, found["data-outcome"]] = int(found["data-count"])
        elif "badge" in classes and "data-count" in found:
            self.badges[found["data-outcome"]] = int(found["data-count"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            self.area = None


# -- HTML in a browser ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:  # fail, never skip: `.ci/install test` installs both
        pytest.fail(f"{' and '.join(missing)} missing: run `bash .ci/install test` (it "
                    "installs Debian's chromium and chromium-driver)")
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000"):
        options.add_argument(arg)
    # every request the page makes, and the console (where CSP reports what it blocked)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    # The driver is named, so Selenium Manager never tries to download one.
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver: WebDriver, page: Path) -> tuple[list[str], list[str], list[str]]:
    """Load `page` afresh: the URLs it requested, those CSP blocked, and console messages."""
    driver.get("about:blank")
    logs(driver, "performance")
    logs(driver, "browser")
    driver.get(page.as_uri())
    requested, blocked = [], []
    for entry in logs(driver, "performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requested.append(message["params"]["request"]["url"])
        elif message["method"] == "Network.loadingFailed":
            blocked.append(message["params"].get("blockedReason") or "")
    return requested, blocked, [e["message"] for e in logs(driver, "browser")]


def logs(driver: WebDriver, kind: str) -> list[dict[str, Any]]:
    """The `kind` log's entries since the last read (Selenium leaves get_log untyped)."""
    entries: list[dict[str, Any]] = driver.get_log(kind)  # type: ignore[no-untyped-call]
    return entries


def assert_no_script_ran(driver: WebDriver) -> None:
    assert driver.execute_script("return typeof window.__pwned") == "undefined"
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018 (reading it is what raises)


def shown(driver: WebDriver) -> dict[str, bool]:
    """Each case row (`id [outcome]`) and whether it is displayed."""
    return {f"{row.get_attribute('data-id')} [{row.get_attribute('data-outcome')}]":
            row.is_displayed() for row in driver.find_elements(By.CSS_SELECTOR, "tr[data-row]")}


def test_hostile_page_runs_no_broker_script_and_filters_work(
        browser: WebDriver, hostile_run: Path, tmp_path: Path) -> None:
    page = hostile_run / "r.html"
    requested, blocked, console = open_page(browser, page)
    assert requested == [page.as_uri()] and blocked == []  # nothing fetched, nothing refused
    assert console == []  # the page's own script and styles are within its policy
    assert_no_script_ran(browser)
    assert browser.title.startswith("STOMP conformance")
    for tag in ("img", "svg", "a", "b", "textarea"):
        assert browser.find_elements(By.TAG_NAME, tag) == [], tag
    assert len(browser.find_elements(By.TAG_NAME, "script")) == 1
    # the broker's text is there, as text a person can read
    body = browser.find_element(By.TAG_NAME, "body").get_attribute("textContent") or ""
    assert PAYLOAD in body
    assert SERVER in browser.find_element(By.CSS_SELECTOR, "header.top").text
    verdict = browser.find_element(By.ID, "verdict")  # the page opens with it
    assert verdict.text == HOSTILE_LINE
    assert verdict.location["y"] < browser.find_element(By.CSS_SELECTOR,
                                                        "header.top").location["y"]

    both = {"hostile.receipt [failed]": True, "hostile.bad-escape [passed]": True}
    assert shown(browser) == both
    failed = browser.find_element(By.CSS_SELECTOR, "input[data-filter=outcome][value=failed]")
    failed.click()
    assert shown(browser) == {**both, "hostile.receipt [failed]": False}
    assert browser.find_element(By.ID, "shown").text == "1"
    failed.click()
    assert shown(browser) == both
    browser.find_element(By.CSS_SELECTOR, "button[data-group=outcome][data-set=failing]").click()
    assert shown(browser) == {**both, "hostile.bad-escape [passed]": False}
    browser.find_element(By.CSS_SELECTOR, "button[data-group=outcome][data-set=all]").click()
    browser.find_element(By.CSS_SELECTOR, "button[data-group=area][data-set=none]").click()
    assert shown(browser) == dict.fromkeys(both, False)
    assert browser.find_element(By.ID, "shown").text == "0"
    browser.find_element(By.CSS_SELECTOR, "input[data-filter=area][value=hostile]").click()
    assert shown(browser) == both
    search = browser.find_element(By.ID, "filter-id")
    search.send_keys("bad-esc")
    assert shown(browser) == {**both, "hostile.receipt [failed]": False}
    search.clear()
    search.send_keys(" ")  # an input event with an empty filter shows every row again
    assert shown(browser) == both

    row = browser.find_element(By.CSS_SELECTOR, "tr[data-id='hostile.receipt']")
    row.find_element(By.TAG_NAME, "summary").click()  # the ERROR, as received
    assert PAYLOAD in row.find_element(By.CSS_SELECTOR, ".transcript").text
    row = browser.find_element(By.CSS_SELECTOR, "tr[data-id='hostile.bad-escape']")
    row.find_element(By.TAG_NAME, "summary").click()
    transcript = row.find_element(By.CSS_SELECTOR, ".transcript")
    assert transcript.is_displayed()
    assert "CONNECT\u21b5\naccept-version:1.2\u21b5" in transcript.text
    assert "k:\\t\u21b5" in transcript.text and "^@" in transcript.text
    assert_no_script_ran(browser)

    browser.execute_script("window.scrollTo(0, 0)")
    screenshot = tmp_path / "hostile-report.png"
    assert browser.save_screenshot(str(screenshot))
    print(f"screenshot: {screenshot}")
    check_rendered(browser, screenshot, "2da44e", "cf222e")  # the bars: passed, failed


def test_hostile_client_page_shows_the_library_text_as_text(
        browser: WebDriver, hostile_client: Path, tmp_path: Path) -> None:
    page = hostile_client / "r.html"
    text = page.read_text("utf-8")
    for tag in ("<img", "<svg", "<a ", "<b>", "</textarea>"):
        assert tag not in text, tag
    assert text.count("<script") == 1
    assert escape(PAYLOAD) in text and escape(SERVER) in text and escape(VERSION) in text
    requested, blocked, console = open_page(browser, page)
    assert requested == [page.as_uri()] and blocked == [] and console == []
    assert_no_script_ran(browser)
    assert browser.title == f"STOMP client conformance: {SERVER} {VERSION} over TCP (tcp)"
    for tag in ("img", "svg", "a", "b", "textarea"):
        assert browser.find_elements(By.TAG_NAME, tag) == [], tag
    # the meta block: the library and its version, the driver command (holding the
    # payload, shell-quoted, as its argument), the transport, the profile
    subject = browser.find_element(By.ID, "subject").text
    assert f"client\n{SERVER} {VERSION}\n" in subject and "transport\nTCP (tcp)" in subject
    assert "profile\n(none)" in subject and "<svg onload=" in subject
    verdict = browser.find_element(By.ID, "verdict")
    assert verdict.text == client_line()
    both = {f"{CLIENT_CASE} [passed]": True, f"{CLIENT_CASE} [failed]": True}
    assert shown(browser) == both
    browser.find_element(By.CSS_SELECTOR, "input[data-filter=outcome][value=failed]").click()
    assert shown(browser) == {**both, f"{CLIENT_CASE} [failed]": False}
    browser.find_element(By.CSS_SELECTOR, "button[data-group=outcome][data-set=all]").click()
    row = browser.find_element(By.CSS_SELECTOR, "tr.o-failed")
    # the headers the library decoded, as the case's message quotes them
    assert "<svg onload=" in row.find_element(By.CSS_SELECTOR, ".eo").text
    row.find_element(By.TAG_NAME, "summary").click()
    transcript = row.find_element(By.CSS_SELECTOR, ".transcript").text
    assert f"x-evil:{PAYLOAD}\u21b5" in transcript  # the client's CONNECT, as sent
    assert_no_script_ran(browser)
    browser.execute_script("window.scrollTo(0, 0)")
    # the long driver command wraps beside the run's block, which keeps its width
    run_block = browser.find_element(By.CSS_SELECTOR, "header.top > dl.meta")
    assert run_block.size["width"] > 200 and run_block.size["height"] < 150
    screenshot = tmp_path / "hostile-client.png"
    assert browser.save_screenshot(str(screenshot))
    print(f"screenshot: {screenshot}")
    check_rendered(browser, screenshot, "2da44e", "cf222e")  # the bar: passed, failed


def test_policy_stops_script_and_fetches_that_get_past_escaping(
        browser: WebDriver, hostile_run: Path, tmp_path: Path) -> None:
    """The second wall: markup put into a rendered page (as an escaping bug would) neither
    runs nor fetches, while the page's own script still does."""
    page = tmp_path / "injected.html"
    page.write_text((hostile_run / "r.html").read_text("utf-8").replace(
        "</main>", "<script>window.__pwned='inline'</script>"
                   "<img src=\"http://127.0.0.1:9/x.png\" onerror=\"window.__pwned='img'\">"
                   "</main>"), "utf-8")
    requested, blocked, console = open_page(browser, page)
    assert_no_script_ran(browser)
    assert requested == [page.as_uri(), "http://127.0.0.1:9/x.png"] and blocked == ["csp"]
    assert all("Content Security Policy" in m for m in console)  # and what it blocked:
    assert any("Executing inline script" in m for m in console)
    assert any("Loading the image 'http://127.0.0.1:9/x.png'" in m for m in console)
    browser.find_element(By.CSS_SELECTOR, "input[data-filter=outcome][value=failed]").click()
    assert browser.find_element(By.ID, "shown").text == "1"  # the filter script ran


def test_compare_page_filters_rows_that_differ(browser: WebDriver, runs: tuple[Path, Path],
                                               tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    done = cli("compare", *map(str, runs), "--html", str(page))
    assert done.returncode == 0, done.stderr
    requested, _, console = open_page(browser, page)
    assert requested == [page.as_uri()] and console == []
    rows = browser.find_elements(By.CSS_SELECTOR, "tr[data-row]")
    differing = [r for r in rows if r.get_attribute("data-differs") == "yes"]
    assert 0 < len(differing) < len(rows)
    browser.find_element(By.ID, "only-differ").click()
    assert [r for r in rows if r.is_displayed()] == differing
    assert browser.find_element(By.ID, "shown").text == str(len(differing))
    browser.find_element(By.CSS_SELECTOR, "button[data-group=outcome][data-set=failing]").click()
    still = [r for r in rows if r.is_displayed()]
    assert 0 < len(still) <= len(differing)
    assert all(set((r.get_attribute("data-outcome") or "").split()) - {"passed"} for r in still)
    screenshot = tmp_path / "compare.png"
    assert browser.save_screenshot(str(screenshot))
    print(f"screenshot: {screenshot}")
    check_rendered(browser, screenshot, "dafbe1", "ffebe9")  # badges: passed, failed


def test_committed_client_comparison_page_loads_and_filters(browser: WebDriver) -> None:
    page = ROOT / "reports" / "clients-comparison.html"
    data = load(page.with_suffix(".json"))
    requested, blocked, console = open_page(browser, page)
    assert requested == [page.as_uri()] and blocked == [] and console == []
    assert browser.title.startswith("STOMP client conformance: ")
    heads = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#matrix th.broker")]
    assert heads == [c["name"] for c in data["clients"]]
    rows = browser.find_elements(By.CSS_SELECTOR, "tr[data-row]")
    browser.find_element(By.ID, "filter-id").send_keys("clients.websocket")
    ws_only = [r for r in rows if r.is_displayed()]
    assert ws_only and len(ws_only) < len(rows)
    for row in ws_only:  # no TCP column has a case run over WebSocket only
        cells = row.find_elements(By.CSS_SELECTOR, "td.cell")
        assert [c.get_attribute("class") == "cell missing" for c in cells] == [
            column["transport"] == "tcp" for column in data["clients"]]


#: Decodes a PNG in the browser (a page of its own, with no policy) and counts the colours
#: of every seventh pixel.
COLOURS = """
var done = arguments[arguments.length - 1], image = new Image();
image.onload = function () {
  var canvas = document.createElement("canvas");
  canvas.width = image.width; canvas.height = image.height;
  var context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  var data = context.getImageData(0, 0, image.width, image.height).data, seen = {};
  for (var i = 0; i < data.length; i += 4 * 7) {
    var rgb = ((1 << 24) | (data[i] << 16) | (data[i + 1] << 8) | data[i + 2]).toString(16);
    seen[rgb.slice(1)] = (seen[rgb.slice(1)] || 0) + 1;
  }
  done([image.width, image.height, seen]);
};
image.onerror = function () { done(null); };
image.src = "data:image/png;base64," + arguments[0];
"""


def history_data() -> dict[str, Any]:
    """A report-data.json as `pipeline` writes it, every string of it hostile: two brokers'
    trends (one failing run), a regression, a flaky case and a fuzz bucket."""
    def point(run: str, rate: float | None, failed: int) -> dict[str, Any]:
        return {"run_id": run, "timestamp": "2026-11-20T10:00:00.000Z", "build": PAYLOAD,
                "broker_version": None, "executions": 10, "passed": 10 - failed,
                "failed": failed, "error": 0, "pass_rate": rate, "must_failing": failed,
                "statements_failing": failed}
    return {
        "schema_version": 1, "generated": "2026-11-22T10:00:00.000Z",
        "inputs": {"case_records": 40, "finding_records": 3, "bad_records_skipped": 0},
        "trend": {"reference": [point("r0", None, 0),  # no case decided: no dot
                                point("r1", 1.0, 0), point("r2", 0.8, 2), point("r3", 1.0, 0)],
                  PAYLOAD: [point("e1", 0.5, 5)]},
        "regressions": [{"broker": PAYLOAD, "run_id": "e1", "timestamp": "2026-11-20T10:00:00Z",
                         "previous_run_id": "e0", "statement": PAYLOAD, "cases": 1,
                         "case_ids": [PAYLOAD]}],
        "flaky": [{"broker": "reference", "build": PAYLOAD, "case_id": PAYLOAD, "version": "1.2",
                   "executions": 3, "outcomes": ["failed", "passed"], "flake_rate": 0.333333,
                   "statements": [PAYLOAD], "first_seen": "2026-11-20T10:00:00Z",
                   "last_seen": "2026-11-20T11:00:00Z", "passed": 2, "failed": 1,
                   "error": 0}],
        "buckets": [{"bucket_id": "b1", "classification": PAYLOAD, "statement": None,
                     "shape": PAYLOAD, "findings": 3, "hits": 9, "brokers": [PAYLOAD],
                     "seeds": 2, "first_seen": "2026-11-20T10:00:00Z",
                     "last_seen": "2026-11-20T10:01:00Z", "example_finding": "f1",
                     "example_replay": f"stomp-conformance replay {PAYLOAD}",
                     "smallest_input_octets": 25}],
    }


def test_history_sections_show_pipeline_data_as_text(browser: WebDriver,
                                                     tmp_path: Path) -> None:
    data = tmp_path / "report-data.json"
    data.write_text(json.dumps(history_data()))
    page = tmp_path / "r.html"
    done = cli("run", "--cases", str(ROOT / "cases" / "escaping"), "--html", str(page),
               "--history", str(tmp_path))  # the pipeline's output folder
    assert done.returncode == 0, done.stderr
    requested, blocked, console = open_page(browser, page)
    assert requested == [page.as_uri()] and blocked == [] and console == []
    assert_no_script_ran(browser)
    trends = browser.find_elements(By.CSS_SELECTOR, "#trend .trend")
    assert [(t.get_attribute("data-broker"), t.get_attribute("data-runs")) for t in trends] \
        == [(PAYLOAD, "1"), ("reference", "4")]  # by name; the payload an attribute value
    # one chart per broker and nothing the payload's <svg> or <img> would have made
    assert len(browser.find_elements(By.TAG_NAME, "svg")) == 2
    assert browser.find_elements(By.TAG_NAME, "img") == []
    dots = trends[1].find_elements(By.TAG_NAME, "circle")
    assert [d.get_attribute("class") for d in dots] == ["clean", "failing", "clean"]
    assert float(dots[1].get_attribute("cy") or 0) > float(dots[0].get_attribute("cy") or 0)
    assert "80.0% passed, 2 failed" in (dots[1].get_attribute("textContent") or "")
    assert "latest 100.0% (+0.0 points since the first)" in trends[1].text
    assert trends[1].find_elements(By.CSS_SELECTOR, "tbody tr")[-1].text.startswith("r0 ")
    assert " - 0 0" in trends[1].find_elements(By.CSS_SELECTOR, "tbody tr")[-1].text
    for section in ("regressions", "flaky", "buckets"):
        rows = browser.find_elements(By.CSS_SELECTOR, f"#{section} tbody tr")
        assert len(rows) == 1, section
        assert PAYLOAD in (rows[0].get_attribute("textContent") or ""), section
    assert "33%" in browser.find_element(By.ID, "flaky").text
    # the case filters still work beside the history tables
    before = browser.find_element(By.ID, "shown").text
    browser.find_element(By.CSS_SELECTOR, "button[data-group=area][data-set=none]").click()
    assert browser.find_element(By.ID, "shown").text == "0" != before
    assert_no_script_ran(browser)
    screenshot = tmp_path / "history.png"
    browser.find_element(By.ID, "trend").screenshot(str(screenshot))
    print(f"screenshot: {screenshot}")


def test_history_is_checked_before_the_run(tmp_path: Path) -> None:
    wrong = tmp_path / "report-data.json"
    wrong.write_text(json.dumps({**history_data(), "flaky": [{"broker": "x"}]}))
    page = tmp_path / "r.html"
    for args, says in (
            (["--html", str(page), "--history", str(wrong)],
             f"--history: {wrong} is not the report-data.json of `stomp-conformance pipeline`: "
             "flaky/0: 'build' is a required property"),
            (["--html", str(page), "--history", str(tmp_path / "none")],
             f"--history: cannot read {tmp_path / 'none'}: No such file or directory"),
            (["--history", str(wrong)], "--history adds sections to the HTML report")):
        done = cli("run", "--cases", str(ROOT / "cases" / "escaping"), *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"stomp-conformance: {says}"), done.stderr
        assert len(done.stderr.splitlines()) == 1 and not page.exists()


def check_rendered(driver: WebDriver, png: Path, *colours_shown: str) -> None:
    """The screenshot is a real page: a sizeable image of many colours, with no colour
    covering most of it, showing `colours_shown` (hex RGB, from the stylesheet)."""
    data = png.read_bytes()
    assert len(data) > 20_000
    driver.get("about:blank")
    decoded = driver.execute_async_script(COLOURS, base64.b64encode(data).decode())
    assert decoded is not None, "Chromium could not decode its own screenshot"
    width, height, colours = decoded
    assert (width, height) >= (1000, 600)
    assert len(colours) > 50
    assert max(colours.values()) < 0.9 * sum(colours.values())
    for rgb in colours_shown:
        assert rgb in colours, rgb


# -- Markdown ------------------------------------------------------------------------------

def test_markdown_summary_neutralises_broker_text(hostile_run: Path) -> None:
    text = (hostile_run / "r.md").read_text("utf-8")
    assert "- STOMP 1.2: MUST 1/2" in text
    assert "\u2705 passed 1 \u00b7 \u274c failed 1" in text
    assert f"server `{SERVER}`" in text  # in a code span, markup is text
    row = next(line for line in text.splitlines() if line.startswith("| `hostile.receipt`"))
    assert "[message:a\\|b \\`tick\\` second line \\<script\\>window.\\_\\_pwned=" in row
    assert row.endswith("\u2026 |")  # cut to markdown.MESSAGE characters
    # five cells: six pipes that are not escaped
    assert sum(1 for i, ch in enumerate(row) if ch == "|" and row[i - 1:i] != "\\") == 6
    message = row.split(" | ")[-1].removesuffix(" |")
    assert re.search(r"(?<!\\)[<`|_*\[]", message) is None  # each one escaped
    # outside code spans, no markup character of the broker's is left bare
    assert re.search(r"(?<!\\)[<>]", re.sub(r"`[^`]*`", "", text)) is None
    assert "hostile.bad-escape" not in text  # it passed


def test_markdown_summary_neutralises_client_library_text(hostile_client: Path) -> None:
    text = (hostile_client / "r.md").read_text("utf-8")
    lines = text.splitlines()
    assert lines[0] == f"**{client_line()}**"
    assert lines[2].startswith("### STOMP client conformance: evil/6.6 \\<script\\>window.")
    assert lines[2].endswith(" over TCP (tcp)")
    assert "\\<img src=x onerror=" in lines[2]  # the version
    # the driver command (the payload its argument), cut, in a code span: text there
    assert " \u00b7 driver `" in lines[4] and lines[4].count("`") == 2 and "<img" in lines[4]
    row = next(line for line in lines if line.startswith(f"| `{CLIENT_CASE}`"))
    assert "observed connected event {'event': 'connected', 'headers': \\[\\[" in row
    message = row.split(" | ")[-1].removesuffix(" |")
    assert re.search(r"(?<!\\)[<`|_*\[]", message) is None  # each one escaped
    # outside code spans, no markup character of the library's is left bare
    assert re.search(r"(?<!\\)[<>]", re.sub(r"`[^`]*`", "", text)) is None


def test_markdown_fits_a_github_comment(runs: tuple[Path, Path]) -> None:
    report = load(runs[1])
    report["broker"]["server"] = "x" * 1_000_000  # a broker's header has no length limit here
    report["broker"]["url"] = "u" * 1_000_000
    failing = [c for c in report["cases"] if c["outcome"] != "passed"]
    for c in failing:
        c["message"] = "\U0001f4a5" * 10_000  # two UTF-16 units each
    text = render_markdown(report)
    assert size(text) <= COMMENT_LIMIT and "Cut to fit" not in text
    assert "x" * 199 + "\u2026`" in text and "u" * 199 + "\u2026\n" in text
    assert "\U0001f4a5" * (MESSAGE - 1) + "\u2026 |" in text
    for c in failing:  # ids come from case files, which the summary does not cut
        c["id"] = "i" * 5_000
    text = render_markdown(report)
    assert COMMENT_LIMIT - 6_000 < size(text) <= COMMENT_LIMIT  # cut within a row's length
    assert text.splitlines()[-1].startswith("_Cut to fit a GitHub comment")
    # a matrix of many brokers and case runs is cut to fit, with a note, its block closed
    many = load(runs[0])
    many["cases"] = [{**c, "id": f"{c['id']}-{i}"} for i in range(20) for c in many["cases"]]
    reports = [many] * 6
    markdown = compare_markdown(compare(reports, [f"b{i}.json" for i in range(6)]))
    assert COMMENT_LIMIT - 1000 < size(markdown) <= COMMENT_LIMIT
    assert re.search(r"^_Cut to fit a GitHub comment \(65,536 characters\): [\d,]+ more "
                     r"lines; see the HTML or JSON report\._$", markdown, re.M)
    assert markdown.endswith("\n</details>\n")
    # one that fits is whole
    assert "Cut to fit" not in compare_markdown(compare([load(p) for p in runs], ["a", "b"]))


def test_markdown_caps_the_table(runs: tuple[Path, Path]) -> None:
    report = load(runs[1])
    report["cases"] = report["cases"] * 3  # more failing rows than the table holds
    failing = sum(c["outcome"] != "passed" for c in report["cases"])
    assert failing > ROWS
    lines = render_markdown(report).splitlines()
    assert sum(line.startswith("| `") for line in lines) == ROWS
    assert f"_and {failing - ROWS} more not passing: see the HTML or JSON report._" in lines
    assert lines.index("| --- | --- | --- | --- | --- |") > 0
    # the worst first: every failed row before the first non-strict one
    outcomes = [line.split(" | ")[2] for line in lines if line.startswith("| `")]
    assert outcomes == sorted(outcomes, key=lambda o: "non-strict" in o)


# -- compare -------------------------------------------------------------------------------

def test_compare_shows_the_cells_that_differ(runs: tuple[Path, Path], tmp_path: Path) -> None:
    clean, faulty = load(runs[0]), load(runs[1])
    done = cli("compare", *map(str, runs))
    assert done.returncode == 0 and done.stderr == ""
    text = done.stdout
    assert "|  | reference (clean) | reference (faulty) |" in text
    for version, levels in clean["summary"]["versions"].items():
        theirs = faulty["summary"]["versions"][version]["must"]
        assert (f"| MUST, STOMP {version} | {levels['must']['passed']}/{levels['must']['total']}"
                f" | {theirs['passed']}/{theirs['total']} |") in text
    for outcome, n in faulty["summary"]["outcomes"].items():
        if n:
            assert f" {outcome} | {clean['summary']['outcomes'][outcome]} | {n} |" in text
    before = {(c["id"], c["version"]): c["outcome"] for c in clean["cases"]}
    broken = [c for c in faulty["cases"] if c["outcome"] == "failed"]
    assert broken and all(before[c["id"], c["version"]] == "passed" for c in broken)
    for c in broken:  # in the table of those that differ and in the folded one of all
        assert text.count(f"| `{c['id']} [{c['version']}]` | \u2705 | \u274c |") == 2
    differing = sum(before[c["id"], c["version"]] != c["outcome"] for c in faulty["cases"])
    assert f"**{differing} of {len(before)} case runs differ**" in text
    assert text.endswith("</details>\n")

    done = cli("compare", *map(str, runs), "--html", str(tmp_path / "c.html"), "--markdown",
               str(tmp_path / "c.md"))
    assert done.returncode == 0 and done.stdout == ""
    assert (tmp_path / "c.md").read_text("utf-8") == text
    page = (tmp_path / "c.html").read_text("utf-8")
    case = broken[0]
    assert (f'data-id="{case["id"]} [{case["version"]}]"' in page
            and page.count('data-differs="yes"') == differing)
    assert f'title="{escape(case["message"])}"><span class="badge o-failed">failed</span>' \
        in page  # the reason, on hover


def matrix_report(profile: str, **outcomes: str) -> dict[str, Any]:
    """A report with just what compare reads: case `NAME` at 1.2 per outcome given."""
    counts = Counter(outcomes.values())
    return {
        "tool": {"name": "stomp-conformance", "version": "0.1.0"},
        "broker": {"url": f"{profile}:61613", "profile": profile, "server": None,
                   "versions": ["1.2"]},
        "summary": {"versions": {"1.2": {"must": {"passed": counts["passed"],
                                                  "total": len(outcomes)}}},
                    "outcomes": dict(counts)},
        "cases": [{"id": f"t.{name}", "version": "1.2", "area": "t", "outcome": outcome,
                   "message": "", "deviation": ""} for name, outcome in outcomes.items()]}


def test_compare_counts_a_case_run_missing_from_a_report_apart() -> None:
    """A case run differs where the reports that have it disagree; one that only some
    reports have is counted apart, differing or not."""
    reports = [matrix_report("a", same="passed", split="passed", part="passed"),
               matrix_report("b", same="passed", split="failed", part="passed",
                             new="passed"),
               matrix_report("c", same="passed", split="failed", new="unsupported")]
    matrix = compare(reports, ["a.json", "b.json", "c.json"])
    assert {row.id: (row.differs, row.partial) for row in matrix.rows} == {
        "t.same": (False, False), "t.split": (True, False), "t.part": (False, True),
        "t.new": (True, True)}
    assert matrix.tally() == "2 of 4 case runs differ; 2 are in only some reports"
    markdown = compare_markdown(matrix)
    assert "\n**2 of 4 case runs differ; 2 are in only some reports** (" in markdown
    differing = markdown.split("<details>")[0]
    assert "`t.split [1.2]`" in differing and "`t.new [1.2]`" in differing
    assert "`t.part [1.2]`" not in differing and "`t.part [1.2]`" in markdown
    page = compare_html(matrix)
    assert "&middot; 4 case runs &middot; 2 differ &middot; 2 in only some reports &middot;" \
        in page
    assert page.count('data-differs="yes"') == 2
    # one report short of one case run; then none short, and nothing said of it
    assert compare(reports[:2], ["a", "b"]).tally() == \
        "1 of 4 case runs differ; 1 is in only some reports"
    whole = compare([reports[0], reports[0]], ["a", "b"])
    assert whole.tally() == "0 of 3 case runs differ"
    assert "only some" not in compare_html(whole) + compare_markdown(whole)


def test_compare_json_and_brokers_not_run(runs: tuple[Path, Path], tmp_path: Path) -> None:
    done = cli("compare", *map(str, runs), "--json", str(tmp_path / "c.json"), "--markdown",
               str(tmp_path / "c.md"), "--html", str(tmp_path / "c.html"),
               "--not-run", "artemis=no broker <on> this machine", "--not-run", "x = y")
    assert done.returncode == 0, done.stderr
    matrix = json.loads((tmp_path / "c.json").read_text("utf-8"))
    assert matrix["not_run"] == {"artemis": "no broker <on> this machine", "x": "y"}
    assert [b["name"] for b in matrix["brokers"]] == ["reference (clean)", "reference (faulty)"]
    for broker, path in zip(matrix["brokers"], runs, strict=True):
        report = load(path)
        assert broker["outcomes"] == {f"{c['id']}@{c['version']}": c["outcome"]
                                      for c in report["cases"]}
        assert broker["server"] == report["broker"]["server"]
        assert broker["must"] == {v: f"{lv['must']['passed']}/{lv['must']['total']}"
                                  for v, lv in report["summary"]["versions"].items()}
    assert "Not run: **artemis**: no broker \\<on\\> this machine" in \
        (tmp_path / "c.md").read_text("utf-8")
    assert "not run: no broker &lt;on&gt; this machine" in (tmp_path / "c.html").read_text()
    for bad in ("artemis", "=why", "artemis="):
        done = cli("compare", str(runs[0]), "--not-run", bad)
        assert done.returncode == 2 and "expected NAME=REASON" in done.stderr


def test_compare_joins_reports_of_different_catalogues(runs: tuple[Path, Path],
                                                       hostile_run: Path) -> None:
    done = cli("compare", str(runs[0]), str(hostile_run / "r.json"))
    assert done.returncode == 0, done.stderr
    # the same profile: the server headers tell the columns apart
    assert ("|  | reference (stomp-conformance/0.1.0) | reference (evil/6.6 \\<script\\>"
            "window.\\_\\_pwned='server'\\</script\\>\\<b\\>bold\\</b\\>) |") in done.stdout
    assert "| `hostile.receipt [1.2]` | \u2014 | \u274c |" in done.stdout
    assert "| `escaping.connected-not-escaped [1.2]` | \u2705 | \u2014 |" in done.stdout


def test_compare_tells_the_same_broker_over_two_transports_apart(runs: tuple[Path, Path],
                                                                 tmp_path: Path) -> None:
    folders = [arg for f in FOLDERS for arg in ("--cases", str(ROOT / "cases" / f))]
    done = cli("run", "--transport", "ws", *folders, "--json", str(tmp_path / "ws.json"))
    assert done.returncode == 0, done.stderr
    done = cli("compare", str(runs[0]), str(tmp_path / "ws.json"),
               "--json", str(tmp_path / "c.json"), "--markdown", str(tmp_path / "c.md"))
    assert done.returncode == 0, done.stderr
    brokers = json.loads((tmp_path / "c.json").read_text("utf-8"))["brokers"]
    assert [(b["name"], b["transport"]) for b in brokers] == [
        ("reference (tcp)", "tcp"), ("reference (ws)", "ws")]
    assert brokers[1]["url"].startswith("ws://127.0.0.1:")
    assert "|  | reference (tcp) | reference (ws) |" in (tmp_path / "c.md").read_text("utf-8")


def test_compare_refuses_a_file_that_is_not_a_report(runs: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('{"schema_version": 1,')
    (tmp_path / "other.json").write_text('{"tool": "something else"}')
    for bad, says in [("broken.json", "is not JSON"),
                      ("other.json", "is not a stomp-conformance JSON report"),
                      ("missing.json", "cannot read")]:
        done = cli("compare", str(runs[0]), str(tmp_path / bad))
        assert done.returncode == 2 and done.stdout == ""
        assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
        assert done.stderr.startswith("stomp-conformance: ") and says in done.stderr
