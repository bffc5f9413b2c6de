"""Fuzzing speed, one run, 127.0.0.1 only.

- atheris on the codec: each harness of fuzz/ (parser, roundtrip, validator, differential)
  under libFuzzer for --atheris-time seconds in a child process (a scratch corpus first,
  the shipped seeds after it), with this checkout as pure Python, as the mypyc build, and
  as the coverage build (fuzz/coverage_build.py: the mypyc modules compiled by clang with
  libFuzzer's coverage instead of atheris tracing their Python; needs clang); the harness
  says which codec it ran. Two rates: libFuzzer's executions per second of wall time, and
  its executions over the CPU time the child used (start-up included): the rate on one
  core of its own, which a shared machine does not move. Goal: 10,000 a second on one
  core, 20,000 the stretch. Beside them, benchmarks/atheris_bare.py: one parse of
  the parser as the harness runs it (traced, or with clang's coverage) per input and no
  check, the floor of any parser harness under atheris; each harness's ratio to it is
  printed.
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

    python benchmarks/fuzz.py [--time S] [--atheris-time S] [--rounds R] [--jobs N]
                              [--skip-atheris] [--skip-network] [--skip-mypyc]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from compiled import ROOT, BuildError, build_compiled

HOST = "127.0.0.1"
RABBITMQ_PORT = 61613
ATHERIS_GOAL = 10_000
ATHERIS_STRETCH = 20_000
NETWORK_GOAL = 1_000
BARE = "bare parser (floor)"


#: name -> (script, seed corpus) of the atheris rows
ATHERIS = {BARE: (ROOT / "benchmarks" / "atheris_bare.py", ROOT / "fuzz" / "corpus" / "parser")
           } | {name: (ROOT / "fuzz" / f"{name}.py", ROOT / "fuzz" / "corpus" / name)
                for name in ("parser", "roundtrip", "validator", "differential")}


class Rate(NamedTuple):
    """One libFuzzer run: executions per second of wall time and of the child's CPU time,
    and which codec the harness ran."""

    wall: float
    cpu: float
    build: str


def atheris_rate(script: Path, seeds: Path, seconds: int, site: Path | None) -> Rate | None:
    """One harness under libFuzzer, of this checkout or of the compiled build in `site`
    (None: atheris cannot run)."""
    env = dict(os.environ) if site is None else {**os.environ, "PYTHONPATH": str(site)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # A finding lands where this was run, not in the compiled build's folder (deleted after).
    findings = f"-artifact_prefix={Path.cwd()}{os.sep}"
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [sys.executable, str(script), f"-max_total_time={seconds}",
             "-print_final_stats=1", findings, scratch, str(seeds)],
            capture_output=True, text=True, timeout=seconds + 120, cwd=site or ROOT, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    runs = re.search(r"stat::number_of_executed_units:\s*(\d+)", done.stderr)
    wall = re.search(r"stat::average_exec_per_sec:\s*(\d+)", done.stderr)
    build = re.search(r"^INFO: codec (pure Python|compiled \(mypyc\)(?: with clang's "
                      r"coverage)?) \(", done.stderr, re.M)
    if runs is None or wall is None or build is None:
        tail = done.stderr.strip().splitlines()[-3:]
        print(f"  atheris did not report a rate (exit {done.returncode}): {' | '.join(tail)}")
        return None
    finding = re.search(r"Test unit written to (\S+)", done.stderr)
    if finding is not None:  # kept where libFuzzer wrote it; the rate is of a shorter run
        print(f"  {script.name} stopped on a finding: {finding.group(1)}")
    return Rate(float(wall.group(1)), int(runs.group(1)) / cpu, build.group(1))


def measure_atheris(seconds: int, rounds: int, sites: dict[str, Path | None]) -> None:
    """Every harness in every build, `rounds` times each; the range of each figure."""
    print(f"atheris on the codec, {seconds} s a run, {rounds} run(s) each, one core each:")
    for label, site in sites.items():
        floor: float | None = None
        for name, (script, seeds) in ATHERIS.items():  # the floor first
            found = [r for r in (atheris_rate(script, seeds, seconds, site)
                                 for _ in range(rounds)) if r is not None]
            if not found:
                continue
            cpu = sorted(r.cpu for r in found)
            wall = sorted(r.wall for r in found)
            rate = statistics.median(cpu)  # the ratios' figure
            if name == BARE:
                floor = rate
            vs_floor = f", {rate / floor:.2f} of the floor" if floor and name != BARE else ""
            print(f"  {label:8} {name:20} {_span(cpu)} exec/CPU s ({_span(wall)} exec/s wall)"
                  f"  goal {ATHERIS_GOAL:,}: {rate / ATHERIS_GOAL:.2f}, stretch "
                  f"{ATHERIS_STRETCH:,}: {rate / ATHERIS_STRETCH:.2f}{vs_floor}"
                  f"  [codec: {', '.join(sorted({r.build for r in found}))}]")


def _span(values: list[float]) -> str:
    low, high = values[0], values[-1]
    return f"{low:8,.0f}" + (f" to {high:6,.0f}" if len(values) > 1 else " " * 10)


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
    options.add_argument("--rounds", type=int, default=1, help="atheris runs per harness")
    options.add_argument("--jobs", type=int, default=16)
    options.add_argument("--skip-atheris", action="store_true")
    options.add_argument("--skip-network", action="store_true")
    options.add_argument("--skip-mypyc", action="store_true",
                         help="measure this checkout as pure Python only")
    args = options.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-mypyc-") as work:
        compiled: Path | None = None
        sites: dict[str, Path | None] = {"pure": None}
        if not args.skip_mypyc:
            for label, coverage in (("compiled", False), ("coverage", True)):
                if coverage and args.skip_atheris:
                    continue  # the coverage build serves the harnesses only
                try:
                    sites[label] = build_compiled(Path(work, label), coverage=coverage)
                except BuildError as error:
                    print(f"the {label} build: not measured: {error}")
            compiled = sites.get("compiled")
        if not args.skip_atheris:
            measure_atheris(args.atheris_time, args.rounds, sites)
        if not args.skip_network:
            network(args, compiled)


def network(args: argparse.Namespace, compiled: Path | None) -> None:
    print(f"network fuzzer, {args.time:g} s each, {args.jobs} jobs, liveness probes included:")
    runs: list[tuple[str, list[str], Path]] = [("reference, pure Python", [], ROOT)]
    if compiled is not None:
        runs.append(("reference, mypyc build", [], compiled))
    rabbit = answers_as_rabbitmq(RABBITMQ_PORT)
    if rabbit:
        runs.append(("rabbitmq", ["--broker", f"{HOST}:{RABBITMQ_PORT}", "--profile",
                                  "rabbitmq"], ROOT))
    rates: dict[str, float] = {}
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
