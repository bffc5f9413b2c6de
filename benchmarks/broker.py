"""Broker throughput: the reference broker against coilmq and RabbitMQ, one run, 127.0.0.1 only.

One producer connection SENDs N messages (100-byte body) to a fresh /queue/bench-<id>; one
consumer connection, subscribed with ack:auto (its SUBSCRIBE confirmed by a RECEIPT before the
first SEND), counts the MESSAGE frames. The rate is N over the time from the first SEND to the
last MESSAGE received. Both clients are asyncio on this project's codec, in this process; each
broker is a child process on a free loopback port: the reference broker of this checkout
(`python -m conformance broker`) as pure Python and as built with STOMP_CONFORMANCE_MYPYC=1
(a wheel built here, about a minute; see setup.py), and coilmq (pip package, the `bench`
extra). RabbitMQ is measured only when
something already answers STOMP as RabbitMQ on 127.0.0.1:61613 (guest/guest, host '/'); it is
never installed or started here.

Two workloads, each on every broker:
- pipelined: the producer writes 256 SEND frames per write and awaits drain, no receipts, so
  the broker is the bottleneck. coilmq 1.1.0 cannot take it: it reads 4096 bytes at a time
  and its frame buffer raises (ValueError) on a read that ends inside a header line, which
  drops the producer connection.
- paced: every SEND padded to 256 bytes (an `x-pad` header) and written 16 to a 4 KiB block,
  the last of each block asking a RECEIPT, at most 8 blocks unconfirmed. The broker's reads
  then end on frame boundaries, so coilmq survives. The goal ratio uses pipelined when coilmq
  survives it (only very small --messages), else paced.
Prints messages/s per broker and the ratios ours/peer, best of three rounds.

    python benchmarks/broker.py [--messages N] [--rounds R] [--timeout S] [--skip-coilmq]
                                [--skip-mypyc]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from compiled import BuildError, build_compiled

from conformance.codec import Frame, Parser, StompError, encode

HOST = "127.0.0.1"  # every broker and every connection here: loopback only
OURS = "stomp-conformance"
COMPILED = "stomp-conformance mypyc"
RABBITMQ_PORT = 61613
BODY = b"x" * 100
BATCH = 256  # SEND frames per write (pipelined)
PADDED = 256  # bytes per SEND frame (paced)
BLOCK = 4096 // PADDED  # SEND frames per write, the last asking a RECEIPT (paced)
IN_FLIGHT = 8  # blocks written and not yet confirmed by their RECEIPT (paced)
READ = 256 * 1024
ROOT = Path(__file__).resolve().parents[1]
GOALS = {"coilmq": 3.0}


class BenchError(Exception):
    """A broker that could not be started, reached or measured: one line for the report."""


@dataclass(frozen=True)
class Target:
    name: str
    port: int
    version: str  # the accept-version offered, and so the version spoken
    host: str  # CONNECT's host header
    login: str | None = None
    passcode: str | None = None
    #: extra headers on both SEND and SUBSCRIBE (RabbitMQ declares the queue on each)
    queue_headers: tuple[tuple[str, str], ...] = ()
    #: the broker's process, when this script started it (its output explains a failure)
    child: Child | None = field(default=None, compare=False, repr=False)

    def why(self) -> str:
        """The first exception the broker process printed since the last call, if any."""
        if self.child is None:
            return ""
        lines = [line for line in self.child.news().splitlines()
                 if line[:1].isalpha() and ("Error" in line or "Exception" in line)
                 and not line.startswith(("Traceback", "Exception occurred"))]
        return f" ({self.name} printed: {lines[0][:160]})" if lines else ""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def connect_frame(target: Target) -> bytes:
    headers = [("accept-version", target.version), ("host", target.host), ("heart-beat", "0,0")]
    if target.login is not None:
        headers += [("login", target.login), ("passcode", target.passcode or "")]
    return encode(Frame("CONNECT", headers))


def handshake(target: Target, timeout: float) -> Frame:
    """The first frame the broker answers a CONNECT with (blocking; OSError if none)."""
    with socket.create_connection((HOST, target.port), timeout=timeout) as sock:
        sock.sendall(connect_frame(target))
        parser = Parser(version="1.2", strict=False)
        while True:
            data = sock.recv(READ)
            if not data:
                raise ConnectionError("closed the connection without answering CONNECT")
            try:
                events = parser.feed(data)
            except StompError as error:
                raise BenchError(f"answered CONNECT with unreadable bytes: {error}") from None
            for event in events:
                if isinstance(event, Frame):
                    with contextlib.suppress(OSError):
                        sock.sendall(encode(Frame("DISCONNECT")))
                    return event


def refusal(frame: Frame) -> str:
    return f"{frame.command} {frame.get('message') or frame.body[:80].decode(errors='replace')!r}"


# -- child processes ----------------------------------------------------------------------


class Child:
    """A broker process in its own session (a terminal's Ctrl-C reaches only this script, which
    stops it), its output appended to a temporary file."""

    def __init__(self, argv: Sequence[str], *, stop_signal: int,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        fd, self.log = tempfile.mkstemp(prefix="bench-broker-", suffix=".log")
        os.close(fd)
        self.stop_signal = stop_signal
        self.seen = 0  # how much of the output `news` has returned
        with open(self.log, "ab") as out:  # O_APPEND: reading it never moves the writer
            self.proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, env=env,
                                         cwd=cwd, start_new_session=True)

    def output(self) -> str:
        return Path(self.log).read_bytes().decode(errors="replace")

    def news(self) -> str:
        """The output printed since the last call."""
        text = self.output()
        news, self.seen = text[self.seen:], len(text)
        return news

    def exited(self) -> str | None:
        """None while running, else why it is gone (exit status and last output line)."""
        code = self.proc.poll()
        if code is None:
            return None
        lines = self.output().strip().splitlines()
        return f"exited with status {code}" + (f": {lines[-1][:200]}" if lines else "")

    def stop(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(self.stop_signal)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.log)


def build(stack: contextlib.ExitStack) -> Path:
    work = Path(tempfile.mkdtemp(prefix="bench-mypyc-"))
    stack.callback(shutil.rmtree, work, True)
    try:
        return build_compiled(work)
    except BuildError as error:
        raise BenchError(str(error)) from None


def start_ours(stack: contextlib.ExitStack, name: str = OURS, path: Path = ROOT) -> Target:
    port = free_port()
    env = dict(os.environ)  # this checkout's broker, whatever is installed
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(path), env.get("PYTHONPATH")) if p)
    child = Child([sys.executable, "-m", "conformance", "broker", "--host", HOST,
                   "--port", str(port)], stop_signal=signal.SIGINT, env=env, cwd=path)
    stack.callback(child.stop)
    ready = f"stomp-conformance broker listening on {HOST}:{port}"
    deadline = time.monotonic() + 15
    while ready not in child.output():
        gone = child.exited()
        if gone:
            raise BenchError(f"cannot start `{sys.executable} -m conformance broker`: {gone}")
        if time.monotonic() > deadline:
            raise BenchError("not listening 15 s after start")
        time.sleep(0.05)
    target = Target(name, port, "1.2", "localhost", child=child)
    answer = handshake(target, 5.0)
    if answer.command != "CONNECTED":
        raise BenchError(f"answered CONNECT with {refusal(answer)}")
    return target


def start_coilmq(stack: contextlib.ExitStack) -> Target:
    exe = Path(sys.executable).parent / "coilmq"
    found = str(exe) if exe.exists() else shutil.which("coilmq")
    if found is None:
        raise BenchError("not installed (pip install coilmq, or this project's 'bench' extra)")
    port = free_port()
    child = Child([found, "-b", HOST, "-p", str(port)], stop_signal=signal.SIGTERM)
    stack.callback(child.stop)
    # STOMP 1.1: coilmq's 1.2 accepts only a host header equal to this machine's FQDN.
    target = Target("coilmq", port, "1.1", "localhost", child=child)
    deadline = time.monotonic() + 15
    while True:
        gone = child.exited()
        if gone:
            raise BenchError(f"cannot start {found}: {gone}")
        try:
            answer = handshake(target, 2.0)
        except OSError as error:
            if time.monotonic() > deadline:
                raise BenchError(f"no CONNECTED 15 s after start: {error}") from None
            time.sleep(0.05)
            continue
        if answer.command != "CONNECTED":
            raise BenchError(f"answered CONNECT with {refusal(answer)}")
        if answer.get("version") != target.version:
            raise BenchError(f"negotiated version {answer.get('version')!r}, not "
                             f"{target.version}")
        return target


def probe_rabbitmq() -> Target:
    target = Target("rabbitmq", RABBITMQ_PORT, "1.2", "/", "guest", "guest",
                    queue_headers=(("auto-delete", "true"),))  # no queue left behind
    where = f"{HOST}:{RABBITMQ_PORT}"
    try:
        answer = handshake(target, 5.0)
    except ConnectionRefusedError:
        raise BenchError(f"nothing listens on {where} (not installed or started here)") from None
    except OSError as error:
        raise BenchError(f"{where} did not answer a STOMP CONNECT: {error}") from None
    if answer.command != "CONNECTED":
        raise BenchError(f"{where} answered CONNECT (guest/guest, host '/') with "
                         f"{refusal(answer)}")
    server = answer.get("server") or "a broker without a server header"
    if not server.startswith("RabbitMQ"):
        raise BenchError(f"{where} is {server}, not RabbitMQ")
    return target


# -- one round ----------------------------------------------------------------------------


class Client:
    def __init__(self, target: Target, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.target, self.reader, self.writer = target, reader, writer
        self.parser = Parser(version="1.2", strict=False)
        self.pending: list[Frame] = []

    @classmethod
    async def open(cls, target: Target, role: str) -> Client:
        try:
            reader, writer = await asyncio.open_connection(HOST, target.port, limit=READ)
        except OSError as error:
            raise BenchError(f"{role} cannot connect: {error}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client = cls(target, reader, writer)
        writer.write(connect_frame(target))
        answer = await client.next_frame(role)
        if answer.command != "CONNECTED":
            raise BenchError(f"{role} CONNECT answered with {refusal(answer)}")
        try:
            client.parser.version = answer.get("version") or "1.0"  # type: ignore[assignment]
        except ValueError as error:
            raise BenchError(f"{role} CONNECTED: {error}") from None
        return client

    async def frames(self, role: str) -> list[Frame]:
        """The next frames read (at least one), heart-beats dropped."""
        while True:
            data = await self.reader.read(READ)
            if not data:
                raise BenchError(f"the broker closed the {role} connection")
            try:
                events = self.parser.feed(data)
            except StompError as error:
                raise BenchError(f"{role} read unreadable bytes: {error}") from None
            frames = [e for e in events if isinstance(e, Frame)]
            if frames:
                return frames

    async def next_frame(self, role: str) -> Frame:
        if not self.pending:
            self.pending = await self.frames(role)
        return self.pending.pop(0)

    async def close(self) -> None:
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            self.writer.write(encode(Frame("DISCONNECT")))
            self.writer.close()
            await asyncio.wait_for(self.writer.wait_closed(), 2)


@dataclass
class Progress:
    received: int = 0
    first_send: float = 0.0
    last_message: float = 0.0


async def consume(consumer: Client, count: int, progress: Progress) -> None:
    """Counts the MESSAGE frames without building them, so that the client costs less than
    the broker it measures: after EOLs, each frame must start with the MESSAGE command and
    ends at its first NUL (the bodies hold none). Anything else is parsed and reported."""
    for frame in consumer.pending:  # nothing should come between RECEIPT and the first SEND
        if frame.command != "MESSAGE":
            raise BenchError(f"consumer got {refusal(frame)}")
        progress.received += 1
    consumer.pending = []
    if consumer.parser.buffered:
        raise BenchError("consumer got part of a frame before the first SEND")
    head = b"MESSAGE\n"
    buf = b""
    while progress.received < count:
        data = await consumer.reader.read(READ)
        if not data:
            raise BenchError(f"the broker closed the consumer connection after "
                             f"{progress.received:,} messages")
        buf = buf + data if buf else data
        pos, size = 0, len(buf)
        while pos < size:
            if buf.startswith(head, pos):
                end = buf.find(b"\0", pos)
                if end < 0:
                    break
                progress.received += 1
                pos = end + 1
            elif buf[pos] in b"\r\n":
                pos += 1
            elif head.startswith(buf[pos:]):
                break  # the command is cut by the end of the read
            else:
                other = Parser(version="1.2", strict=False).feed(buf[pos:] + b"\0")
                got = next((refusal(e) for e in other if isinstance(e, Frame)),
                           repr(buf[pos:pos + 80]))
                raise BenchError(f"consumer got {got} after {progress.received:,} messages")
        buf = buf[pos:]
    progress.last_message = time.perf_counter()
    if progress.received > count:
        raise BenchError(f"consumer got {progress.received:,} messages, {count:,} were sent")


def send_frame(producer: Client, destination: str, receipt: str | None = None,
               size: int | None = None) -> bytes:
    """One SEND; with `size`, padded to exactly that many bytes by an x-pad header."""
    headers = [("destination", destination), *producer.target.queue_headers]
    if receipt is not None:
        headers.append(("receipt", receipt))
    version = producer.parser.version
    if size is None:
        return encode(Frame("SEND", headers, BODY), version=version)
    pad = size - len(encode(Frame("SEND", [*headers, ("x-pad", "")], BODY), version=version))
    if pad < 0:
        raise BenchError(f"a SEND to {destination} does not fit in {size} bytes")
    return encode(Frame("SEND", [*headers, ("x-pad", "p" * pad)], BODY), version=version)


async def produce(producer: Client, destination: str, count: int, progress: Progress) -> None:
    """Pipelined: batches of BATCH frames, drained, nothing awaited from the broker."""
    one = send_frame(producer, destination)
    batch = one * BATCH
    full, rest = divmod(count, BATCH)
    writer = producer.writer
    progress.first_send = time.perf_counter()
    for _ in range(full):
        writer.write(batch)
        await writer.drain()
    if rest:
        writer.write(one * rest)
        await writer.drain()


async def produce_paced(producer: Client, destination: str, count: int,
                        progress: Progress) -> None:
    """Paced: PADDED-byte frames in 4 KiB blocks, at most IN_FLIGHT blocks unconfirmed."""
    one = send_frame(producer, destination, size=PADDED)
    writer = producer.writer
    unconfirmed: list[str] = []
    progress.first_send = time.perf_counter()
    for number, start in enumerate(range(0, count, BLOCK)):
        while len(unconfirmed) >= IN_FLIGHT:
            frame = await producer.next_frame("producer")
            if frame.command != "RECEIPT" or frame.get("receipt-id") != unconfirmed[0]:
                raise BenchError(f"producer got {refusal(frame)}, not the RECEIPT of "
                                 f"{unconfirmed[0]}")
            unconfirmed.pop(0)
        receipt = f"b{number:08d}"
        size = min(BLOCK, count - start)
        writer.write(one * (size - 1) + send_frame(producer, destination, receipt, PADDED))
        unconfirmed.append(receipt)
        await writer.drain()


async def watch(producer: Client) -> None:
    """The producer expects nothing back: anything but a heart-beat is a failure."""
    frame = await producer.next_frame("producer")
    raise BenchError(f"producer got {refusal(frame)}")


async def one_round(target: Target, count: int, timeout: float, paced: bool) -> float:
    destination = f"/queue/bench-{uuid.uuid4().hex[:12]}"
    progress = Progress()
    consumer = producer = None
    try:
        consumer = await asyncio.wait_for(Client.open(target, "consumer"), timeout)
        producer = await asyncio.wait_for(Client.open(target, "producer"), timeout)
        consumer.writer.write(encode(Frame("SUBSCRIBE", [
            ("destination", destination), ("id", "0"), ("ack", "auto"),
            ("receipt", "subscribed"), *target.queue_headers]),
            version=consumer.parser.version))
        answer = await asyncio.wait_for(consumer.next_frame("consumer"), timeout)
        if answer.command != "RECEIPT" or answer.get("receipt-id") != "subscribed":
            raise BenchError(f"SUBSCRIBE answered with {refusal(answer)}, not its RECEIPT")
        consuming = asyncio.create_task(consume(consumer, count, progress))
        tasks = [consuming]
        if paced:  # the producer reads its own receipts
            tasks.append(asyncio.create_task(
                produce_paced(producer, destination, count, progress)))
        else:
            tasks.append(asyncio.create_task(produce(producer, destination, count, progress)))
            tasks.append(asyncio.create_task(watch(producer)))
        try:
            async with asyncio.timeout(timeout):
                waiting = set(tasks)
                while not consuming.done():  # a producer that finishes leaves the consumer
                    done, waiting = await asyncio.wait(
                        waiting, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        task.result()  # raises what failed
        except TimeoutError:
            raise BenchError(f"timed out after {timeout:g} s: {progress.received:,} of "
                             f"{count:,} messages arrived") from None
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    except TimeoutError:
        raise BenchError(f"no answer within {timeout:g} s while setting up") from None
    finally:
        for client in (producer, consumer):
            if client is not None:
                await client.close()
    return count / (progress.last_message - progress.first_send)


# -- the run ------------------------------------------------------------------------------


WORKLOADS = {
    "pipelined": f"batches of {BATCH} SEND frames, drained, no receipts",
    "paced": f"SEND frames padded to {PADDED} bytes, {BLOCK} per 4 KiB block, a RECEIPT per "
             f"block, at most {IN_FLIGHT} blocks unconfirmed",
}


def measure(targets: list[Target], paced: bool, args: argparse.Namespace,
            failed: dict[str, str]) -> dict[str, list[float]]:
    """Rounds interleaved across brokers; a broker that fails a round is dropped."""
    rates: dict[str, list[float]] = {t.name: [] for t in targets}
    live = list(targets)
    for number in range(1, args.rounds + 1):
        for target in list(live):
            target.why()  # forget what the broker printed before this round
            try:
                rates[target.name].append(
                    asyncio.run(one_round(target, args.messages, args.timeout, paced)))
            except (BenchError, OSError) as error:
                reason = f"round {number} failed: {error or type(error).__name__}{target.why()}"
                failed[target.name] = reason
                live.remove(target)
                del rates[target.name]
    return rates


def report(workload: str, args: argparse.Namespace, order: list[str],
           rates: dict[str, list[float]], failed: dict[str, str]) -> dict[str, float]:
    print(f"\n{workload}: {args.messages:,} messages, 100-byte body, 1 producer + 1 consumer "
          f"connection, ack auto, {HOST}, best of {args.rounds}\n  ({WORKLOADS[workload]})")
    best = {name: max(values) for name, values in rates.items()}
    ours = [name for name in (COMPILED, OURS) if name in best]
    for name in order:
        if name not in best:
            print(f"  {name:24} {failed.get(name, 'not run')}")
            continue
        line = f"  {name:24} {best[name]:10,.0f} messages/s"
        if name not in (COMPILED, OURS):
            line += "   " + ", ".join(f"{'mypyc' if mine == COMPILED else 'pure'}/{name} = "
                                      f"{best[mine] / best[name]:5.2f}x" for mine in ours)
        rounds = " ".join(f"{r:,.0f}" for r in rates[name])
        print(f"{line}   (rounds: {rounds})")
    return best


def goals(results: dict[str, dict[str, float]]) -> None:
    print()
    for peer, goal in GOALS.items():
        # the same workload for both sides: pipelined when the peer survives it, else paced
        for workload in ("pipelined", "paced"):
            best = results.get(workload, {})
            ours = next((name for name in (COMPILED, OURS) if name in best), None)
            if ours and peer in best:
                ratio = best[ours] / best[peer]
                print(f"goal {goal:g}x {peer}: {'met' if ratio >= goal else 'NOT met'} "
                      f"({ours}, {ratio:.2f}x, {workload})")
                break
        else:
            print(f"goal {goal:g}x {peer}: not measured (no workload ran on both)")


def terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks that stop children


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per broker (best of)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a round may take before it fails")
    parser.add_argument("--skip-coilmq", action="store_true", help="do not start coilmq")
    parser.add_argument("--skip-mypyc", action="store_true",
                        help="measure the pure-Python broker only (no compiled build)")
    args = parser.parse_args()
    if args.messages < 1 or args.rounds < 1 or args.timeout <= 0:
        parser.error("--messages and --rounds must be positive, --timeout above 0")
    signal.signal(signal.SIGTERM, terminate)

    order = [COMPILED, OURS, "coilmq", "rabbitmq"]
    targets: list[Target] = []
    skipped: dict[str, str] = {}
    results: dict[str, dict[str, float]] = {}
    starters = {COMPILED: lambda stack: start_ours(stack, COMPILED, build(stack)),
                OURS: start_ours, "coilmq": start_coilmq}
    with contextlib.ExitStack() as stack:
        try:
            targets.append(probe_rabbitmq())  # before any child takes a port
        except BenchError as error:
            skipped["rabbitmq"] = f"skipped: {error}"
        for name, start in starters.items():
            if (name, True) in (("coilmq", args.skip_coilmq), (COMPILED, args.skip_mypyc)):
                skipped[name] = f"skipped: --skip-{name.split()[-1]}"
                continue
            try:
                targets.append(start(stack))
            except (BenchError, OSError) as error:
                skipped[name] = f"skipped: {error}"
                print(f"{name} skipped: {error}", file=sys.stderr)
        targets.sort(key=lambda t: order.index(t.name))
        for workload in WORKLOADS:
            failed = dict(skipped)
            rates = measure(targets, workload == "paced", args, failed)
            results[workload] = report(workload, args, order, rates, failed)
    goals(results)
    return 0 if all(OURS in best or COMPILED in best for best in results.values()) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
