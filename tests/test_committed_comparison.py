"""reports/comparison.* (written by reports/refresh) is the comparison of the current
catalogue: every case run of it, no other, for every broker with a shipped profile; a broker
the refreshing machine had no script for is named as not run, with why. When this fails, run
reports/refresh and commit what it writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import cli

from conformance.profiles import shipped
from conformance.report.compare import MARKS, MISSING

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"
STALE = "reports/comparison.json is stale: run reports/refresh and commit what it writes"


def committed() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPORTS / "comparison.json").read_text("utf-8"))
    return data


def catalogue_runs() -> set[str]:
    """`id@version` of every case run of the shipped catalogue over TCP (the comparison's
    transport), from `list --json`."""
    done = cli("list", "--json")
    assert done.returncode == 0, done.stderr
    return {f"{case['id']}@{version}" for case in json.loads(done.stdout)
            if "tcp" in case["transports"] for version in case["versions"]}


def test_every_broker_has_every_case_run_of_the_catalogue() -> None:
    expected = catalogue_runs()
    brokers = committed()["brokers"]
    assert brokers, STALE
    for broker in brokers:
        runs = set(broker["outcomes"])
        assert runs == expected, (
            f"{STALE}: {broker['name']}: missing {sorted(expected - runs)[:10]}, "
            f"no longer in the catalogue {sorted(runs - expected)[:10]}")


def test_the_brokers_are_the_shipped_profiles() -> None:
    data = committed()
    ran = [b["profile"] for b in data["brokers"]]
    assert [b["name"] for b in data["brokers"]] == ran  # one column per profile, named for it
    assert ran[0] == "reference"
    assert sorted([*ran, *data["not_run"]]) == shipped(), STALE
    # Only a profile with no broker script may be missing: a broker that would not start
    # or run is a comparison to redo, not one to commit.
    for name, reason in data["not_run"].items():
        assert not (ROOT / ".ci" / "brokers" / name).exists(), f"{name} not run: {reason}"
        assert reason


def test_the_markdown_and_page_are_of_the_same_comparison() -> None:
    data = committed()
    markdown = (REPORTS / "comparison.md").read_text("utf-8")
    page = (REPORTS / "comparison.html").read_text("utf-8")
    runs = len(catalogue_runs())
    assert f"of {runs} case runs differ**" in markdown
    assert f"{len(data['brokers'])} reports" in page and f"&middot; {runs} case runs" in page
    header = "|  | " + " | ".join(b["name"] for b in data["brokers"]) + " |"
    assert header in markdown.splitlines()
    for name in data["not_run"]:
        assert f"Not run: **{name}**" in markdown and f"<strong>{name}</strong>" in page
    # the last table of the Markdown holds every case run, a symbol per broker's outcome
    table = markdown.split("<details>")[-1] if "<details>" in markdown else markdown
    rows = {line.split(" | ")[0].strip("| `"): line.split(" | ")[1:]
            for line in table.splitlines() if line.startswith("| `")}
    assert len(rows) == runs and "Cut to fit" not in markdown
    for label, cells in rows.items():
        case_id, version = label.removesuffix("]").split(" [")
        assert [cell.removesuffix(" |") for cell in cells] == [
            MARKS[b["outcomes"][f"{case_id}@{version}"]] if f"{case_id}@{version}"
            in b["outcomes"] else MISSING for b in data["brokers"]], label
