"""Fuzzing speed, one run, 127.0.0.1 only.

- atheris on the codec: each harness of fuzz/ (parser, roundtrip, validator) under
  libFuzzer for --atheris-time seconds in a child process (a scratch corpus first, the
  shipped seeds after it); its executions per second are read off libFuzzer's final stats.
  Goal: 20,000/s on one core. Beside them, benchmarks/atheris_bare.py: the instrumented
  parser alone, one parse per input and no check, the ceiling of any parser harness.
- the network fuzzer: `stomp-conformance fuzz` (grammar inputs, every one on a fresh
  connection, liveness probes included, no minimising) for --time seconds against
  * the reference broker that `fuzz` starts when given no --broker (a child process), with
    this checkout as pure Python and as the STOMP_CONFORMANCE_MYPYC=1 build (fuzzer and
    broker both compiled, as that install would run them; built here, about a minute),
  * RabbitMQ, only when something answers STOMP as RabbitMQ on 127.0.0.1:61613 (guest/
    guest, host /); it is never installed or started here.
  inputs/s is the campaign's inputs over its fuzzing time, from its state file. Goal: 1,000
  inputs/s against the reference broker.
Prints each figure, its ratio to the goal and the ratio reference / RabbitMQ.

    python benchmarks/fuzz.py [--time S] [--atheris-time S] [--jobs N] [--skip-atheris]
                              [--skip-mypyc]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compiled import ROOT, BuildError, build_compiled

HOST = "127.0.0.1"
RABBITMQ_PORT = 61613
ATHERIS_GOAL = 20_000
NETWORK_GOAL = 1_000


#: name -> (script, seed corpus) of the atheris rows
ATHERIS = {
    "parser": (ROOT / "fuzz" / "parser.py", ROOT / "fuzz" / "corpus" / "parser"),
    "roundtrip": (ROOT / "fuzz" / "roundtrip.py", ROOT / "fuzz" / "corpus" / "roundtrip"),
    "validator": (ROOT / "fuzz" / "validator.py", ROOT / "fuzz" / "corpus" / "validator"),
    "bare parser (ceiling)": (ROOT / "benchmarks" / "atheris_bare.py",
                              ROOT / "fuzz" / "corpus" / "parser"),
}


def atheris_rate(script: Path, seeds: Path, seconds: int) -> float | None:
    """libFuzzer's executions per second on one harness (None: atheris cannot run)."""
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [sys.executable, str(script), f"-max_total_time={seconds}",
             "-print_final_stats=1", scratch, str(seeds)],
            capture_output=True, text=True, timeout=seconds + 120, cwd=ROOT)
    found = re.search(r"stat::average_exec_per_sec:\s*(\d+)", done.stderr) or \
        re.findall(r"exec/s: (\d+)", done.stderr)
    if isinstance(found, re.Match):
        return float(found.group(1))
    if found:
        return float(found[-1])
    tail = done.stderr.strip().splitlines()[-3:]
    print(f"  atheris did not report a rate (exit {done.returncode}): {' | '.join(tail)}")
    return None


def answers_as_rabbitmq(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=2) as s:
            s.settimeout(3)
            s.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\x00")
            answer = s.recv(4096)
    except OSError:
        return False
    return answer.startswith(b"CONNECTED") and b"RabbitMQ" in answer


def campaign_rate(seconds: float, jobs: int, flags: list[str],
                  package: Path = ROOT) -> tuple[float, int, int]:
    """(inputs/s, inputs, probes) of one `stomp-conformance fuzz` run of the `conformance`
    package in the folder `package`."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [sys.executable, "-m", "conformance", "fuzz", "--time", f"{seconds}s", "--jobs",
             str(jobs), "--minimise", "0", "--seed", "1", "--corpus", folder, *flags],
            capture_output=True, text=True, timeout=seconds + 120, cwd=package,
            env={**os.environ, "PYTHONPATH": str(package)})
        if done.returncode not in (0, 1):
            raise SystemExit(f"fuzz {' '.join(flags)} failed (exit {done.returncode}): "
                             f"{done.stderr.strip()[-300:]}")
        counters = json.loads((Path(folder) / "state.json").read_text())["counters"]
    return counters["inputs"] / counters["elapsed_s"], counters["inputs"], counters["probes"]


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--time", type=float, default=10.0, help="seconds per campaign")
    options.add_argument("--atheris-time", type=int, default=10)
    options.add_argument("--jobs", type=int, default=16)
    options.add_argument("--skip-atheris", action="store_true")
    options.add_argument("--skip-mypyc", action="store_true",
                         help="measure the pure-Python fuzzer and broker only")
    args = options.parse_args()

    if not args.skip_atheris:
        print(f"atheris on the codec, {args.atheris_time} s each, one core:")
        for name, (script, seeds) in ATHERIS.items():
            rate = atheris_rate(script, seeds, args.atheris_time)
            if rate is not None:
                print(f"  {name:24} {rate:8,.0f} exec/s  goal {ATHERIS_GOAL:,}: ratio "
                      f"{rate / ATHERIS_GOAL:.2f}")

    print(f"network fuzzer, {args.time:g} s each, {args.jobs} jobs, liveness probes included:")
    runs: list[tuple[str, list[str], Path]] = [("reference, pure Python", [], ROOT)]
    rabbit = answers_as_rabbitmq(RABBITMQ_PORT)
    if rabbit:
        runs.append(("rabbitmq", ["--broker", f"{HOST}:{RABBITMQ_PORT}", "--profile",
                                  "rabbitmq"], ROOT))
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-mypyc-") as work:
        if not args.skip_mypyc:
            try:
                runs.insert(1, ("reference, mypyc build", [], build_compiled(Path(work))))
            except BuildError as error:
                print(f"  reference, mypyc build: not measured: {error}")
        for name, flags, package in runs:
            started = time.monotonic()
            rate, inputs, probes = campaign_rate(args.time, args.jobs, flags, package)
            rates[name] = rate
            print(f"  {name:28} {rate:8,.0f} inputs/s  ({inputs:,} inputs, {probes} probes, "
                  f"{time.monotonic() - started:.0f} s with start-up)")
    if not rabbit:
        print("  rabbitmq: nothing answers STOMP as RabbitMQ on 127.0.0.1:61613: not measured "
              "(bash .ci/brokers/rabbitmq start)")
    for name in (n for n in rates if n.startswith("reference")):
        print(f"goal {NETWORK_GOAL:,} inputs/s against the reference broker ({name}): ratio "
              f"{rates[name] / NETWORK_GOAL:.2f}")
    if "rabbitmq" in rates:
        print(f"reference (pure Python) / rabbitmq: "
              f"{rates['reference, pure Python'] / rates['rabbitmq']:.2f}")


if __name__ == "__main__":
    main()
