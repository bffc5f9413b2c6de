"""The client catalogue through each shipped Python driver (drivers/python/) with its client
profile (conformance/profiles/clients/): each run exits 0 with no error, every failure is a
deviation the profile records and every deviation not marked intermittent still shows, so a
profile can neither hide a new failure nor keep one the library no longer has. The driver's
`ready` names the library and the version installed."""

from __future__ import annotations

import json
import os
import sys
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed
from pathlib import Path

import jsonschema
import pytest

from conformance.cli import main
from conformance.profiles import load_profile, shipped, shipped_clients
from conformance.report.json_report import schema

ROOT = Path(__file__).resolve().parents[1]
#: profile -> the driver, the distribution it drives and the name its `ready` gives
DRIVERS = {"client-stomp-py": ("stomppy.py", "stomp-py", "stomp.py"),
           "client-stompest": ("stompest_sync.py", "stompest", "stompest"),
           "client-aiostomp": ("aiostomp_async.py", "aiostomp", "aiostomp")}


def driver(script: str) -> str:
    return f"{sys.executable} {ROOT / 'drivers' / 'python' / script}"


def test_every_shipped_client_profile_has_a_driver_and_none_is_a_broker_profile() -> None:
    assert sorted(DRIVERS) == shipped_clients()
    assert not set(shipped_clients()) & set(shipped())
    for name in shipped_clients():
        assert load_profile(name, clients=True).name == name


@pytest.mark.parametrize("profile", sorted(DRIVERS))
def test_the_client_catalogue_through_a_shipped_driver(profile: str, tmp_path: Path) -> None:
    script, distribution, library = DRIVERS[profile]
    try:
        expected_version = installed(distribution)
    except PackageNotFoundError:
        why = f"{distribution} is not installed (pip install -e '.[test]')"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    report_path = tmp_path / "report.json"
    code = main(["clients", "--driver", driver(script), "--profile", profile, "--jobs", "8",
                 "--json", str(report_path)])
    report = json.loads(report_path.read_text())
    jsonschema.validate(report, schema())
    bad = [f"{c['id']} [{c['version']}] {c['outcome']}: {c['message']}"
           for c in report["cases"] if c["outcome"] in ("failed", "non-strict", "error")]
    assert code == 0 and not bad, "\n".join(bad)
    assert (report["client"]["library"], report["client"]["version"]) == \
        (library, expected_version)
    assert report["client"]["profile"] == profile
    shown = {key for c in report["cases"] if c["outcome"] == "known-deviation"
             for key in (c["id"], f"{c['id']}@{c['version']}")}
    deviations = load_profile(profile, clients=True).deviations
    stale = [key for key, d in deviations.items() if key not in shown and not d.intermittent]
    assert not stale, f"deviations {profile} no longer shows: {stale}"
    speaks = load_profile(profile, clients=True).versions
    assert all(c["outcome"] == "unsupported" for c in report["cases"]
               if c["version"] not in speaks)


def test_strict_grades_a_client_profile_deviation_as_what_it_is(tmp_path: Path) -> None:
    script, _, _ = DRIVERS["client-stompest"]
    report_path = tmp_path / "report.json"
    pytest.importorskip("stompest", reason="stompest is not installed")
    code = main(["clients", "--driver", driver(script), "--profile", "client-stompest",
                 "--strict", "-k", "send.nul-body", "--json", str(report_path)])
    cases = json.loads(report_path.read_text())["cases"]
    assert code == 1 and {c["outcome"] for c in cases} == {"failed"}
    assert all("content-length" in c["deviation"] for c in cases)


def test_a_client_profile_that_cannot_be_used_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["clients", "--profile", "rabbitmq"]) == 2  # a broker's, not a client's
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ndeviations: {clients.x: {observed: o}}\n")
    assert main(["clients", "--profile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "no profile 'rabbitmq'" in err and "reason" in err
