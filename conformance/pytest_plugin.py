"""pytest plugin: `pytest --stomp-broker HOST:PORT cases/` collects every YAML case as an
item per STOMP version and runs it through the same engine as the command line. Given no
paths (and no `testpaths` in an ini file), it collects the shipped catalogue, as `run` does
with no --cases: `pytest --stomp-broker HOST:PORT -m must` is a broker's gate.

A failure is reported at the case's YAML line with the statement broken, expected vs
observed, and the end of the transcript. Items carry markers for their level (`must`,
`should`, `may`) and their area (`escaping`, `heart-beat`, ...), so `-m must` works.
Options: command line > ini file (`stomp_broker`, `stomp_profile`) > default.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.profiles import ProfileError, load_profile
from conformance.runner.engine import Engine, run_case
from conformance.runner.results import CaseResult, Outcome
from conformance.scenario import Case, CaseLoadError, load_file, shipped_catalogue
from conformance.scenario.loader import is_client_file
from conformance.spec import catalogue
from conformance.wire.target import HarnessError, Target
from conformance.wire.transport import parse_broker

TAIL = 12  # transcript records shown under a failure


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("stomp", "STOMP conformance cases")
    group.addoption("--stomp-broker", help="run YAML cases against this broker (HOST:PORT "
                    "or URL): those of the paths given, or with none the shipped "
                    "catalogue; without it, YAML files are not collected")
    group.addoption("--stomp-profile", help="broker profile: a shipped name or a YAML file")
    group.addoption("--stomp-login")
    group.addoption("--stomp-passcode")
    group.addoption("--stomp-timeout", type=float, default=30.0, help="seconds per case")
    parser.addini("stomp_broker", "default for --stomp-broker")
    parser.addini("stomp_profile", "default for --stomp-profile", default="reference")


def _option(config: pytest.Config, name: str) -> Any:
    return config.getoption(f"--stomp-{name}") or config.getini(f"stomp_{name}") or None


def pytest_configure(config: pytest.Config) -> None:
    for level, text in (("must", "MUST"), ("should", "SHOULD"), ("may", "MAY")):
        config.addinivalue_line("markers", f"{level}: STOMP cases of {text} statements")
    broker = _option(config, "broker")
    if not broker:
        return
    try:
        target = Target(parse_broker(broker), load_profile(_option(config, "profile")),
                        login=config.getoption("--stomp-login"),
                        passcode=config.getoption("--stomp-passcode"))
        asyncio.run(Engine(target).preflight())
    except (ValueError, ProfileError) as error:
        raise pytest.UsageError(str(error)) from None
    except HarnessError as error:
        pytest.exit(str(error), returncode=3)
    config.stash[TARGET] = target
    # No paths given (nor testpaths): pytest would collect the invocation folder, nothing
    # in an empty one. The gate is the shipped catalogue instead, as for `run` without
    # --cases. pytest_collect_file and pytest_collection_modifyitems only see what the
    # paths collect, so the catalogue's folder becomes the path (pytest's documented
    # `Config.args`, whose `args_source` says no path was given): the session reads it
    # when it collects, after pytest_configure, and -m, -k and the rest select among its
    # items as among any path's. xdist's workers parse the same command line and come
    # here too. Only with a broker: a run of another project never collects STOMP cases.
    if config.args_source == pytest.Config.ArgsSource.INVOCATION_DIR:
        config.args = [str(shipped_catalogue())]


TARGET = pytest.StashKey[Target]()


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    # broker cases only: client cases (in a folder named `clients`) are `clients`' to run
    if file_path.suffix not in (".yaml", ".yml") or TARGET not in parent.config.stash:
        return None
    catalogue_folder = shipped_catalogue()
    root = catalogue_folder if file_path.is_relative_to(catalogue_folder) \
        else parent.config.rootpath
    if is_client_file(file_path, root):
        return None
    return CaseFile.from_parent(parent, path=file_path)


class CaseFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        try:
            cases = load_file(self.path)
        except CaseLoadError as error:
            raise self.CollectError(str(error)) from None
        for case in cases:
            self.config.addinivalue_line("markers", f"{case.area}: STOMP cases of that area")
            for version in case.versions:
                item = CaseItem.from_parent(self, name=f"{case.id}[{version}]", case=case,
                                            version=version)
                item.add_marker(case.level)
                item.add_marker(case.area)
                yield item


class CaseFailed(Exception):
    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.message)
        self.result = result


class CaseItem(pytest.Item):
    def __init__(self, *, case: Case, version: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case, self.version = case, version

    def runtest(self) -> None:
        target = self.config.stash[TARGET]
        result, _ = asyncio.run(run_case(self.case, self.version, target,
                                         timeout=self.config.getoption("--stomp-timeout"),
                                         run_id=f"{id(self.session):x}"[-8:]))
        self.user_properties.append(("outcome", result.outcome.value))
        if result.outcome in (Outcome.FAILED, Outcome.ERROR):
            raise CaseFailed(result)
        if result.outcome in (Outcome.UNSUPPORTED, Outcome.SKIPPED):
            pytest.skip(result.message)
        if result.outcome == Outcome.KNOWN_DEVIATION:
            pytest.xfail(result.deviation)
        if result.outcome == Outcome.NON_STRICT:
            warnings.warn(f"{self.case.id} [{self.version}]: SHOULD broken: {result.message}",
                          stacklevel=1)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if not isinstance(excinfo.value, CaseFailed):
            return str(super().repr_failure(excinfo))
        r = excinfo.value.result
        lines = [f"{r.file}:{r.step_line or r.line}: {r.outcome.value}: {r.id} "
                 f"[STOMP {r.version}]"]
        if r.statement and r.statement in catalogue():
            statement = catalogue()[r.statement]
            lines.append(f"  {statement.id} ({statement.level.value}): {statement.quote}")
        if r.expected:
            lines += [f"  expected: {r.expected}", f"  observed: {r.observed}"]
        else:
            lines.append(f"  {r.message}")
        lines += [f"  also: {v}" for v in r.violations[:5]]
        if r.transcript:
            from conformance.report.rendering import render_record
            lines.append("  transcript (end):")
            lines += ["    " + render_record(rec) for rec in r.transcript[-TAIL:]]
        return "\n".join(lines)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, f"{self.case.id} [STOMP {self.version}]"
