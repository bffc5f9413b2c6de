"""What befalls the broker as a whole during a campaign: liveness checks (a new connection
must still get CONNECTED), and, for a broker the campaign launched (process.py), its death,
its hangs and its growth, sampled by the resource oracle.

When the broker goes down the workers pause; the outage is saved at once as a finding with
its suspects (the inputs under way and the last ones judged); the broker is started again
(or, when the campaign did not launch it, awaited); then each suspect is sent alone, newest
first, until one brings the broker down again: the finding is then confirmed with that
input (and, for a launched broker, minimised: each try that brings it down starts it
again). A finding no suspect reproduces alone stays unattributed, with its suspects.

A crash is told from another by what the broker printed as it died (`crash_line`); a hang
is a process that lives but takes no connection for `recovery` seconds; a leak, growth past
a threshold that lasts a window (`Resources`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Protocol

from conformance.fuzz.inputs.fuzz_input import FuzzInput
from conformance.fuzz.network.events import CampaignEvent, Note, Settings
from conformance.fuzz.network.findings import signature
from conformance.fuzz.network.folder import CampaignState
from conformance.fuzz.network.generators import Generator
from conformance.fuzz.network.minimise import minimise
from conformance.fuzz.network.oracle import Anomaly, Kind, Oracle, Unreachable
from conformance.fuzz.network.process import (
    BrokerProcess,
    LaunchError,
    Resources,
    crash_line,
    crash_site,
)
from conformance.spec import statement_id

#: seconds between samples of a launched broker's process
SAMPLE_EVERY = 0.5


class Host(Protocol):
    """What the watch needs of its campaign."""

    oracle: Oracle
    generator: Generator
    settings: Settings
    state: CampaignState
    up: asyncio.Event

    @property
    def stopping(self) -> bool: ...
    def pause(self) -> None: ...
    def stop(self, reason: str) -> None: ...
    def emit(self, event: CampaignEvent) -> None: ...
    def suspects(self) -> tuple[FuzzInput, ...]: ...
    def outage(self, anomaly: Anomaly, culprit: FuzzInput, *,
               suspects: tuple[FuzzInput, ...], confirmed: bool | None,
               minimised: bool = False) -> None: ...


class Watch:
    def __init__(self, host: Host, process: BrokerProcess | None = None,
                 resources: Resources | None = None) -> None:
        self.host, self.process, self.resources = host, process, resources
        self.check_now = asyncio.Event()
        self._lock = asyncio.Lock()
        self._last_check = 0.0

    @property
    def busy(self) -> bool:
        """Whether an outage is being handled (or a check made)."""
        return self._lock.locked()

    # -- checks ---------------------------------------------------------------------------

    async def alive(self) -> str | None:
        """None when a new connection gets CONNECTED, else why not. One retry, unless the
        campaign launched the broker: `_what_happened` then waits for it to answer again."""
        counters = self.host.state.counters
        attempts = 1 if self.process is not None else 2
        for attempt in range(attempts):
            if self._exited() is not None:
                return "its process ended"
            counters.checks += 1
            why = await self.host.oracle.alive()
            if why is None:
                self.host.state.server = self.host.oracle.server or self.host.state.server
                return None
            counters.failed_checks += 1
            if attempt + 1 < attempts:
                await asyncio.sleep(0.2)
        return why

    async def checker(self) -> None:
        """Checks every `check_every` seconds, and at once after a suspicious input."""
        host = self.host
        while not host.stopping:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(host.settings.check_every):
                    await self.check_now.wait()
            # not more than ten times a second: a check is a connection the broker pays for
            await asyncio.sleep(max(self._last_check + 0.1 - time.monotonic(), 0))
            self.check_now.clear()
            self._last_check = time.monotonic()
            async with self._lock:
                if not host.up.is_set():
                    continue
                why = await self.alive()
                if why is not None:
                    await self._down(why)

    async def unreachable(self) -> None:
        """An input's handshake went unanswered: an outage if a liveness check fails too,
        which the checker handles (a worker is cut short at the campaign's end; the checker
        sees an outage through)."""
        async with self._lock:
            if not self.host.up.is_set():
                return
            if await self.alive() is None:
                self.host.state.counters.unanswered += 1
                return
        self.check_now.set()

    async def sampler(self) -> None:
        """The resource oracle's samples of a launched broker; a leak is an outage too."""
        process, resources, host = self.process, self.resources, self.host
        assert process is not None and resources is not None
        while not host.stopping:
            await asyncio.sleep(SAMPLE_EVERY)
            if not host.up.is_set():
                continue
            sample = process.sample()
            if sample is None:
                self.check_now.set()  # it died: the checker says so
                continue
            growth = resources.add(sample)
            host.state.resources = self._figures()
            if growth is not None:
                async with self._lock:
                    await self._leaked(str(growth), growth.resource)

    # -- outages --------------------------------------------------------------------------

    def _exited(self) -> int | None:
        return None if self.process is None else self.process.exited()

    async def _down(self, why: str) -> None:
        host = self.host
        host.pause()
        suspects = host.suspects()
        anomaly = await self._what_happened(why)
        if anomaly is None:  # slow, not down: it answered again within `recovery`
            host.up.set()
            return
        if suspects:
            host.outage(anomaly, suspects[-1], suspects=suspects, confirmed=None)
        if await self._recover(kill=anomaly.kind is Kind.HANG):
            await self._attribute(anomaly, suspects)
        host.up.set()  # go on (or let the workers see the stop)

    async def _leaked(self, what: str, resource: str) -> None:
        host = self.host
        host.pause()
        version = host.oracle.target.versions[-1]
        anomaly = Anomaly(Kind.LEAK, statement_id("connecting.connected-response", version),
                          f"the broker's process: {what}", about=resource)
        suspects = host.suspects()
        if suspects:  # a leak grows over many inputs: unattributed, with the last ones
            host.outage(anomaly, suspects[-1], suspects=suspects, confirmed=False)
        host.emit(Note(f"the broker leaks ({what}); starting it again"))
        await self._recover()
        host.up.set()

    async def _what_happened(self, why: str) -> Anomaly | None:
        """A crash (the process ended, or, not launched, no CONNECTED), a hang (launched,
        alive, no CONNECTED for `recovery` seconds), or None (it answered again)."""
        host = self.host
        version = host.oracle.target.versions[-1]
        statement = statement_id("connecting.connected-response", version)
        process = self.process
        if process is None:
            return Anomaly(Kind.CRASH, statement, f"a new connection gets no CONNECTED: {why}")
        waited = time.monotonic()
        while process.exited() is None and time.monotonic() - waited < host.settings.recovery:
            await asyncio.sleep(0.5)
            if process.exited() is None and await host.oracle.alive() is None:
                host.emit(Note(f"the broker answers again after "
                               f"{time.monotonic() - waited:.1f} s"))
                return None
        status = process.exited()
        said = crash_line(process.output(), status)
        if status is None:
            return Anomaly(Kind.HANG, statement, f"the broker's process lives but gives no "
                           f"CONNECTED for {host.settings.recovery:g} s: {why}")
        how = f"killed by signal {-status}" if status < 0 else f"exited with status {status}"
        site = crash_site(process.output())
        return Anomaly(Kind.CRASH, statement, f"the broker's process {how}: {said}"
                       + (f" ({site})" if site else ""), about=said)

    async def _recover(self, *, kill: bool = False) -> bool:
        """Start the broker again (launched; `kill`: without asking it to stop) or wait for
        it: whether it is back."""
        host = self.host
        if self.process is not None:
            try:
                took = await self.process.restart(kill=kill)
            except LaunchError as error:
                host.stop(f"the broker could not be started again: {error}")
                return False
            if self.resources is not None:
                self.resources.restarted()
            host.state.resources = self._figures()
            host.emit(Note(f"started the broker again ({took:.1f} s)"))
            return True
        host.emit(Note(f"the broker failed its liveness check; waiting up to "
                       f"{host.settings.recovery:g} s for it"))
        waited = time.monotonic()
        while time.monotonic() - waited < host.settings.recovery and not host.stopping:
            await asyncio.sleep(1.0)
            if await host.oracle.alive() is None:
                host.emit(Note(f"the broker answers again after "
                               f"{time.monotonic() - waited:.1f} s"))
                return True
        if not host.stopping:
            host.stop("the broker stopped answering")
        return False

    async def _brings_down(self, fuzz: FuzzInput) -> Anomaly | None:
        """Send `fuzz` alone: the outage it caused (the broker then started again), or
        None when the broker still answers."""
        with contextlib.suppress(Unreachable):
            await self.host.generator.run(self.host.oracle, fuzz)
        # one check: for a launched broker, _what_happened waits for it to answer again
        why = "its process ended" if self._exited() is not None else \
            await self.host.oracle.alive()
        if why is None:
            return None
        anomaly = await self._what_happened(why)
        if anomaly is not None and not await self._recover(kill=anomaly.kind is Kind.HANG):
            raise Unreachable("the broker could not be started again")
        return anomaly

    async def _attribute(self, anomaly: Anomaly, suspects: Sequence[FuzzInput]) -> None:
        """Each suspect alone, newest first, until one brings the broker down the same way."""
        host, sig = self.host, signature(anomaly)
        host.emit(Note(f"sending the {len(suspects)} suspects of the {anomaly.kind.value} "
                       "alone, to find its cause"))
        try:
            for suspect in reversed(suspects):  # the campaign's end waits for this
                caused = await self._brings_down(suspect)
                if caused is None:
                    continue
                if signature(caused) != sig:  # another bug: a finding of its own
                    host.outage(caused, suspect, suspects=(), confirmed=True)
                    continue
                smallest = await self._minimised(suspect, sig)
                host.outage(caused, smallest, suspects=(), confirmed=True,
                            minimised=smallest is not suspect)
                return
        except Unreachable as error:
            host.emit(Note(f"attributing the {anomaly.kind.value} stopped: {error}"))
            return
        if suspects:
            host.outage(anomaly, suspects[-1], suspects=tuple(suspects), confirmed=False)
            host.emit(Note(f"no suspect alone brings the broker down: the "
                           f"{anomaly.kind.value} stays unattributed"))

    async def _minimised(self, culprit: FuzzInput, sig: tuple[str, ...]) -> FuzzInput:
        """The smallest input that still brings a launched broker down the same way, within
        the minimising budget (every try that does starts the broker again)."""
        budget = self.host.settings.minimise
        if self.process is None or budget <= 0:
            return culprit

        async def reproduces(candidate: FuzzInput) -> bool:
            caused = await self._brings_down(candidate)
            return caused is not None and signature(caused) == sig

        return await minimise(culprit, reproduces, budget=budget,
                              keep=self.host.generator.keep)

    def _figures(self) -> dict[str, float | int | str]:
        figures: dict[str, float | int | str] = dict(self.resources.summary()) \
            if self.resources is not None else {}
        if self.process is not None:
            figures.update(starts=self.process.starts, command=self.process.command)
        return figures
