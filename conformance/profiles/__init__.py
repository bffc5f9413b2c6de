"""Broker profiles: what a broker needs (host header, credentials, destination names) and
declares (versions and capabilities, known deviations with reasons). Shipped profiles live
in conformance/profiles/; `--profile FILE` reads a user's own.

Client profiles (`clients --profile`) are the same format with the broker-only keys absent:
the versions a client library offers and its known deviations. The shipped ones live in
conformance/profiles/clients/, apart, so that nothing judging brokers sees them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from conformance.spec import catalogue

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "extends": {
            "description": "a shipped profile this one builds on: its settings, each key "
                           "given here replacing the base's, its capabilities and deviations "
                           "joined with those given here (the same broker over another "
                           "transport, say)",
            "type": "string",
        },
        "description": {"type": "string"},
        "host": {"type": "string"},
        "credentials": {
            "type": "object", "additionalProperties": False,
            "properties": {k: {"type": "string"} for k in
                           ("login", "passcode", "login_env", "passcode_env")},
        },
        "destinations": {
            "type": "object", "additionalProperties": False,
            "properties": {"queue": {"type": "string", "pattern": "\\{name\\}"},
                           "topic": {"type": "string", "pattern": "\\{name\\}"}},
        },
        "websocket": {
            "description": "over ws:// and wss://: the subprotocols to offer (default "
                           "v12.stomp, v11.stomp, v10.stomp; [] offers none) and the path "
                           "when the address gives none",
            "type": "object", "additionalProperties": False,
            "properties": {"subprotocols": {"type": "array", "uniqueItems": True,
                                            "items": {"type": "string", "minLength": 1,
                                                      "pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"}},
                           "path": {"type": "string", "pattern": "^/"}},
        },
        "jobs": {
            "description": "the most case runs the broker takes at once (the run's --jobs "
                           "is cut to it): 1 for a broker that some frames bring down, with "
                           "every session beside them",
            "type": "integer", "minimum": 1,
        },
        "alone": {
            "description": "ids of the cases whose frames bring the broker down, with every "
                           "session beside them: each runs by itself, before the others",
            "type": "array", "uniqueItems": True, "items": {"type": "string", "minLength": 1},
        },
        "capabilities": {
            "type": "object",
            "properties": {"versions": {"type": "array",
                                        "items": {"enum": ["1.0", "1.1", "1.2"]}}},
            "additionalProperties": {"type": ["boolean", "integer"]},
        },
        "deviations": {
            "description": "case id (every version) or case id@version -> the deviation: "
                           "the statement(s) it breaks (a case run whose failed checks "
                           "speak for others is graded as usual), what is seen and why",
            "type": "object",
            "propertyNames": {"pattern": "^[^@]+(@1\\.[012])?$"},
            "additionalProperties": {
                "type": "object", "required": ["observed", "reason", "statement"],
                "additionalProperties": False,
                "properties": {"observed": {"type": "string"}, "reason": {"type": "string"},
                               "statement": {"oneOf": [
                                   {"type": "string"},
                                   {"type": "array", "items": {"type": "string"},
                                    "minItems": 1}]},
                               "link": {"type": "string"},
                               "intermittent": {"type": "boolean"}},
            },
        },
    },
}


class ProfileError(Exception):
    """A profile that cannot be used (one line)."""


@dataclass(frozen=True)
class Deviation:
    observed: str
    reason: str
    #: the statements it breaks: it excuses a failed check that speaks for one of them
    statements: tuple[str, ...]
    link: str = ""
    #: seen in some runs only: a run where the case passes does not make the entry stale
    intermittent: bool = False


@dataclass(frozen=True)
class Profile:
    name: str
    description: str = ""
    #: the value of the `host` header of CONNECT (1.1 and 1.2); None: the broker's host name
    host: str | None = None
    login: str | None = field(default=None, repr=False)
    passcode: str | None = field(default=None, repr=False)
    queue: str = "/queue/{name}"
    topic: str = "/topic/{name}"
    versions: tuple[str, ...] = ("1.0", "1.1", "1.2")
    capabilities: dict[str, bool | int] = field(default_factory=dict)
    deviations: dict[str, Deviation] = field(default_factory=dict)
    #: over WebSocket: the subprotocols to offer (None: the transport's default), and the
    #: path used when the address gives none
    subprotocols: tuple[str, ...] | None = None
    websocket_path: str | None = None
    #: the most case runs at once the broker takes (None: as many as the run asks)
    jobs: int | None = None
    #: the cases that bring the broker down, run one at a time with nothing beside them
    alone: frozenset[str] = frozenset()

    def deviation(self, case_id: str, version: str) -> Deviation | None:
        """The deviation declared for a case at one version (key `ID@VERSION`), else for
        the case at every version (key `ID`)."""
        return self.deviations.get(f"{case_id}@{version}") or self.deviations.get(case_id)

    def supports(self, capability: str) -> bool:
        """A capability not named by the profile is assumed present."""
        return bool(self.capabilities.get(capability, True))


def _folder(clients: bool) -> Traversable:
    folder = resources.files("conformance.profiles")
    return folder / "clients" if clients else folder


def shipped() -> list[str]:
    """The shipped broker profiles."""
    return _names(False)


def shipped_clients() -> list[str]:
    """The shipped client library profiles."""
    return _names(True)


def _names(clients: bool) -> list[str]:
    return sorted(p.name[:-5] for p in _folder(clients).iterdir() if p.name.endswith(".yaml"))


def load_profile(name_or_file: str, *, clients: bool = False) -> Profile:
    """A shipped profile by name (a client library's with `clients`), or a YAML file by
    path."""
    return _profile(_data(name_or_file, clients))


def _data(name_or_file: str, clients: bool = False) -> dict[str, Any]:
    """A profile's validated data, with the data of the profile it extends beneath it."""
    names = _names(clients)
    if name_or_file in names:
        text = _folder(clients).joinpath(f"{name_or_file}.yaml").read_text("utf-8")
        where = f"profile {name_or_file!r}"
    else:
        path = Path(name_or_file)
        if not path.is_file():
            raise ProfileError(f"no profile {name_or_file!r}: give a file or one of "
                               f"{', '.join(names)}")
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ProfileError(f"cannot read profile {path}: {error}") from None
        where = str(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise ProfileError(f"{where}:{mark.line + 1 if mark else '?'}: YAML syntax: "
                           f"{getattr(error, 'problem', error)}") from None
    problem = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(SCHEMA).iter_errors(data))
    if problem is not None:
        at = "/".join(str(p) for p in problem.absolute_path) or "top level"
        raise ProfileError(f"{where}: {at}: {problem.message}")
    base = data.get("extends")
    if base is None:
        return dict(data)
    if base not in names:
        raise ProfileError(f"{where}: extends {base!r}, which is not a shipped profile "
                           f"({', '.join(names)})")
    merged = _data(base, clients)  # shipped profiles extend none in a circle (tests load them all)
    for key in ("capabilities", "deviations"):  # joined; every other key replaced
        data[key] = {**merged.get(key, {}), **data.get(key, {})}
    return {**merged, **data}


def _deviation(profile: str, key: str, entry: dict[str, Any]) -> Deviation:
    named = entry["statement"]
    statements = (named,) if isinstance(named, str) else tuple(named)
    unknown = [s for s in statements if s not in catalogue()]
    if unknown:
        raise ProfileError(f"profile {profile!r}, deviation {key}: unknown statement "
                           f"{unknown[0]!r} (see `stomp-conformance spec`)")
    fields = {k: v for k, v in entry.items() if k != "statement"}
    return Deviation(statements=statements, **fields)


def _profile(data: dict[str, Any]) -> Profile:
    credentials = data.get("credentials", {})
    login = os.environ.get(credentials.get("login_env", ""), credentials.get("login"))
    passcode = os.environ.get(credentials.get("passcode_env", ""), credentials.get("passcode"))
    capabilities = dict(data.get("capabilities", {}))
    versions = tuple(capabilities.pop("versions", ("1.0", "1.1", "1.2")))
    destinations = data.get("destinations", {})
    websocket = data.get("websocket", {})
    subprotocols = websocket.get("subprotocols")
    return Profile(
        name=data["name"], description=data.get("description", ""), host=data.get("host"),
        login=login, passcode=passcode,
        queue=destinations.get("queue", "/queue/{name}"),
        topic=destinations.get("topic", "/topic/{name}"),
        versions=versions, capabilities=capabilities,
        deviations={k: _deviation(data["name"], k, v)
                    for k, v in data.get("deviations", {}).items()},
        subprotocols=None if subprotocols is None else tuple(subprotocols),
        websocket_path=websocket.get("path"),
        jobs=data.get("jobs"),
        alone=frozenset(data.get("alone", ())),
    )
