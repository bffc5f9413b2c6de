"""Which catalogue a run loaded, and how much of it the run took. A certification verdict
holds only for the whole shipped catalogue (report/verdict.py), so a report names the
catalogue it was given on: the tool's version and a digest of the case files (sha256 over
their relative paths and contents, so a checkout and an installed wheel agree), whether
they are the shipped catalogue, and how many case runs were selected of how many it has."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from conformance import __version__
from conformance.scenario.model import Case

#: How a digest names its algorithm, and how many hex digits its short form keeps.
ALGORITHM = "sha256"
SHORT = 12


def digest(files: Iterable[tuple[str, bytes]]) -> str:
    """'sha256:HEX' over (relative path, contents) pairs, in path order; each part is
    length-prefixed, so no two different sets of files hash alike by running together."""
    hashed = hashlib.new(ALGORITHM)
    for name, data in sorted(files):
        encoded = name.encode("utf-8")
        for part in (encoded, data):
            hashed.update(len(part).to_bytes(8, "big"))
            hashed.update(part)
    return f"{ALGORITHM}:{hashed.hexdigest()}"


def short(value: str) -> str:
    """'sha256:1a2b3c4d5e6f': a digest as a page shows it."""
    algorithm, _, hexdigest = value.partition(":")
    return f"{algorithm}:{hexdigest[:SHORT]}"


def case_runs(cases: Iterable[Case], transport: str) -> set[tuple[str, str]]:
    """(id, version) of each run of `cases` over `transport`, as the engine makes them."""
    return {(case.id, version) for case in cases if transport in case.transports
            for version in case.versions}


@dataclass(frozen=True, slots=True)
class Selection:
    """What a run took of the catalogue it loaded; `whole` is the only case a
    certification verdict is given for."""

    #: the tool's version, whose shipped catalogue it is
    version: str
    digest: str
    #: the case files are the shipped catalogue (no --cases, or --cases within it)
    shipped: bool
    #: every case run of the shipped catalogue over the run's transport was selected
    whole: bool
    selected: int
    #: the case runs the catalogue has over the run's transport
    total: int

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "digest": self.digest, "shipped": self.shipped,
                "whole": self.whole, "selected": self.selected, "total": self.total}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Selection:
        return cls(str(data["version"]), str(data["digest"]), bool(data["shipped"]),
                   bool(data["whole"]), int(data["selected"]), int(data["total"]))


@dataclass(frozen=True, slots=True)
class Catalogue:
    """The cases of the files a run loaded, and those files' digest."""

    cases: tuple[Case, ...]
    digest: str
    shipped: bool = False

    def selection(self, chosen: Iterable[Case], transport: str) -> Selection:
        """What a run of `chosen` (some of `cases`, maybe narrowed to a version) over
        `transport` takes of this catalogue."""
        everything, picked = case_runs(self.cases, transport), case_runs(chosen, transport)
        return Selection(__version__, self.digest, self.shipped,
                         self.shipped and picked == everything, len(picked), len(everything))
