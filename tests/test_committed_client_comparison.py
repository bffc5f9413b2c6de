"""reports/clients-comparison.* (written by `reports/refresh clients`) is the comparison of
the current client catalogue: every client case run of it over the column's transport, no
other, for each driver of drivers/shipped.yaml (the reference driver first, then grouped by
language) over each transport its library speaks, graded with its client profile, each
column named for its library, version, language and transport; none is missing, since every
shipped driver runs on the machine that refreshes it. When this fails, run
`reports/refresh clients` and commit what it writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from helpers import changed_runs, check_comparison_files

from conformance.cli.options import default_cases
from conformance.scenario import load_cases

ROOT = Path(__file__).resolve().parents[1]
STALE = ("reports/clients-comparison.json is stale: run `reports/refresh clients` and commit "
         "what it writes")
#: what a column named for its profile (as reports/ held before columns were named
#: "LIBRARY VERSION (LANGUAGE, TRANSPORT)" and grouped by language) means
OLD_NAMES = ("reports/clients-comparison.json predates the columns named "
             "'LIBRARY VERSION (LANGUAGE, TRANSPORT)' in language order (expected until the "
             "lead refreshes reports/): run `reports/refresh clients` and commit what it writes")


def committed() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (ROOT / "reports" / "clients-comparison.json").read_text("utf-8"))
    return data


def catalogue_runs(transport: str) -> set[str]:
    """`id@version` of every case run of the shipped client catalogue over `transport`."""
    return {f"{case.id}@{version}" for case in load_cases([default_cases()], client=True)
            if transport in case.transports for version in case.versions}


def test_every_client_has_every_case_run_of_the_client_catalogue() -> None:
    expected = {transport: catalogue_runs(transport) for transport in ("tcp", "ws")}
    assert expected["tcp"] and expected["ws"] - expected["tcp"]  # the ws-only cases
    clients = committed()["clients"]
    assert clients, STALE
    stale = [changed_runs(client["name"], set(client["outcomes"]),
                          expected[client["transport"]]) for client in clients]
    assert not any(stale), "\n".join([STALE, *filter(None, stale)])


def test_the_clients_are_the_shipped_drivers() -> None:
    data = committed()
    shipped = yaml.safe_load((ROOT / "drivers" / "shipped.yaml").read_text("utf-8"))
    # a column per driver and transport, the reference driver first, then by language (in
    # drivers/shipped.yaml's order within one), each named "LIBRARY VERSION (LANGUAGE,
    # TRANSPORT)" with the version its driver's `ready` gave, its driver the shipped script;
    # then one per named configuration and transport ("LIBRARY VERSION CONFIGURATION
    # (LANGUAGE, TRANSPORT)"), its arguments after the script
    expected, scripts = [], []
    for entry in sorted(shipped, key=lambda e: ("script" in e, e["language"].casefold())):
        script = f"drivers/{entry['script']}" if "script" in entry \
            else "-m conformance.clients.driver"
        runs = [("", transport, script) for transport in entry["transports"]] + [
            (f" {configuration['name']}", transport,
             " ".join([script, *configuration["args"]]))
            for configuration in entry.get("configurations", [])
            for transport in configuration["transports"]]
        for configuration, transport, command in runs:
            expected.append((entry["library"], configuration, entry["language"],
                             entry.get("profile"), transport))
            scripts.append(command)
    clients = data["clients"]
    assert [(c["library"], c["profile"], c["transport"]) for c in clients] == \
        [(library, profile, transport) for library, _, _, profile, transport in expected], \
        OLD_NAMES if clients and clients[0]["name"].startswith("stomp-conformance reference "
                                                               "driver (") else STALE
    names = [f"{library} {c['version']}{configuration} ({language}, {transport})"
             for c, (library, configuration, language, _, transport)
             in zip(clients, expected, strict=True)]
    assert [c["name"] for c in clients] == names, OLD_NAMES
    assert all(c["driver"].endswith(script) for c, script in zip(clients, scripts, strict=True))
    assert expected[0][0] == "stomp-conformance reference driver"
    # A driver that would not run is a comparison to redo, not one to commit.
    assert data["not_run"] == {}, f"{STALE}: not run: {data['not_run']}"


def test_the_markdown_and_page_are_of_the_same_comparison() -> None:
    runs = len(catalogue_runs("tcp") | catalogue_runs("ws"))  # the union: rows
    check_comparison_files("clients-comparison", "clients", runs)
