"""Triage of fuzz findings into the published report: each bucket's category, known or new,
the cases that check its rule, the triager's notes; the report's Markdown, HTML (broker
text escaped) and JSON; a bad notes file is a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import cli

from conformance.fuzz.inputs.fuzz_input import Expect, FuzzInput
from conformance.fuzz.network.findings import BrokerInfo, Finding, Replays, new_finding
from conformance.fuzz.network.folder import CampaignDir, CampaignState
from conformance.fuzz.network.oracle import Anomaly, Kind

BROKER = BrokerInfo("rabbitmq@127.0.0.1:61613", "127.0.0.1:61613", "rabbitmq")


def fuzz(statement: str, mutation: str, version: str = "1.2") -> FuzzInput:
    return FuzzInput(version=version, chunks=(b"SEND\n\n\x00",), expect=Expect.ERROR,
                     statement=statement, mutation=mutation, receipt="r")


def finding(kind: Kind, statement: str, given: FuzzInput, *, about: str = "",
            detail: str = "a detail") -> Finding:
    return new_finding(Anomaly(kind, statement, detail, about), given, generator="grammar",
                       response=b"", ended="closed", broker=BROKER, campaign="c", seed=7,
                       index=1, found_at="t", elapsed=1.0, inputs=1, tool_version="0")


def campaign(folder: Path, findings: list[Finding]) -> Path:
    store = CampaignDir(folder)
    store.save_state(CampaignState(campaign="c", seed=7, broker=BROKER, generator="grammar",
                                   versions=("1.2",), created="t", updated="t",
                                   tool_version="0", server="RabbitMQ/3.10.8",
                                   resources={"starts": 2, "peak_rss": 3 << 20}))
    for each in findings:
        store.save_finding(each)
    return folder


def test_each_bucket_is_sorted_marked_and_named_with_the_cases_of_its_rule(
        tmp_path: Path) -> None:
    escape = finding(Kind.ACCEPTED, "value-encoding.undefined-escape-fatal",
                     fuzz("value-encoding.undefined-escape-fatal", "undefined-escape"))
    crash = finding(Kind.CRASH, "connecting.connected-response",
                    fuzz("subscribe.destination-required", "missing-required-header"),
                    about="TypeError: <script>alert(1)</script>",
                    detail="died: <script>alert(1)</script>").updated(confirmed=True)
    echoed = finding(Kind.ACCEPTED, "frames.header-grammar",
                     fuzz("frames.header-grammar", "header-without-colon")
                     ).updated(confirmed=False)
    folder = campaign(tmp_path / "rabbitmq", [escape, crash, echoed])
    signature = "crash connecting.connected-response TypeError: <script>alert(1)</script>"
    notes = tmp_path / "notes.yaml"
    notes.write_text(json.dumps({"rabbitmq": {signature: {
        "note": "known from the catalogue", "known": True,
        "cases": ["subscribe.without-destination"]}}}))
    out = tmp_path / "fuzz"
    done = cli("triage", str(folder), "--notes", str(notes), "--json", f"{out}.json",
               "--markdown", f"{out}.md", "--html", f"{out}.html")
    assert done.returncode == 0, done.stderr
    report = json.loads(Path(f"{out}.json").read_text())
    (broker,) = report["brokers"]
    assert broker["server"] == "RabbitMQ/3.10.8" and broker["campaign"]["seed"] == 7
    buckets = {b["kind"]: b for b in broker["buckets"] if b["kind"] == "crash"}
    # RabbitMQ's profile declares that it takes undefined escapes
    taken = next(b for b in broker["buckets"] if "undefined-escape" in b["signature"])
    assert taken["category"] == "deviation" and taken["known"] and taken["deviations"]
    assert "escaping.undefined-escape-tab" in taken["cases"]
    # the triager's note: known, covered by the case the profile runs alone
    down = buckets["crash"]
    assert down["category"] == "crash" and down["known"] is True
    assert list(down["cases"])[0] == "subscribe.without-destination"
    assert down["note"] == "known from the catalogue"
    assert [b["category"] for b in broker["buckets"]].index("crash") == 0
    assert report["counts"]["rabbitmq"]["crash"] == 1
    # a finding not shown again is no violation
    assert any(b["category"] == "not reproduced" for b in broker["buckets"])
    page = Path(f"{out}.html").read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    markdown = Path(f"{out}.md").read_text()
    assert "| crash | known |" in markdown and "RabbitMQ/3.10.8" in markdown


def test_a_broken_notes_file_or_folder_is_one_line(tmp_path: Path) -> None:
    folder = campaign(tmp_path / "rabbitmq", [])
    notes = tmp_path / "notes.yaml"
    notes.write_text("rabbitmq:\n  sig: {known: maybe}\n")
    done = cli("triage", str(folder), "--notes", str(notes))
    assert done.returncode == 2 and "known" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    notes.write_text("rabbitmq: [unclosed\n")
    done = cli("triage", str(folder), "--notes", str(notes))
    assert done.returncode == 2 and "not YAML" in done.stderr and "Traceback" not in done.stderr
    done = cli("triage", str(tmp_path / "nowhere"))
    assert done.returncode == 2 and "state.json" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_replays_after_the_campaign_decide_whether_a_finding_reproduces(
        tmp_path: Path) -> None:
    escape = fuzz("value-encoding.undefined-escape-fatal", "undefined-escape")
    every = finding(Kind.ACCEPTED, "value-encoding.undefined-escape-fatal", escape
                    ).updated(confirmed=True, replays=Replays(5, 5))
    sometimes = finding(Kind.CLOSED_WITHOUT_ERROR, "frames.header-grammar",
                        fuzz("frames.header-grammar", "header-without-colon")
                        ).updated(confirmed=True, replays=Replays(5, 3))
    # confirmed by the campaign, never shown again after it
    gone = finding(Kind.TIMEOUT, "frames.nul-terminator", fuzz("frames.nul-terminator", "x")
                   ).updated(confirmed=True, replays=Replays(5, 0))
    # an unattributed crash: down for sure, which input did it not known; replayed, it is
    crash = finding(Kind.CRASH, "connecting.connected-response", escape, about="boom"
                    ).updated(confirmed=False, suspects=(escape, escape))
    # shown 3 times in 5: 10 tries show it 19 times in 20 at the low end of that rate
    assert sometimes.replay_command("f.json").endswith(" --times 10")
    assert Replays(5, 1).sure > Replays(5, 3).sure > Replays(5, 4).sure >= 2
    assert "--times" not in every.replay_command("f.json") + gone.replay_command("f.json")
    assert (every.reproduces, sometimes.reproduces, gone.reproduces, crash.reproduces) == \
        (True, True, False, None)
    assert crash.updated(replays=Replays(5, 0)).reproduces is False
    folder = campaign(tmp_path / "rabbitmq", [every, sometimes, gone, crash])
    again = CampaignDir(folder).load_findings()
    assert again[sometimes.id].replays == Replays(5, 3)
    out = tmp_path / "fuzz"
    done = cli("triage", str(folder), "--json", f"{out}.json", "--markdown", f"{out}.md")
    assert done.returncode == 0, done.stderr
    (broker,) = json.loads(Path(f"{out}.json").read_text())["brokers"]
    category = {b["kind"]: b["category"] for b in broker["buckets"]}
    # (RabbitMQ's profile declares both rules of the first two)
    assert category == {"accepted-silently": "deviation", "closed-without-error": "deviation",
                        "timeout": "not reproduced", "crash": "crash"}
    rows = {b["kind"]: b["findings"][0] for b in broker["buckets"]}
    assert rows["closed-without-error"]["replay"].endswith(" --times 10")
    markdown = Path(f"{out}.md").read_text()
    assert "intermittent: 3/5 replays" in markdown and "replayed: 5/5" in markdown
    assert "replayed: never in 5" in markdown
