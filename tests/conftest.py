import functools
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import cli
from hypothesis import HealthCheck, settings
from sharing import KINDS, Scheduling, once, turn

# CI machines are slow and shared: no per-example deadline, more examples than locally.
settings.register_profile("ci", deadline=None, max_examples=300,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers a core, four at most. About two thirds of the suite's time is
    spent waiting (on brokers, deadlines, child processes), which other tests can use."""
    return min(4, 2 * len(os.sched_getaffinity(0)))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> Scheduling:
    return Scheduling(config, log)  # type: ignore[arg-type]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`heavy` tests first and the other slow ones next, so that the longest start early;
    `timing` tests last, when the heavy ones are done; in each, the tests of a module slow
    as a whole (the longest chains: real brokers, builds, the hostile zoo) first. (Every
    worker orders alike.)"""
    def rank(item: pytest.Item) -> tuple[int, bool]:
        kind = 0 if item.get_closest_marker("heavy") else \
            3 if item.get_closest_marker("timing") else \
            1 if item.get_closest_marker("slow") else 2
        marks = getattr(getattr(item, "module", None), "pytestmark", [])
        whole = any(m.name == "slow" for m in (marks if isinstance(marks, list) else [marks]))
        return kind, not whole

    items.sort(key=rank)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    kind = next((k for k in KINDS if item.get_closest_marker(k)), None)
    with turn(item.config, kind):
        yield


@pytest.fixture(scope="session")
def shared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Callable[[str, Callable[[Path], None]], Path]:
    """`shared(name, make)`: the folder `make` filled once for the whole run (sharing.once)."""
    return functools.partial(once, request.config, tmp_path_factory.getbasetemp())


def _broker(*flags: str) -> tuple[subprocess.Popen[str], int]:
    """The reference broker in a child process on a free port: (process, port)."""
    process = subprocess.Popen([sys.executable, "-m", "conformance", "broker", "--port", "0",
                                *flags], stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    line = process.stderr.readline()
    assert "listening on 127.0.0.1:" in line, line
    return process, int(line.rsplit(":", 1)[1].split()[0])


@pytest.fixture(scope="session")
def real_records(shared: Callable[[str, Callable[[Path], None]], Path]) -> Path:
    """Records of two real runs of the header cases on the reference broker: clean, then
    with the trim-headers fault (a regression between them, on one build)."""
    def make(folder: Path) -> None:
        clean = cli("run", "--results", str(folder), "-k", "headers")
        assert clean.returncode == 0, clean.stderr
        process, port = _broker("--fault", "trim-headers")
        try:
            faulty = cli("run", "--broker", f"127.0.0.1:{port}", "--results", str(folder),
                         "-k", "headers")
        finally:
            process.terminate()
            process.wait(timeout=30)
        assert faulty.returncode == 1, faulty.stderr

    return shared("real-records", make)


@pytest.fixture(scope="session")
def local_pipeline(real_records: Path, shared: Callable[[str, Callable[[Path], None]], Path]
                   ) -> Path:
    """`pipeline all --cds` in local mode on `real_records`, run once: its output in out/,
    its class-data archive in cache/ (XDG_CACHE_HOME), what it printed in stdout and
    stderr, its exit code in returncode."""
    def make(folder: Path) -> None:
        done = cli("pipeline", "all", "--input", str(real_records), "--output",
                   str(folder / "out"), "--master", "local[2]", "--cds",
                   env={"XDG_CACHE_HOME": str(folder / "cache")})
        for name, said in (("stdout", done.stdout), ("stderr", done.stderr),
                           ("returncode", str(done.returncode))):
            (folder / name).write_text(said)

    return shared("local-pipeline", make)
