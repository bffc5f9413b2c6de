"""The client catalogue through each shipped driver (drivers/python/, drivers/node/) with its
client profile (conformance/profiles/clients/), over TCP and, where the library has it,
STOMP over WebSocket: each run exits 0 with no error, every failure is a deviation the
profile records and every deviation not marked intermittent still shows, so a profile can
neither hide a new failure nor keep one the library no longer has. The driver's `ready`
names the library and the version installed; over WebSocket the report says what the
client offered and got. A library without WebSocket answers every ws:// case unsupported."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed
from pathlib import Path

import jsonschema
import pytest
import yaml

from conformance.cli import main
from conformance.profiles import load_profile, shipped, shipped_clients
from conformance.report.json_report import schema
from conformance.wire.websocket import SUBPROTOCOL_VERSIONS

ROOT = Path(__file__).resolve().parents[1]
NODE_MODULES = ROOT / "drivers" / "node" / "node_modules"
#: the interpreter of a driver script by its suffix; those of Ruby, Perl and PHP drive a
#: library installed from Debian (its package named in drivers/shipped.yaml)
RUNTIMES = {".js": "node", ".rb": "ruby", ".pl": "perl", ".php": "php"}


def debian_version(package: str) -> str | None:
    """The upstream version of an installed Debian package (no epoch, no Debian revision);
    None when it is not installed."""
    if shutil.which("dpkg-query") is None:
        return None
    shown = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}", package],
                           capture_output=True, text=True, check=False).stdout.split()
    if len(shown) != 2 or shown[0] != "installed":
        return None
    return shown[1].split(":", 1)[-1].rsplit("-", 1)[0]


@dataclass(frozen=True)
class Shipped:
    """A library's driver as shipped (drivers/shipped.yaml): its script under drivers/, the
    package it drives (PyPI, npm or Debian), the name its `ready` gives, its profile, the
    transport it runs over, and the arguments of a named configuration (none: the library's
    defaults)."""

    script: str
    package: str
    library: str
    profile: str
    transport: str = "tcp"
    args: tuple[str, ...] = ()

    def command(self) -> str:
        suffix = Path(self.script).suffix
        runtime = sys.executable if suffix == ".py" else shutil.which(RUNTIMES[suffix])
        return " ".join([f"{runtime} {ROOT / 'drivers' / self.script}",
                         *([shlex.join(self.args)] if self.args else [])])

    def installed_version(self) -> str:
        """The version installed; skips (fails in CI) with the reason when it is not."""
        if self.script.endswith(".py"):
            try:
                return installed(self.package)
            except PackageNotFoundError:
                why = f"{self.package} is not installed (pip install -e '.[test]')"
        elif (runtime := RUNTIMES[Path(self.script).suffix]) != "node":
            if shutil.which(runtime) is None or (found := debian_version(self.package)) is None:
                why = f"{runtime} or {self.package} is not installed (.ci/install test)"
            else:
                return found
        elif shutil.which("node") is None:
            why = "node is not installed (.ci/install test puts it in)"
        elif not (package := NODE_MODULES / self.package / "package.json").is_file():
            why = f"{self.package} is not installed (npm ci --prefix drivers/node)"
        else:
            return str(json.loads(package.read_text())["version"])
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


#: drivers/shipped.yaml: each shipped driver, its library, profile and transports
SHIPPED = yaml.safe_load((ROOT / "drivers" / "shipped.yaml").read_text("utf-8"))
#: a row per driver and transport its library speaks by default (`NAME` over TCP, `NAME-ws`
#: over WebSocket), but the reference driver, whose clean runs over both are those of
#: tests/test_clients.py's self-tests, and one per named configuration and its transports
#: (`NAME-CONFIGURATION[-ws]`)
DRIVERS = {entry["name"] + ("-ws" if transport == "ws" else ""): Shipped(
    entry["script"], entry["package"], entry["library"], entry["profile"], transport)
    for entry in SHIPPED if "script" in entry for transport in entry["transports"]} | {
    f"{entry['name']}-{conf['name']}" + ("-ws" if transport == "ws" else ""): Shipped(
        entry["script"], entry["package"], entry["library"], entry["profile"], transport,
        tuple(conf["args"]))
    for entry in SHIPPED for conf in entry.get("configurations", [])
    for transport in conf["transports"]}
#: drivers whose library has no WebSocket transport, in any configuration
TCP_ONLY = [entry["name"] for entry in SHIPPED if "ws" not in entry["transports"] and not any(
    "ws" in conf["transports"] for conf in entry.get("configurations", []))]


def test_every_shipped_client_profile_has_a_driver_and_none_is_a_broker_profile() -> None:
    assert sorted({d.profile for d in DRIVERS.values()}) == shipped_clients()
    assert not set(shipped_clients()) & set(shipped())
    # each names the language its users write, which the comparison groups columns by
    assert all(isinstance(entry.get("language"), str) and entry["language"] for entry in SHIPPED)
    for name in shipped_clients():
        assert load_profile(name, clients=True).name == name


@pytest.mark.parametrize("name", sorted(DRIVERS))
@pytest.mark.slow
@pytest.mark.timing
def test_the_client_catalogue_through_a_shipped_driver(name: str, tmp_path: Path) -> None:
    shipped_driver = DRIVERS[name]
    expected_version = shipped_driver.installed_version()
    report_path = tmp_path / "report.json"
    code = main(["clients", "--driver", shipped_driver.command(), "--profile",
                 shipped_driver.profile, "--jobs", "8",
                 "--transport", shipped_driver.transport, "--json", str(report_path)])
    report = json.loads(report_path.read_text())
    jsonschema.validate(report, schema())
    bad = [f"{c['id']} [{c['version']}] {c['outcome']}: {c['message']}"
           for c in report["cases"] if c["outcome"] in ("failed", "non-strict", "error")]
    assert code == 0 and not bad, "\n".join(bad)
    client = report["client"]
    assert (client["library"], client["version"]) == (shipped_driver.library, expected_version)
    assert (client["profile"], client["transport"]) == \
        (shipped_driver.profile, shipped_driver.transport)
    if shipped_driver.transport == "ws":  # each version ran got its own subprotocol
        names = {v: n for n, v in SUBPROTOCOL_VERSIONS.items()}
        assert client["versions"] and all(
            names[v] in client["websocket"][v]["offered"] and
            client["websocket"][v]["accepted"] == names[v] for v in client["versions"])
    # a deviation shows where a case run broke a statement it declares
    shown = {key for c in report["cases"] if any(b["declared"] for b in c["broken"])
             for key in (c["id"], f"{c['id']}@{c['version']}")}
    # a deviation of a case run this transport cannot make (stomp.py speaks only 1.2 over
    # WebSocket) is not stale here: some other transport of the library shows it
    not_run = {f"{c['id']}@{c['version']}" for c in report["cases"]
               if c["outcome"] == "unsupported"}
    # nor is one of a case this transport does not run (websocket.yaml's over TCP)
    ran = {c["id"] for c in report["cases"]}
    deviations = load_profile(shipped_driver.profile, clients=True).deviations
    stale = [key for key, d in deviations.items() if key not in shown and key not in not_run
             and key.split("@")[0] in ran and not d.intermittent]
    assert not stale, f"deviations {shipped_driver.profile} no longer shows: {stale}"
    speaks = load_profile(shipped_driver.profile, clients=True).versions
    assert all(c["outcome"] == "unsupported" for c in report["cases"]
               if c["version"] not in speaks)


@pytest.mark.parametrize("name", TCP_ONLY)
def test_a_library_without_websocket_answers_a_ws_url_unsupported(
        name: str, tmp_path: Path) -> None:
    shipped_driver = DRIVERS[name]
    shipped_driver.installed_version()
    report_path = tmp_path / "report.json"
    code = main(["clients", "--driver", shipped_driver.command(), "--transport", "ws",
                 "-k", "clients.send.receipt", "--json", str(report_path)])
    cases = json.loads(report_path.read_text())["cases"]
    assert code == 0 and cases and {c["outcome"] for c in cases} == {"unsupported"}
    assert any("unsupported: url 'ws://127.0.0.1:" in c["message"] for c in cases)


def test_strict_grades_a_client_profile_deviation_as_what_it_is(tmp_path: Path) -> None:
    shipped_driver = DRIVERS["stompest"]
    shipped_driver.installed_version()
    report_path = tmp_path / "report.json"
    code = main(["clients", "--driver", shipped_driver.command(), "--profile", "client-stompest",
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
