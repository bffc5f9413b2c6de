"""The broker's process, when a campaign starts it itself (`fuzz --launch CMD`): started in a
session of its own (so that stopping it stops everything it started), its log kept, its
process tree sampled, and started again after it died or hung. `Resources` is the resource
oracle: it reads the samples and says when the broker has grown past a threshold over a
window without coming back. What a crash looked like is read off the broker's log
(`crash_line`): the error it printed is what tells one crash from another."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

#: seconds a stopped broker gets to end after SIGTERM before SIGKILL
_STOP_GRACE = 5.0
_LOG_TAIL = 64 * 1024


class LaunchError(Exception):
    """The broker's command did not bring up a broker (one line, for the user)."""


@dataclass(frozen=True)
class Sample:
    """The broker's process tree at one moment: RSS (octets), CPU time (seconds), open file
    descriptors, threads, processes."""

    at: float
    rss: int
    cpu: float
    fds: int
    threads: int
    processes: int


def sample_tree(pid: int) -> Sample | None:
    """The process `pid` and its descendants, summed; None when it is gone."""
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    rss = fds = threads = 0
    cpu = 0.0
    for process in tree:
        with contextlib.suppress(psutil.Error):
            with process.oneshot():
                rss += process.memory_info().rss
                times = process.cpu_times()
                cpu += times.user + times.system
                fds += process.num_fds()
                threads += process.num_threads()
    return Sample(time.monotonic(), rss, cpu, fds, threads, len(tree))


