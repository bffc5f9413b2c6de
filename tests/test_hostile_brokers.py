"""The harness against the zoo of hostile brokers (tests/zoo.py), each in a process of its
own: a full catalogue run with --jobs 8 (32, each case cut off at 3 s, against the silent
one), and a short fuzz campaign. Whatever the broker does: no traceback, exit 1 or 3, a
complete and valid JSON report, and the harness's peak RSS under 250 MB (its own high-water
mark, read at exit). The figures are printed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from zoo import ZOO

from conformance.files import read_checked
from conformance.report.json_report import schema
from conformance.scenario import load_cases

HERE = Path(__file__).parent
pytestmark = pytest.mark.slow
PEAK_MB = 250
#: A full run's bound: the slowest is a broker that answers CONNECT and then nothing, where
#: each case waits until its timeout (3 s there: about 25 s with 32 jobs).
WALL_S = 400
#: A fuzz campaign's budget: every input kind has gone out many times, and the hostile
#: broker's worst (floods, endless frames) has reached the harness, in the first seconds.
FUZZ_TIME = "2s"
#: The harness, with its peak RSS (VmHWM) written to stderr as it exits.
MEASURED = """
import atexit, runpy, sys
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            sys.stderr.write(f"\\npeak-rss-kb {line.split()[1]}\\n")
atexit.register(peak)
sys.argv[0] = "stomp-conformance"
runpy.run_module("conformance", run_name="__main__", alter_sys=True)
"""


def case_runs() -> int:
    """The catalogue's case runs over TCP, the zoo's transport."""
    return sum(len(case.versions) for case in load_cases([HERE.parent / "cases"])
               if "tcp" in case.transports)


@pytest.fixture(params=sorted(ZOO))
def hostile(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    peer = subprocess.Popen([sys.executable, str(HERE / "zoo.py"), request.param],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert peer.stdout is not None and peer.stdin is not None
    try:
        yield request.param, int(peer.stdout.readline())
    finally:
        peer.stdin.close()  # it stops when its standard input closes
        peer.wait(30)


def measured(verb: str, hostile: tuple[str, int], *args: str, exits: tuple[int, ...],
             timeout: float, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the CLI's `verb` against the hostile broker (within `timeout` s: its bound),
    print its figures, and check what holds whatever the broker does; its exit code and
    stderr."""
    name, port = hostile
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", MEASURED, verb, "--broker",
                           f"127.0.0.1:{port}", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - started
    assert "peak-rss-kb" in done.stderr, done.stderr[-2000:]
    stderr, _, said = done.stderr.rpartition("\npeak-rss-kb ")
    peak = int(said.split()[0]) / 1024
    with capsys.disabled():
        print(f"\n{name}: {verb} exit {done.returncode}, {wall:.1f} s, peak RSS {peak:.0f} MB")
    assert "Traceback" not in stderr, stderr[-3000:]
    assert done.returncode in exits, stderr[-2000:]
    assert peak < PEAK_MB
    return done.returncode, stderr


def test_a_full_run_against_a_hostile_broker(hostile: tuple[str, int], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.json"
    # a broker that answers CONNECT and then nothing costs each case its waits, not memory:
    # more of them at once, each cut off sooner, keep the run short
    silent = ["--jobs", "32", "--timeout", "3"] if hostile[0] == "connected_then_silent" \
        else ["--jobs", "8"]
    code, stderr = measured("run", hostile, *silent, "--json", str(report), exits=(1, 3),
                            timeout=WALL_S, capsys=capsys)
    cases = read_checked(report, schema(), "a JSON report")["cases"]
    assert len(cases) == case_runs()
    if code == 3:  # the broker never gave a session: one line says why
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("stomp-conformance: "), last
        assert {c["outcome"] for c in cases} == {"error"}


@pytest.mark.heavy
def test_a_fuzz_campaign_against_a_hostile_broker(hostile: tuple[str, int], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus"
    measured("fuzz", hostile, "--time", FUZZ_TIME, "--corpus", str(corpus), exits=(0, 1, 3),
             timeout=120, capsys=capsys)
    for finding in corpus.glob("findings/*.json"):  # each saved whole
        json.loads(finding.read_text())
