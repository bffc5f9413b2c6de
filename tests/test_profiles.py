"""Profiles: a profile that `extends` a shipped one gets its settings and deviations, with
its own keys on top; a broken extension is a one-line ProfileError."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.profiles import ProfileError, load_profile, shipped
from conformance.runner.engine import Engine
from conformance.scenario import load_cases
from conformance.wire.target import Target
from conformance.wire.transport import parse_broker


def test_every_shipped_profile_loads() -> None:
    for name in shipped():
        assert load_profile(name).name == name


def test_rabbitmq_web_is_rabbitmq_over_websocket_with_its_own_deviations() -> None:
    tcp, web = load_profile("rabbitmq"), load_profile("rabbitmq-web")
    assert (web.host, web.login, web.queue, web.versions) == \
        (tcp.host, tcp.login, tcp.queue, tcp.versions)
    assert web.websocket_path == "/ws" and tcp.websocket_path is None
    assert tcp.deviations.items() < web.deviations.items()
    assert "websocket.disconnect-receipt-then-close" in web.deviations


def test_an_extension_replaces_keys_and_joins_deviations(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nextends: rabbitmq\nhost: other\n"
                    "capabilities: {nack: false}\n"
                    "deviations:\n  frames.unknown-command: {observed: o, reason: r, "
                    "statement: frames.command-grammar}\n")
    mine, base = load_profile(str(path)), load_profile("rabbitmq")
    assert (mine.name, mine.host, mine.login) == ("mine", "other", base.login)
    assert not mine.supports("nack") and mine.supports("transactions")
    assert mine.deviations["frames.unknown-command"].observed == "o"
    assert set(mine.deviations) == set(base.deviations)


@pytest.mark.parametrize(("extends", "message"), [
    ("nope", "extends 'nope', which is not a shipped profile"),
    ("17", "extends: 17 is not of type 'string'"),
])
def test_a_bad_extension_is_one_line(tmp_path: Path, extends: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"name: bad\nextends: {extends}\n")
    with pytest.raises(ProfileError, match=message) as raised:
        load_profile(str(path))
    assert "\n" not in str(raised.value)


def test_a_profile_caps_the_jobs_of_a_run(tmp_path: Path) -> None:
    address = parse_broker("ws://127.0.0.1:61619/ws")
    capped = tmp_path / "capped.yaml"
    capped.write_text("name: capped\nextends: stomp-broker-js\njobs: 1\n")
    assert Engine(Target(address, load_profile(str(capped))), jobs=8).jobs == 1
    assert Engine(Target(address, load_profile("stomp-broker-js")), jobs=8).jobs == 8


def test_the_cases_a_shipped_profile_runs_alone_are_in_the_catalogue() -> None:
    ids = {c.id for c in load_cases([Path(__file__).resolve().parents[1] / "cases"])}
    for name in shipped():
        alone = load_profile(name).alone
        assert alone <= ids, f"{name}: alone names no case {sorted(alone - ids)}"


def _sends_without_destination(step_kind: str, args: object) -> bool:
    """A step that sends a whole SEND or SUBSCRIBE frame with no `destination` header."""
    if not isinstance(args, dict):
        return False
    if step_kind == "send":
        headers = args.get("headers") or {}
        names = headers if isinstance(headers, dict) else [name for name, _ in headers]
        return args.get("command") in ("SEND", "SUBSCRIBE") and "destination" not in names
    if step_kind == "raw":
        head, blank, _ = str(args.get("data", "")).partition("\n\n")
        lines = head.split("\n")
        return bool(blank) and lines[0] in ("SEND", "SUBSCRIBE") and not any(
            line.startswith("destination:") for line in lines[1:])
    return False


def test_stomp_broker_js_runs_alone_every_case_that_can_bring_it_down() -> None:
    """stomp-broker-js dies on a SUBSCRIBE without destination, or a SEND without one while
    any session subscribes (its profile), and answers every CONNECT as 1.1: a case that can
    run at 1.1 and sends such a frame must be in its `alone:` list, or it cuts off the cases
    beside it."""
    ids = {c.id for c in load_cases([Path(__file__).resolve().parents[1] / "cases"])
           if "1.1" in c.versions and any(_sends_without_destination(s.kind, s.args)
                                          for s in c.steps)}
    assert {"subscribe.without-destination", "headers.send-destination-wrong-case"} <= ids
    alone = load_profile("stomp-broker-js").alone
    assert ids <= alone, f"not run alone: {sorted(ids - alone)}"
