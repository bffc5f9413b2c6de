"""A fuzz campaign: `jobs` workers send inputs from a generator to one broker, each on a
fresh connection with a deadline, and the oracle judges every answer; a liveness check (a
new connection must still get CONNECTED) runs every `check_every` seconds and at once
after an input that ended in a close or a timeout. A failed check, a launched broker's
death or growth, is an outage (outages.py): a crash, hang or leak finding, tied to the
input that causes it where one alone does.

Everything lasting is in the campaign folder (folder.py) the moment it exists: a finding is
saved when found, then confirmed (sent again), minimised and saved again; the state
(counters, and the input number every earlier input is judged below) is saved every two
seconds. A campaign killed at any point resumes from the folder: input N of seed S is the
same input in every run, so a resumed campaign goes on where the last one stopped.

The engine emits CampaignEvents (events.py); the live display and any other reporter
handle them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import random
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from conformance.fuzz.inputs.fuzz_input import FuzzInput
from conformance.fuzz.network.events import (
    CampaignEvent,
    FindingSaved,
    Finished,
    Handler,
    Note,
    Progress,
    Settings,
    Started,
    Stats,
)
from conformance.fuzz.network.findings import (
    BrokerInfo,
    Finding,
    masked,
    new_finding,
    signature,
    worse,
)
from conformance.fuzz.network.folder import (
    MAX_CORPUS,
    MAX_CORPUS_INPUT,
    CampaignDir,
    CampaignDirError,
    CampaignState,
    campaign_id,
)
from conformance.fuzz.network.generators import Generator
from conformance.fuzz.network.minimise import minimise
from conformance.fuzz.network.oracle import (
    Anomaly,
    Judgement,
    Kind,
    Oracle,
    Unreachable,
    grade,
)
from conformance.fuzz.network.outages import Watch
from conformance.fuzz.network.process import BrokerProcess, Resources
from conformance.report.records import timestamp

#: kinds after which the broker may have gone down: check at once
_SUSPICIOUS = frozenset({Kind.CLOSED_VALID, Kind.CLOSED_WITHOUT_ERROR, Kind.TIMEOUT,
                         Kind.NO_RECEIPT})
_SUSPECTS = 16
_SAVE_EVERY = 2.0
#: seconds the end of a campaign waits for an outage's attribution to end
_OUTAGE_GRACE = 600.0


def open_folder(root: Path, *, seed: int | None, broker: BrokerInfo, generator: str,
                versions: Sequence[str], tool_version: str
                ) -> tuple[CampaignDir, CampaignState, bool]:
    """Lock the campaign folder and read or start its state: (folder, state, resumed).
    CampaignDirError when the folder holds another campaign (other seed, broker or
    generator) or a campaign runs in it."""
    folder = CampaignDir(root)
    folder.lock()
    try:
        state = folder.load_state()
        if state is not None:
            clash = []
            if seed is not None and seed != state.seed:
                clash.append(f"seed {state.seed}, not {seed}")
            if state.broker.id != broker.id:
                clash.append(f"broker {state.broker.id}, not {broker.id}")
            if state.generator != generator:
                clash.append(f"generator {state.generator}, not {generator}")
            if clash:
                raise CampaignDirError(f"{root} holds another campaign ({'; '.join(clash)}): "
                                       "resume it with the same settings or use another "
                                       "--corpus")
            state.broker = broker  # the address may move (the embedded broker's port)
            return folder, state, True
        now = timestamp()
        state = CampaignState(campaign=campaign_id(), seed=seed if seed is not None else
                      random.SystemRandom().randrange(1 << 32), broker=broker,
                      generator=generator, versions=tuple(versions), created=now, updated=now,
                      tool_version=tool_version)
        folder.save_state(state)
        return folder, state, False
    except BaseException:
        folder.unlock()
        raise


class Campaign:
    def __init__(self, *, oracle: Oracle, generator: Generator, folder: CampaignDir,
                 state: CampaignState, settings: Settings, resumed: bool = False,
                 passcode: str | None = None, handlers: Sequence[Handler] = (),
                 on_finding: Callable[[list[Finding]], None] | None = None,
                 process: BrokerProcess | None = None,
                 resources: Resources | None = None) -> None:
        self.oracle, self.generator, self.folder = oracle, generator, folder
        self._patient = Oracle(oracle.target, deadline=oracle.deadline * 5,
                               grace=oracle.grace * 5)
        self.state, self.settings, self.resumed = state, settings, resumed
        self.handlers = list(handlers)
        self._passcode = passcode
        self._on_finding = on_finding
        self.findings: dict[str, Finding] = {}
        self._by_signature: dict[tuple[str, ...], str] = {}
        self.corpus: dict[str, FuzzInput] = {}
        self._corpus_list: list[FuzzInput] = []
        self.stats = Stats(budget=settings.budget)
        self._counted_before = replace(state.counters)  # this run's stats are the difference
        self._stop = asyncio.Event()
        self.up = asyncio.Event()
        self._outages = 0
        self.watch = Watch(self, process, resources)
        self._next = state.counters.frontier
        self._in_flight: dict[int, FuzzInput | None] = {}
        self._recent: collections.deque[FuzzInput] = collections.deque(maxlen=_SUSPECTS)
        self._minimising: set[asyncio.Task[None]] = set()
        self._saving: set[asyncio.Task[None]] = set()
        self._write_lock = asyncio.Lock()
        self._hits_changed: set[str] = set()
        self._reason = "time budget"
        self._start = 0.0
        self._end = 0.0
        self._elapsed_before = state.counters.elapsed_s
        self._samples: collections.deque[tuple[float, int]] = collections.deque(maxlen=20)

    # -- events ---------------------------------------------------------------------------

    def emit(self, event: CampaignEvent) -> None:
        for handler in self.handlers:
            handler(event)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def pause(self) -> None:
        """The broker is down: no new input until `up` is set again; the answers to the
        inputs under way are not judged (they tell of the outage, not of themselves)."""
        self.up.clear()
        self._outages += 1

    def stop(self, reason: str = "interrupted") -> None:
        """Stop after the inputs under way (safe to call from a signal handler)."""
        if not self._stop.is_set():
            self._reason = reason
            self._stop.set()

    # -- the run --------------------------------------------------------------------------

    async def run(self) -> list[Finding]:
        """Fuzz for the budget; the findings of the whole campaign. Raises Unreachable
        when the broker does not answer a first liveness check."""
        self.findings = self.folder.load_findings()
        self._by_signature = {f.signature: f.id for f in self.findings.values()}
        self.corpus = self.folder.load_corpus()
        self._corpus_list = list(self.corpus.values())
        why = await self.oracle.alive()
        if why is not None:
            raise Unreachable(why)
        loop = asyncio.get_running_loop()
        self._start = time.monotonic()
        self._end = self._start + self.settings.budget
        self.state.counters.runs += 1
        self._count_findings()
        self._save_state()
        self.up.set()
        self.emit(Started(self.state, self.resumed, len(self.findings), self.settings,
                          self.folder.root))
        for finding in self.findings.values():
            if not finding.minimised and not finding.kind.outage:
                self._spawn_minimiser(finding)  # killed before it was done: do it now
        timer = loop.call_later(self.settings.budget, self.stop, "time budget")
        workers = [asyncio.create_task(self._worker()) for _ in range(self.settings.jobs)]
        chores = [asyncio.create_task(self.watch.checker()), asyncio.create_task(self._ticker())]
        if self.watch.process is not None and self.watch.resources is not None:
            chores.append(asyncio.create_task(self.watch.sampler()))
        try:
            await self._stop.wait()
        finally:
            timer.cancel()
            # Inputs under way get half a second to end; one cut short stays below the
            # frontier and is sent again by the next run.
            await self._drain(workers, 0.5)
            # an outage under way is seen through: its finding tied to its input or not
            await self._drain(chores, _OUTAGE_GRACE if self.watch.busy else 0)
            await self._drain(list(self._minimising), self.settings.deadline + 0.5)
            if self._saving:  # every finding found is written, whatever happens
                await asyncio.wait(list(self._saving))
            self._finish_hits()
            self._save_state()
        findings = sorted(self.findings.values(), key=lambda f: f.found_at)
        self.emit(Finished(self._snapshot(), findings, self._reason))
        return findings

    async def _drain(self, tasks: list[asyncio.Task[None]], grace: float) -> None:
        if tasks and grace > 0:
            await asyncio.wait(tasks, timeout=grace)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _worker(self) -> None:
        while not self._stop.is_set():
            await self.up.wait()
            if self._stop.is_set():
                return
            index = self._next
            self._next += 1
            self._in_flight[index] = None
            done = False
            outages = self._outages
            try:
                fuzz = self.generator.draw(self._rng(index), self._corpus_list)
                self._in_flight[index] = fuzz
                try:
                    judgement = await self.generator.run(self.oracle, fuzz)
                except Unreachable:
                    await self.watch.unreachable()
                    done = True
                    continue
                if outages == self._outages:
                    self._judged(index, fuzz, judgement)
                done = True
            except Exception as error:  # a fault of the fuzzer itself: counted, shown
                done = True
                self.stats.harness_errors += 1
                if self.stats.harness_errors <= 3:
                    self.emit(Note(f"harness error on input {index}: "
                                   f"{type(error).__name__}: {error}"))
            finally:
                if done:  # else cancelled at the end: left for the next run
                    self._in_flight.pop(index, None)

    def _rng(self, index: int) -> random.Random:
        return random.Random(self.state.seed << 40 | index)

    def _judged(self, index: int, fuzz: FuzzInput, judgement: Judgement) -> None:
        counters = self.state.counters
        counters.inputs += 1
        self._recent.append(fuzz)
        if judgement.anomalies:
            counters.anomalies += len(judgement.anomalies)
            for anomaly in judgement.anomalies:
                self._anomaly(anomaly, fuzz, judgement, index)
            if any(a.kind in _SUSPICIOUS for a in judgement.anomalies):
                self.watch.check_now.set()
        self._consider_corpus(fuzz, judgement)

    # -- findings -------------------------------------------------------------------------

    def _anomaly(self, anomaly: Anomaly, fuzz: FuzzInput, judgement: Judgement, index: int,
                 suspects: tuple[FuzzInput, ...] = ()) -> None:
        sig = signature(anomaly)
        known = self.findings.get(self._by_signature.get(sig, ""))
        if known is not None and not worse(grade(anomaly, fuzz), known.grade):
            self.findings[known.id] = known.updated(hits=known.hits + 1)
            self._hits_changed.add(known.id)
            return
        finding = new_finding(
            anomaly, fuzz, generator=self.generator.name,
            response=masked(judgement.response, self._passcode), ended=judgement.ended,
            broker=self.state.broker, campaign=self.state.campaign, seed=self.state.seed,
            index=index, found_at=timestamp(), elapsed=self._elapsed(),
            inputs=self.state.counters.inputs, tool_version=self.state.tool_version,
            suspects=suspects)
        if known is not None:
            # The same bug graded worse (in a version whose statement is stronger): the
            # finding takes this input, to be confirmed and minimised anew.
            finding = finding.updated(
                id=known.id, hits=known.hits + 1, found_at=known.found_at,
                found_after_s=known.found_after_s, found_after_inputs=known.found_after_inputs)
        self._by_signature[sig] = finding.id
        self.findings[finding.id] = finding
        saved = self._keep(self._saving, self._save(finding, new=True))
        if not finding.kind.outage:
            self._spawn_minimiser(finding, after=saved)

    async def _save(self, finding: Finding, *, new: bool) -> None:
        """Write the finding (synced, in a thread: the inputs under way go on), then the
        state and the records; one save at a time, so a later version is written last."""
        self.findings[finding.id] = finding
        async with self._write_lock:
            path = await asyncio.to_thread(self.folder.save_finding, finding)
            self._count_findings()
            self._save_state()
            if self._on_finding is not None:
                await asyncio.to_thread(self._on_finding, list(self.findings.values()))
        self.emit(FindingSaved(finding, path, new))

    @staticmethod
    def _keep(tasks: set[asyncio.Task[None]], job: Coroutine[Any, Any, None]
              ) -> asyncio.Task[None]:
        task = asyncio.create_task(job)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task

    def _spawn_minimiser(self, finding: Finding,
                         after: asyncio.Task[None] | None = None) -> None:
        self._keep(self._minimising, self._confirm_and_minimise(finding.id, after))

    async def _reproduces(self, fuzz: FuzzInput, sig: tuple[str, ...], *,
                          patient: bool = False) -> Judgement | None:
        """The judgement when `fuzz` shows the anomaly of `sig` again, else None. `patient`
        (to confirm): with five times the deadline, so that what a broker slowed by the
        campaign's own load did late is not confirmed as a hang or a connection left open."""
        try:
            judgement = await self.generator.run(self._patient if patient else self.oracle, fuzz)
        except Unreachable:
            return None
        return judgement if any(signature(a) == sig for a in judgement.anomalies) else None

    async def _confirm_and_minimise(self, finding_id: str,
                                    after: asyncio.Task[None] | None) -> None:
        """Send the finding's input again (twice at most): confirmed if it shows again;
        then minimise it within its budget and the campaign's, and save the smallest
        input with the answer it got when it last showed the anomaly."""
        if after is not None:
            await asyncio.shield(after)
        finding = self.findings[finding_id]
        sig, original = finding.signature, finding.input

        def replaced() -> bool:  # by a worse-graded input, which its own task minimises
            return self.findings[finding_id].input is not original

        last = await self._reproduces(finding.input, sig, patient=True) or \
            await self._reproduces(finding.input, sig, patient=True)
        if replaced():
            return
        if last is None or self.settings.minimise <= 0:
            await self._save(self.findings[finding_id].updated(confirmed=last is not None),
                             new=False)
            return
        shown = [last]  # the judgement of the latest input that showed it: minimise's best
        budget = min(self.settings.minimise, max(self._end - time.monotonic(), 0))

        async def reproduces(candidate: FuzzInput) -> bool:
            judgement = await self._reproduces(candidate, sig)
            if judgement is not None:
                shown.append(judgement)
            return judgement is not None

        smallest = await minimise(finding.input, reproduces, budget=budget,
                                  keep=self.generator.keep)
        if replaced():
            return
        judgement = shown[-1]
        anomaly = next(a for a in judgement.anomalies if signature(a) == sig)
        await self._save(self.findings[finding_id].updated(
            confirmed=True, minimised=True, input=smallest, detail=anomaly.detail,
            response=masked(judgement.response, self._passcode), ended=judgement.ended),
            new=False)

    def _finish_hits(self) -> None:
        for finding_id in self._hits_changed:
            with contextlib.suppress(OSError):
                self.folder.save_finding(self.findings[finding_id], sync=False)
        self._hits_changed.clear()

    def _count_findings(self) -> None:
        counts: dict[str, int] = collections.Counter(
            f.grade.value if f.confirmed is not False else "not confirmed"
            for f in self.findings.values())
        self.stats.findings = dict(counts)

    # -- outages (outages.py) -------------------------------------------------------------

    def suspects(self) -> tuple[FuzzInput, ...]:
        """The inputs judged since the last outage (the last few) and those under way,
        in the order they were drawn; the next outage's suspects start afresh."""
        flying = [f for _, f in sorted(self._in_flight.items()) if f is not None]
        recent = list(self._recent)
        self._recent.clear()
        return tuple({id(f): f for f in [*recent, *flying]}.values())

    def outage(self, anomaly: Anomaly, culprit: FuzzInput, *,
               suspects: tuple[FuzzInput, ...], confirmed: bool | None,
               minimised: bool = False) -> None:
        """An outage seen (`confirmed` None: a finding with its suspects, or one more hit
        of a known one), tied to `culprit` (True) or to none of its suspects (False)."""
        sig = signature(anomaly)
        known = self.findings.get(self._by_signature.get(sig, ""))
        if known is None or confirmed is None:
            self._anomaly(anomaly, culprit, Judgement(ended="no CONNECTED"), self._next - 1,
                          suspects=suspects)
            known = self.findings[self._by_signature[sig]]
            if confirmed is None:
                return
        if known.confirmed and not confirmed:
            return  # tied to an input before: keep it
        self._keep(self._saving, self._save(known.updated(
            input=culprit, suspects=suspects, confirmed=confirmed, minimised=minimised,
            detail=anomaly.detail), new=False))

    # -- corpus, state, progress ----------------------------------------------------------

    def _consider_corpus(self, fuzz: FuzzInput, judgement: Judgement) -> None:
        if len(self.corpus) >= MAX_CORPUS or len(fuzz.data) > MAX_CORPUS_INPUT:
            return
        behaviour = (self.generator.name, fuzz.mutation, fuzz.version, judgement.ended,
                     *judgement.commands[:4], *sorted(a.kind.value for a in judgement.anomalies))
        key = hashlib.sha256("\x1f".join(behaviour).encode()).hexdigest()[:16]
        if key in self.corpus:
            return
        self.corpus[key] = fuzz
        self._corpus_list.append(fuzz)
        with contextlib.suppress(OSError):  # a hint: a full disk loses a corpus entry only
            self.folder.add_corpus(key, fuzz, behaviour)

    def _elapsed(self) -> float:
        return time.monotonic() - self._start

    def _frontier(self) -> int:
        return min(self._in_flight) if self._in_flight else self._next

    def _save_state(self) -> None:
        counters = self.state.counters
        counters.frontier = self._frontier()
        if self._start:
            counters.elapsed_s = round(self._elapsed_before + self._elapsed(), 3)
        self.state.updated = timestamp()
        self.folder.save_state(self.state)

    def _snapshot(self) -> Stats:
        stats, counters, before = self.stats, self.state.counters, self._counted_before
        stats.elapsed = self._elapsed()
        stats.inputs = counters.inputs - before.inputs
        stats.checks = counters.checks - before.checks
        stats.unanswered = counters.unanswered - before.unanswered
        stats.total_inputs = counters.inputs
        stats.anomalies = counters.anomalies
        now = time.monotonic()
        self._samples.append((now, stats.inputs))
        first_time, first_count = self._samples[0]
        if now - first_time > 0:
            stats.rate = (stats.inputs - first_count) / (now - first_time)
        return Stats(**{**stats.__dict__, "findings": dict(stats.findings)})

    async def _ticker(self) -> None:
        saved = time.monotonic()
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.tick):
                    await self._stop.wait()
            self.emit(Progress(self._snapshot()))
            if time.monotonic() - saved >= _SAVE_EVERY:
                saved = time.monotonic()
                self._save_state()