class BrokerProcess:
    """`command` (a shell command line that runs the broker in the foreground) as a child
    in a session of its own, its output appended to `log`. `ready` answers None once the
    broker takes connections (else why not)."""

    def __init__(self, command: str, log: Path,
                 ready: Callable[[], Awaitable[str | None]], *, timeout: float = 180.0) -> None:
        self.command, self.log, self.ready, self.timeout = command, log, ready, timeout
        self.starts = 0
        self._child: subprocess.Popen[bytes] | None = None
        self._log_from = 0

    @property
    def pid(self) -> int | None:
        return None if self._child is None else self._child.pid

    def exited(self) -> int | None:
        """The exit status once the broker's process has ended (-N: killed by signal N)."""
        return None if self._child is None else self._child.poll()

    async def start(self) -> float:
        """Start the broker and wait until it takes connections: the seconds that took.
        LaunchError when it exits first or is not ready within the timeout."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self._log_from = out.tell()
            self.starts += 1
            out.write(f"\n== start {self.starts}: {self.command}\n".encode())
            out.flush()
            self._child = subprocess.Popen(self.command, shell=True, stdin=subprocess.DEVNULL,
                                           stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True)
        began = time.monotonic()
        why: str | None = "not tried"
        while time.monotonic() - began < self.timeout:
            status = self.exited()
            if status is not None:
                raise LaunchError(f"the broker's command exited with status {status}: "
                                  f"{self.last_line() or 'no output'} (log: {self.log})")
            why = await self.ready()
            if why is None:
                return time.monotonic() - began
            await asyncio.sleep(0.5)
        await self.stop()
        raise LaunchError(f"the broker took no connection within {self.timeout:g} s: {why} "
                          f"(log: {self.log})")

    async def stop(self, *, kill: bool = False) -> None:
        """End the broker's whole session: SIGTERM, then SIGKILL after a grace period
        (at once with `kill`: a hung broker would not end by itself)."""
        child = self._child
        if child is None:
            return
        signals = ((signal.SIGTERM, _STOP_GRACE),) if not kill else ()
        for signum, wait in (*signals, (signal.SIGKILL, _STOP_GRACE)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signum)
            ended = time.monotonic() + wait
            while time.monotonic() < ended and _group_alive(child.pid):
                child.poll()
                await asyncio.sleep(0.1)
            if not _group_alive(child.pid):
                break
        child.poll()

    async def restart(self, *, kill: bool = False) -> float:
        await self.stop(kill=kill)
        return await self.start()

    def sample(self) -> Sample | None:
        pid = self.pid
        return None if pid is None or self.exited() is not None else sample_tree(pid)

    def output(self) -> str:
        """What the broker printed since its last start (its last 64 KiB)."""
        try:
            with self.log.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(self._log_from, size - _LOG_TAIL))
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def last_line(self) -> str:
        lines = [line.strip() for line in self.output().splitlines() if line.strip()]
        return lines[-1][:200] if lines else ""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie leader alone is no broker: the group is alive while any member runs
    return any(_runs(p) for p in psutil.process_iter(["pid"]) if _in_group(p, pgid))


def _in_group(process: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(process.pid) == pgid
    except OSError:
        return False


def _runs(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


#: a line that names an error: an exception's class, a fatal signal, a panic
_ERROR = re.compile(r"\b([A-Z][A-Za-z0-9_.]*(Error|Exception)\b|Segmentation fault|Aborted|"
                    r"panic|FATAL|fatal error|Killed)")
#: what changes from one run of the same crash to the next
_VARYING = [(re.compile(r"0x[0-9a-fA-F]+|\d+"), "#"), (re.compile(r"/[^\s:'\"()]*/"), "…/")]
#: quoted text: a name in single quotes (`reading 'substr'`) tells crashes apart; the
#: input's octets (`"hello" is not valid JSON`) do not
_QUOTED = re.compile(r"(['\"])(.*?)\1")
_NAME = re.compile(r"[A-Za-z_$][\w$.]{2,}")


#: the first frame of a stack printed after an error: Node's `at f (file:line:col)`, Python's
#: `File "...", line N`, Ruby's `file:line:in`, Java's `at pkg.Class.method(File.java:N)`
_FRAME = re.compile(r"^\s*(at .+|File \".+\", line \d+.*|\S+:\d+:in .+)$")


def crash_site(output: str) -> str:
    """Where the broker's last error was raised, as its stack's first frame says (a Python
    traceback's last), or "" when it printed none."""
    lines = output.splitlines()
    errors = [n for n, line in enumerate(lines) if _ERROR.search(line)]
    if not errors:
        return ""
    last = errors[-1]
    after = [line.strip() for line in lines[last + 1:last + 8] if _FRAME.match(line)]
    if after:
        return after[0][:200]
    before = [line.strip() for line in lines[max(last - 8, 0):last] if _FRAME.match(line)]
    return before[-1][:200] if before else ""


def crash_line(output: str, status: int | None) -> str:
    """What tells this crash from another: the last line of the broker's output that names an
    error, its numbers and paths blanked (they change from one run to the next); else how
    the process ended."""
    lines = [line.strip() for line in output.splitlines() if _ERROR.search(line)]
    if lines:
        line = _QUOTED.sub(lambda m: m[0] if m[1] == "'" and _NAME.fullmatch(m[2])
                           else f"{m[1]}…{m[1]}", lines[-1])
        for pattern, blank in _VARYING:
            line = pattern.sub(blank, line)
        return line[:160]
    if status is None:
        return "alive, not answering"
    return f"killed by signal {-status}" if status < 0 else f"exit status {status}"


@dataclass(frozen=True)
class Growth:
    """What grew past its threshold: the resource, by how much, over which window."""

    resource: str
    baseline: float
    now: float
    window: float

    def __str__(self) -> str:
        if self.resource == "rss":
            return (f"RSS grew from {self.baseline / 2**20:.0f} MiB to "
                    f"{self.now / 2**20:.0f} MiB and stayed above for {self.window:g} s")
        return (f"{self.resource} grew from {self.baseline:.0f} to {self.now:.0f} and "
                f"stayed above for {self.window:g} s")


@dataclass(frozen=True)
class Thresholds:
    """Growth over the baseline that counts as a leak when it lasts a whole window."""

    rss: int = 512 * 2**20
    fds: int = 1000
    threads: int = 500
    window: float = 30.0


class Resources:
    """The resource oracle: samples of one broker process (from each start on), its
    baseline (the lowest since the start: what the broker needs), its peaks, and `leak`,
    the growth that has stayed past a threshold for a whole window."""

    def __init__(self, thresholds: Thresholds) -> None:
        self.thresholds = thresholds
        self.samples: collections.deque[Sample] = collections.deque(maxlen=4096)
        self.baseline: Sample | None = None
        self.peak = {"rss": 0, "fds": 0, "threads": 0}
        self.cpu_before = 0.0  # CPU seconds of the processes earlier starts ran
        self.cpu = 0.0

    def restarted(self) -> None:
        self.cpu_before = self.cpu
        self.samples.clear()
        self.baseline = None

    def add(self, sample: Sample) -> Growth | None:
        self.samples.append(sample)
        self.cpu = self.cpu_before + sample.cpu
        base = self.baseline
        self.baseline = sample if base is None else Sample(
            base.at, min(base.rss, sample.rss), 0.0, min(base.fds, sample.fds),
            min(base.threads, sample.threads), 0)
        for name in self.peak:
            self.peak[name] = max(self.peak[name], getattr(sample, name))
        return self.leak()

    def leak(self) -> Growth | None:
        """The first resource that stayed above baseline + threshold for the window."""
        base, limits = self.baseline, self.thresholds
        if base is None or not self.samples:
            return None
        since = self.samples[-1].at - limits.window
        if self.samples[0].at > since:
            return None  # not sampled for a whole window yet
        window = [s for s in self.samples if s.at >= since]
        for name, limit in (("rss", limits.rss), ("fds", limits.fds),
                            ("threads", limits.threads)):
            floor = getattr(base, name) + limit
            if all(getattr(s, name) > floor for s in window):
                return Growth(name, getattr(base, name), getattr(window[-1], name),
                              limits.window)
        return None

    def summary(self) -> dict[str, float | int]:
        base = self.baseline
        return {"baseline_rss": base.rss if base else 0, "peak_rss": self.peak["rss"],
                "peak_fds": self.peak["fds"], "peak_threads": self.peak["threads"],
                "cpu_s": round(self.cpu, 2)}
