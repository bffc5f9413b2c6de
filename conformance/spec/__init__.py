"""The catalogue of normative statements of STOMP 1.2, and of the 1.0 and 1.1 rules that
differ. The statements live as data in statements.yaml; this module only reads them."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, cast

import yaml

from conformance.spec.grammar import VERSIONS, Version

#: libyaml's safe loader when PyYAML has it (several times faster), else PyYAML's own: for
#: the catalogue and the cases, which every command reads.
YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Level(enum.StrEnum):
    """An RFC 2119 key word, as the statement uses it."""

    MUST = "MUST"
    MUST_NOT = "MUST NOT"
    REQUIRED = "REQUIRED"
    SHALL = "SHALL"
    SHALL_NOT = "SHALL NOT"
    SHOULD = "SHOULD"
    SHOULD_NOT = "SHOULD NOT"
    RECOMMENDED = "RECOMMENDED"
    MAY = "MAY"
    OPTIONAL = "OPTIONAL"

    @property
    def strength(self) -> str:
        """'must', 'should' or 'may': how a broken statement is graded (failed,
        non-strict, informational)."""
        if self in (Level.MUST, Level.MUST_NOT, Level.REQUIRED, Level.SHALL, Level.SHALL_NOT):
            return "must"
        if self in (Level.SHOULD, Level.SHOULD_NOT, Level.RECOMMENDED):
            return "should"
        return "may"


class Party(enum.StrEnum):
    SERVER = "server"
    CLIENT = "client"
    BOTH = "both"


@dataclass(frozen=True, slots=True)
class Statement:
    id: str
    versions: tuple[Version, ...]
    level: Level
    party: Party
    section: str
    quote: str
    #: A test client on the wire can see a broker follow or break it.
    observable: bool
    #: Stated without an RFC 2119 key word (by the grammar, or as plain prose).
    implicit: bool = False
    note: str = ""
    #: A scripted broker can see a client library follow or break it (in what the client
    #: sends, or in what its driver reports the library decoded).
    client_observable: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id, "versions": list(self.versions), "level": self.level.value,
            "party": self.party.value, "section": self.section, "quote": self.quote,
            "observable": self.observable, "implicit": self.implicit, "note": self.note,
            "client_observable": self.client_observable,
        }


class Catalogue:
    """Statements in file order, looked up by id."""

    def __init__(self, statements: Iterable[Statement]) -> None:
        self._by_id: dict[str, Statement] = {}
        for statement in statements:
            if statement.id in self._by_id:
                raise ValueError(f"statement id {statement.id!r} appears twice")
            self._by_id[statement.id] = statement

    def __getitem__(self, statement_id: str) -> Statement:
        return self._by_id[statement_id]

    def __contains__(self, statement_id: object) -> bool:
        return statement_id in self._by_id

    def __iter__(self) -> Iterator[Statement]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def select(self, *, level: str | None = None, party: str | None = None,
               section: str | None = None, version: str | None = None,
               observable: bool | None = None) -> list[Statement]:
        """Statements matching every filter given. `level` takes a key word ('MUST NOT')
        or a strength ('must', 'should', 'may'); `party` 'server' or 'client' includes the
        statements that bind both, 'both' only those; `section` matches case-insensitively
        as a substring of the section heading."""
        chosen = []
        for s in self:
            if level is not None and level.upper() != s.level and level.lower() != s.level.strength:
                continue
            if party is not None and s.party.value not in {party.lower(), Party.BOTH.value}:
                continue
            if section is not None and section.lower() not in s.section.lower():
                continue
            if version is not None and version not in s.versions:
                continue
            if observable is not None and observable != s.observable:
                continue
            chosen.append(s)
        return chosen


def _statement(entry: dict[str, Any]) -> Statement:
    versions = tuple(str(v) for v in entry["versions"])
    unknown = [v for v in versions if v not in VERSIONS]
    if unknown:
        raise ValueError(f"statement {entry['id']!r}: unknown versions {unknown}")
    return Statement(
        id=str(entry["id"]), versions=cast(tuple[Version, ...], versions),
        level=Level(entry["level"]), party=Party(entry["party"]),
        section=str(entry["section"]), quote=str(entry["quote"]),
        observable=bool(entry["observable"]), implicit=bool(entry.get("implicit", False)),
        note=str(entry.get("note", "")),
        client_observable=bool(entry.get("client_observable", False)),
    )


@cache
def catalogue() -> Catalogue:
    """The shipped catalogue (read once)."""
    text = resources.files(__package__).joinpath("statements.yaml").read_text("utf-8")
    return Catalogue(_statement(entry) for entry in yaml.load(text, Loader=YAML_LOADER))


@cache
def statement_id(rule: str, version: str) -> str:
    """The id under which `version` states `rule` (a 1.2 id): the id itself, or the
    `-v11` / `-v10` sibling that holds the older wording."""
    known = catalogue()
    for candidate in (rule, f"{rule}-v11", f"{rule}-v10"):
        if candidate in known and version in known[candidate].versions:
            return candidate
    return rule


def rule_of(statement: str) -> str:
    """The rule a statement id words (the inverse of `statement_id`): the 1.2 id of a
    `-v11` / `-v10` sibling, else the id itself (an older statement with no 1.2 id of its
    name is a rule of its own)."""
    base, dash, suffix = statement.rpartition("-")
    if dash and suffix in ("v11", "v10") and base in catalogue():
        return base
    return statement


__all__ = ["Catalogue", "Level", "Party", "Statement", "catalogue", "rule_of", "statement_id"]
