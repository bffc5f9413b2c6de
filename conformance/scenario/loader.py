"""Reading case files: YAML, validated against the shipped JSON Schema before anything
runs, statement ids and variables checked. Every error names the file and the line.

Two kinds of case share the format: broker cases (case.schema.json) and client cases
(client-case.schema.json), which script the broker's side for a client library under test.
Client cases live in folders named `clients`: walking a folder, `load_cases` takes the
one kind and leaves the other."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from conformance.scenario.catalogue import Catalogue, digest
from conformance.scenario.model import (
    BUILTIN_VARIABLES,
    CLIENT_FOLDER,
    CLIENT_VARIABLES,
    TOPIC_SUFFIX,
    TRANSPORTS,
    Case,
    Step,
    strongest,
)
from conformance.spec import YAML_LOADER, catalogue

VARIABLE = re.compile(r"\$\{([^}]*)\}")

Path_ = tuple[str | int, ...]


class CaseLoadError(Exception):
    """A case file that cannot be used: `file:line: what is wrong`."""

    def __init__(self, file: Path | str, line: int | None, message: str) -> None:
        self.file, self.line, self.message = str(file), line, message
        super().__init__(f"{file}:{line}: {message}" if line else f"{file}: {message}")


def _read_schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        resources.files("conformance.scenario").joinpath(name).read_text())
    return loaded


@cache
def schema(*, client: bool = False) -> dict[str, Any]:
    """The schema of broker cases, or of client cases (which share the broker schema's
    matchers, header lists and durations: its $defs under the client schema's own)."""
    broker = _read_schema("case.schema.json")
    if not client:
        return broker
    own = _read_schema("client-case.schema.json")
    return {**own, "$defs": {**broker["$defs"], **own["$defs"]}}


def _lines(node: yaml.Node, path: Path_, out: dict[Path_, int]) -> None:
    """Map every path in the document to the line where its node starts."""
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _lines(value, (*path, str(key.value)), out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _lines(item, (*path, index), out)


def _line(lines: dict[Path_, int], path: Iterable[str | int]) -> int | None:
    """The line of `path`, or of its nearest ancestor that has one."""
    parts = tuple(path)
    while parts not in lines and parts:
        parts = parts[:-1]
    return lines.get(parts)


def _read(file: Path) -> tuple[bytes, str]:
    """A case file's octets (for the catalogue's digest) and its text, line ends read as
    `Path.read_text` reads them."""
    try:
        data = file.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CaseLoadError(file, None, f"cannot read: {error}") from None
    return data, text.replace("\r\n", "\n").replace("\r", "\n")


def load_file(file: Path, *, client: bool = False) -> list[Case]:
    """The cases of one file: broker cases, or client cases if `client`."""
    return _parse(file, _read(file)[1], client=client)


def _parse(file: Path, text: str, *, client: bool) -> list[Case]:
    loader = YAML_LOADER(text)  # one parse: the nodes give line numbers, then the data
    try:
        node = loader.get_single_node()
        data: Any = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise CaseLoadError(file, mark.line + 1 if mark else None,
                            f"YAML syntax: {problem}") from None
    finally:
        loader.dispose()
    if node is None:
        raise CaseLoadError(file, None, "empty file: expected a case or a list of cases")
    lines: dict[Path_, int] = {}
    _lines(node, (), lines)
    errors = sorted(jsonschema.Draft202012Validator(schema(client=client)).iter_errors(data),
                    key=lambda e: len(e.absolute_path), reverse=True)
    if errors:
        worst = jsonschema.exceptions.best_match(errors)
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                        for p in worst.absolute_path).lstrip(".") or "top level"
        raise CaseLoadError(file, _line(lines, worst.absolute_path),
                            f"{where}: {worst.message}")
    builtin = CLIENT_VARIABLES if client else BUILTIN_VARIABLES
    entries = [(data, ())] if isinstance(data, dict) else [
        (entry, (index,)) for index, entry in enumerate(data)]
    return [run for entry, at in entries
            for run in _per_destination(entry, _case(entry, at, file, lines, builtin),
                                        file, _line(lines, (*at, "destinations")))]


def _per_destination(entry: dict[str, Any], case: Case, file: Path,
                     line: int | None) -> list[Case]:
    """The case once per kind of destination its `destinations:` names: the queue run as
    written, the topic run a case of its own (model.DESTINATION_KINDS)."""
    kinds = entry.get("destinations", ["queue"])
    if "topic" in kinds and "queues" in case.requires:
        raise CaseLoadError(file, line, "a case on topics cannot require queues: a topic "
                            "keeps no message for a later subscriber")
    topic = replace(case, id=case.id + TOPIC_SUFFIX, title=f"{case.title} (on a topic)",
                    requires=(*case.requires, "topics"), destination="topic")
    return [case if kind == "queue" else topic for kind in kinds]


def _case(entry: dict[str, Any], at: Path_, file: Path, lines: dict[Path_, int],
          builtin: frozenset[str]) -> Case:
    known = catalogue()
    versions = tuple(entry["versions"])
    strengths = []
    for index, statement_id in enumerate(entry["statements"]):
        line = _line(lines, (*at, "statements", index))
        if statement_id not in known:
            raise CaseLoadError(file, line, f"unknown statement {statement_id!r} "
                                "(see `stomp-conformance spec`)")
        statement = known[statement_id]
        if not set(versions) & set(statement.versions):
            raise CaseLoadError(file, line, f"statement {statement_id!r} is not part of "
                                f"STOMP {', '.join(versions)} "
                                f"(it is {', '.join(statement.versions)})")
        strengths.append(statement.level.strength)
    level = entry.get("level") or strongest(strengths)
    defined = set(builtin)
    steps = []
    for index, raw in enumerate(entry["steps"]):
        step_at = (*at, "steps", index)
        named = tuple(raw.get("statements", ()))
        (kind, args), = ((k, v) for k, v in raw.items() if k != "statements")
        _check_named(named, versions, file, _line(lines, step_at))
        for n, alternative in enumerate(args if kind == "expect_any" else ()):
            _check_named(tuple(alternative.get("statements", ())), versions, file,
                         _line(lines, (*step_at, kind, n)))
        for path, text in _strings(args, (*step_at, kind)):
            for name in VARIABLE.findall(text):
                if name not in defined:
                    raise CaseLoadError(file, _line(lines, path),
                                        f"unknown variable ${{{name}}} (defined here: "
                                        f"{', '.join(sorted(defined))})")
            if path[-1] == "regex":
                try:
                    re.compile(VARIABLE.sub("x", text))
                except re.error as error:
                    raise CaseLoadError(file, _line(lines, path),
                                        f"bad regex {text!r}: {error}") from None
        defined |= set(_captures(kind, args))
        steps.append(Step(kind, {} if args is None else args, _line(lines, step_at) or 0,
                          named))
    return Case(id=entry["id"], title=entry["title"], statements=tuple(entry["statements"]),
                versions=versions, level=level, tags=tuple(entry.get("tags", ())),
                requires=tuple(entry.get("requires", ())), timeout=entry.get("timeout"),
                steps=tuple(steps), file=str(file), line=_line(lines, at) or 1,
                transports=tuple(entry.get("transports", TRANSPORTS)),
                fixed_level=entry.get("level"))


def _check_named(named: tuple[str, ...], versions: tuple[str, ...], file: Path,
                 line: int | None) -> None:
    """A step's `statements` are known, and at each version of its case one of them is part
    of it: a failure is always graded by a statement of its version. They may be other
    than the case's: a step waiting for the RECEIPT its case needs checks the receipt rule,
    not the case's subject."""
    if not named:
        return
    known = catalogue()
    unknown = [s for s in named if s not in known]
    if unknown:
        raise CaseLoadError(file, line, f"step names unknown statement {unknown[0]!r} "
                            "(see `stomp-conformance spec`)")
    missing = [v for v in versions if not any(v in known[s].versions for s in named)]
    if missing:
        raise CaseLoadError(file, line, f"step names no statement of STOMP "
                            f"{', '.join(missing)} (the case runs at it)")


def _strings(value: Any, path: Path_) -> Iterator[tuple[Path_, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))


def _captures(kind: str, args: Any) -> Iterator[str]:
    """Variables a step defines: `capture` maps of its frame matchers."""
    if kind == "expect_any":
        for alternative in args:
            for key in ("expect", "expect_error_close", "expect_frame", "expect_event"):
                yield from (alternative.get(key) or {}).get("capture", {})
    elif isinstance(args, dict):
        yield from args.get("capture", {})


def shipped_catalogue() -> Path:
    """The shipped catalogue: cases/ beside the package in a checkout, conformance/cases in
    an installed wheel (pyproject.toml maps one onto the other). `run` and the pytest plugin
    take it when given no cases."""
    package = Path(__file__).resolve().parent.parent
    checkout = package.parent / "cases"
    return checkout if checkout.is_dir() else package / "cases"


def is_client_file(file: Path, root: Path) -> bool:
    """Whether `file`, found under `root`, holds client cases: it is in a folder named
    `clients` below `root` (or `root` is that folder)."""
    try:
        parts = file.relative_to(root.parent).parts[:-1]
    except ValueError:
        parts = file.parts[:-1]
    return CLIENT_FOLDER in parts


def _named_files(paths: Iterable[Path], *, client: bool) -> Iterator[tuple[str, Path]]:
    """Each YAML file of `paths` with its name relative to the path given (a file given
    alone: its name), which the catalogue's digest covers."""
    for path in paths:
        if path.is_dir():
            yield from sorted((p.relative_to(path).as_posix(), p) for p in path.rglob("*")
                              if p.suffix in (".yaml", ".yml")
                              and is_client_file(p, path) == client)
        elif path.exists():
            yield path.name, path
        else:
            raise CaseLoadError(path, None, "no such file or folder")


def case_files(paths: Iterable[Path], *, client: bool = False) -> list[Path]:
    """The YAML files of `paths`: a file as given, a folder's files of the kind asked for
    (client cases: those under a folder named `clients`, the folder itself included)."""
    return [file for _, file in _named_files(paths, client=client)]


def load_catalogue(paths: Iterable[Path], *, client: bool = False,
                   shipped: bool = False) -> Catalogue:
    """Every case under `paths` (files or folders), in a stable order (ids are unique),
    with the digest of the files read; `client`: the client cases there, not the broker
    cases; `shipped`: `paths` are the shipped catalogue."""
    cases: list[Case] = []
    seen: dict[str, Case] = {}
    read: list[tuple[str, bytes]] = []
    for name, file in _named_files(paths, client=client):
        data, text = _read(file)
        read.append((name, data))
        for case in _parse(file, text, client=client):
            if case.id in seen:
                first = seen[case.id]
                raise CaseLoadError(file, case.line, f"case id {case.id!r} is already used at "
                                    f"{first.file}:{first.line}")
            seen[case.id] = case
            cases.append(case)
    return Catalogue(tuple(sorted(cases, key=lambda c: c.id)), digest(read), shipped)


def load_cases(paths: Iterable[Path], *, client: bool = False) -> list[Case]:
    """The cases of load_catalogue alone."""
    return list(load_catalogue(paths, client=client).cases)
