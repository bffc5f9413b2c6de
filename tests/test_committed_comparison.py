"""reports/comparison.* (written by reports/refresh) is the comparison of the current
catalogue: every case run of it over the column's transport, no other, for the reference
broker over TCP and over WebSocket and every broker with a shipped profile; a broker the
refreshing machine had no script for is named as not run, with why. When this fails, run
reports/refresh and commit what it writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import changed_runs, check_comparison_files, cli

from conformance.profiles import shipped

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"
STALE = ("reports/comparison.json is stale: run `reports/refresh brokers` and commit what it "
         "writes")


def committed() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPORTS / "comparison.json").read_text("utf-8"))
    return data


def catalogue_runs(transport: str) -> set[str]:
    """`id@version` of every case run of the shipped catalogue over `transport`, from
    `list --json`."""
    done = cli("list", "--json")
    assert done.returncode == 0, done.stderr
    return {f"{case['id']}@{version}" for case in json.loads(done.stdout)
            if transport in case["transports"] for version in case["versions"]}


def test_every_broker_has_every_case_run_of_the_catalogue() -> None:
    expected = {transport: catalogue_runs(transport) for transport in ("tcp", "ws")}
    brokers = committed()["brokers"]
    assert brokers, STALE
    stale = [changed_runs(broker["name"], set(broker["outcomes"]),
                          expected[broker["transport"]]) for broker in brokers]
    assert not any(stale), "\n".join([STALE, *filter(None, stale)])


def test_the_brokers_are_the_shipped_profiles() -> None:
    data = committed()
    columns = [(b["name"], b["profile"], b["transport"]) for b in data["brokers"]]
    # the reference broker over both transports first, then one column per other profile,
    # named for it, over the transport it is for
    assert columns[:2] == [("reference (tcp)", "reference", "tcp"),
                           ("reference (ws)", "reference", "ws")], STALE
    assert all(name == profile for name, profile, _ in columns[2:])
    ran = [profile for _, profile, _ in columns[1:]]
    assert sorted([*ran, *data["not_run"]]) == shipped(), STALE
    # Only a profile with no broker script may be missing: a broker that would not start
    # or run is a comparison to redo, not one to commit.
    for name, reason in data["not_run"].items():
        assert not (ROOT / ".ci" / "brokers" / name).exists(), f"{name} not run: {reason}"
        assert reason


def test_the_markdown_and_page_are_of_the_same_comparison() -> None:
    runs = len(catalogue_runs("tcp") | catalogue_runs("ws"))  # the union: rows
    check_comparison_files("comparison", "brokers", runs)
