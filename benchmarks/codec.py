"""Codec throughput: this codec against stomp.py and stompest on the same bytes, one run.

Parse: 100,000 MESSAGE frames (5 headers, 100-byte body) and 10,000 with a 64 KiB body,
fed in 4 KiB chunks to each incremental parser (stomp.py: its transport's frame splitter
plus `parse_frame`; stompest: `StompParser`). Encode: the same small frames written by
each library's encoder (stomp.py: its STOMP 1.2 header escaping plus `convert_frame`).
Prints frames/s and the ratios against each peer: the best of three rounds (CPU time),
each round running every library in turn.

    python benchmarks/codec.py [--small N] [--large N] [--rounds R]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

from conformance.codec import Frame, Parser, encode

CHUNK = 4096


def message(index: int, body: bytes) -> Frame:
    return Frame("MESSAGE", [
        ("destination", "/queue/bench"), ("message-id", f"ID-{index}"),
        ("subscription", "0"), ("content-type", "text/plain"),
    ], body)


def stream(count: int, body: bytes) -> tuple[list[Frame], list[bytes]]:
    frames = [message(i, body) for i in range(count)]
    data = b"".join(encode(f) for f in frames)
    return frames, [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]


def parse_ours(chunks: Sequence[bytes]) -> int:
    parser = Parser(version="1.2")
    count = 0
    for chunk in chunks:
        count += len(parser.feed(chunk))
    return count


def parse_stomppy(chunks: Sequence[bytes]) -> int:
    from stomp.transport import BaseTransport
    from stomp.utils import parse_frame

    class Chunks(BaseTransport):  # the real stomp.py splitter, reading from memory
        def __init__(self, source: Sequence[bytes]) -> None:
            super().__init__(auto_decode=False)
            self.source = iter(source)
            self.running, self.blocking = True, False

        def receive(self) -> bytes:
            return next(self.source, b"")

    transport = Chunks(chunks)
    read = transport._BaseTransport__read  # type: ignore[attr-defined]
    count = 0
    while True:
        raw = read()
        if not raw:
            break
        for frame in raw:
            if parse_frame(frame) is not None:
                count += 1
    return count


def parse_stompest(chunks: Sequence[bytes]) -> int:
    from stompest.protocol import StompParser

    parser = StompParser("1.2")
    count = 0
    for chunk in chunks:
        parser.add(chunk)
        while parser.canRead():
            parser.get()
            count += 1
    return count


def encode_ours(frames: Sequence[Frame]) -> int:
    return sum(1 for f in frames if encode(f))


def encode_stomppy(frames: Sequence[Frame]) -> int:
    from stomp.protocol import Protocol12
    from stomp.utils import Frame as StompPyFrame
    from stomp.utils import convert_frame

    escape = Protocol12._escape_headers
    count = 0
    for f in frames:
        headers = dict(f.headers)
        escape(None, headers)  # type: ignore[arg-type]
        headers["content-length"] = str(len(f.body))
        if b"".join(convert_frame(StompPyFrame(f.command, headers, f.body))):
            count += 1
    return count


def encode_stompest(frames: Sequence[Frame]) -> int:
    from stompest.protocol import StompFrame

    count = 0
    for f in frames:
        headers = dict(f.headers)
        headers["content-length"] = str(len(f.body))
        if bytes(StompFrame(f.command, headers, f.body, version="1.2")):
            count += 1
    return count


def compare(title: str, runs: dict[str, Callable[[], int]], expected: int, rounds: int,
            goals: dict[str, float]) -> None:
    """Each round runs every library once, in turn, timed by this process's CPU time: a
    spike of the machine's load falls on one round of all of them, not on one library's
    best; each library's best round counts."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for name, work in runs.items():
            start = time.process_time()
            done = work()
            best[name] = min(best[name], time.process_time() - start)
            if done != expected:
                raise SystemExit(f"{name} handled {done} frames, expected {expected}")
    rates = {name: expected / seconds for name, seconds in best.items()}
    ours = rates["stomp-conformance"]
    print(f"\n{title}")
    for name, value in rates.items():
        line = f"  {name:18} {value:12,.0f} frames/s"
        if name != "stomp-conformance":
            goal = goals.get(name)
            line += f"   ours/{name} = {ours / value:5.2f}x"
            if goal:
                line += f" (goal {goal}x: {'met' if ours / value >= goal else 'NOT met'})"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    small_frames, small_chunks = stream(args.small, b"x" * 100)
    _, large_chunks = stream(args.large, b"y" * 65536)
    compare(f"parse: {args.small:,} MESSAGE frames, 5 headers, 100-byte body, 4 KiB chunks", {
        "stomp-conformance": lambda: parse_ours(small_chunks),
        "stomp.py": lambda: parse_stomppy(small_chunks),
        "stompest": lambda: parse_stompest(small_chunks),
    }, args.small, args.rounds, {"stomp.py": 3.0, "stompest": 2.5})
    compare(f"parse: {args.large:,} MESSAGE frames, 64 KiB body, 4 KiB chunks", {
        "stomp-conformance": lambda: parse_ours(large_chunks),
        "stomp.py": lambda: parse_stomppy(large_chunks),
        "stompest": lambda: parse_stompest(large_chunks),
    }, args.large, args.rounds, {"stomp.py": 1.5, "stompest": 1.5})
    compare(f"encode: {args.small:,} MESSAGE frames, 5 headers, 100-byte body", {
        "stomp-conformance": lambda: encode_ours(small_frames),
        "stomp.py": lambda: encode_stomppy(small_frames),
        "stompest": lambda: encode_stompest(small_frames),
    }, args.small, args.rounds, {"stomp.py": 2.0})


if __name__ == "__main__":
    main()
