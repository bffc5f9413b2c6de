"""How the suite's tests share the machine when pytest-xdist runs them in several workers.

- `Scheduling`: the tests of a module in WHOLE_MODULES (they share a costly module- or
  session-scoped fixture: a build, a Spark session or cluster, runs several tests read) go
  to one worker, as do the tests whose parameter id starts with the same `GROUP:` (the runs
  against one broker, which their worker starts once); any other test goes alone to
  whichever worker is free. (xdist's own xdist_group mark does not reach pytest 9's node
  ids.)
- `turn(config, kind)`: a test marked `timing` (its verdict reads wall-clock time:
  heart-beat intervals, answers awaited against a deadline, a fuzz budget) never runs
  beside one marked `heavy` (it keeps the cores busy: Spark, compilers), and the other way
  round; tests of one kind run side by side, and unmarked tests beside anything. Each test
  of a kind holds a shared lock on its kind's file while it runs (setup and teardown
  included); to start, it waits, holding the run's turnstile, until it can lock the other
  kind's file exclusively, that is until none of the other kind runs.
- `once(name, make)`: work several tests read (a self-test's results, a run's records) is
  done by the first worker that needs it, in a folder the others then read.

Both work through files in the run's own folder, flock'd (fcntl); without xdist there is one
process and no other test to wait for."""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

#: the modules whose tests run on one worker, with what they share
WHOLE_MODULES = {
    "test_compiled.py": "the mypyc build",
    "test_coverage_build.py": "the coverage build",
    "test_pipeline.py": "a SparkSession",
    "test_pipeline_cluster.py": "a standalone Spark cluster",
    "test_html_report.py": "runs and a browser",
    "test_client_reports.py": "client runs",
}


def scope(nodeid: str) -> str:
    """The unit of work that goes to one worker, for a test of this node id."""
    path, _, name = nodeid.partition("::")
    if Path(path).name in WHOLE_MODULES:
        return path
    param = name.partition("[")[2]
    if ":" in param:
        return f"{path}[{param.partition(':')[0]}]"
    return nodeid


class Scheduling(LoadScopeScheduling):
    """xdist's scheduling by scope, with this suite's scopes."""

    def _split_scope(self, nodeid: str) -> str:
        return scope(nodeid)


def run_folder(config: pytest.Config) -> Path | None:
    """The folder every worker of this run shares, or None without xdist."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    folder = Path(tempfile.gettempdir()) / f"stomp-conformance-tests-{workerinput['testrunuid']}"
    folder.mkdir(exist_ok=True)
    return folder


@contextlib.contextmanager
def _locked(path: Path, mode: int) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


KINDS = ("timing", "heavy")


@contextlib.contextmanager
def turn(config: pytest.Config, kind: str | None) -> Iterator[None]:
    """Hold this test's turn: for a `timing` or `heavy` test, none of the other kind runs
    meanwhile."""
    folder = run_folder(config)
    if folder is None or kind is None:
        yield
        return
    other = KINDS[1 - KINDS.index(kind)]
    with contextlib.ExitStack() as held:
        with _locked(folder / "turnstile", fcntl.LOCK_EX):
            held.enter_context(_locked(folder / kind, fcntl.LOCK_SH))
            with _locked(folder / other, fcntl.LOCK_EX):
                pass  # none of the other kind runs now, and none starts before this one
        yield


def once(config: pytest.Config, base: Path, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `make` filled for `name` in this run, made by whichever worker asks first
    (`base`: this process's temporary folder, used without xdist). A `make` that raised
    leaves nothing behind: the next test to ask tries again, and fails the same way."""
    root = run_folder(config) or base
    folder, made = root / f"once-{name}", root / f"once-{name}.made"
    with _locked(root / f"once-{name}.lock", fcntl.LOCK_EX):
        if not made.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            made.touch()
    return folder
