"""Bucket precision: how many buckets (distinct bugs) the pipeline makes of the findings of
one planted fault, and whether any bucket holds findings of two faults.

One `stomp-conformance pipeline fuzz` run, local mode, one campaign per fault: the
reference broker with that fault alone (`--broker reference+FAULT`), all with the same seed
and time budget, then the buckets job over all their findings together. A bucket's
`brokers` names the campaigns its findings came from (reference@embedded+FAULT): a bucket
naming two is mixed. Prints, per fault: findings, buckets, and the mixed buckets among
them; then buckets per fault over all faults. Goal: 1.0 to 1.5 buckets per fault and no
mixed bucket. With --control, a campaign against the broker with no fault runs too: what
it finds is no planted bug, and a bucket it shares with a fault is counted mixed.

    python benchmarks/buckets.py [--time S] [--seed N] [--master local[N]] [--fault NAME ...]
                                 [--control] [--keep DIR] [--checkout DIR]

Tasks run one at a time by default (local[1]): each campaign's fuzzer and broker then have
the machine's two cores, as a `fuzz` run would.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
from compiled import ROOT

#: Faults the grammar generator reaches over TCP, each breaking its statement in its own
#: way. Left out: no-escaping (a header with a raw LF or colon cuts the broker's stream
#: anywhere, so what a client then reads is broken in ways that depend on the data, each
#: its own rule), no-subscription-header (it breaks the statement no-message-id breaks,
#: message.id-and-subscription-required, with the same answer: one bug), and faults no
#: fuzz input shows (no-receipt-id-on-error, refuse-body-v10, ...).
FAULTS = (
    "error-without-close", "error-without-message", "error-without-content-headers",
    "drop-receipts", "wrong-receipt-id", "body-on-receipt", "accept-undefined-escape",
    "no-message-id", "drop-user-headers", "trim-headers", "limit-close-without-error",
    "accept-body-on-subscribe", "accept-unknown-transaction", "accept-frames-before-connect",
    "ignore-content-length",
)
GOAL = (1.0, 1.5)


def broker_of(fault: str) -> str:
    return f"reference+{fault}" if fault else "reference"


def broker_id(fault: str) -> str:
    """The broker_id its findings carry."""
    return f"reference@embedded+{fault}" if fault else "reference@embedded"


def campaign(out: Path, faults: list[str], seconds: float, seed: int, master: str,
             package: Path) -> None:
    """`pipeline fuzz` of the `conformance` package in the folder `package`."""
    flags = [f for fault in faults for f in ("--broker", broker_of(fault))]
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "pipeline", "fuzz", *flags, "--seeds", "1",
         "--first-seed", str(seed), "--time", f"{seconds:g}s", "--output", str(out),
         "--master", master],
        capture_output=True, text=True, cwd=package,
        env={**os.environ, "PYTHONPATH": str(package)},
        timeout=len(faults) * (seconds + 60) + 300)
    if done.returncode not in (0, 1):
        raise SystemExit(f"pipeline fuzz failed (exit {done.returncode}): "
                         f"{done.stderr.strip()[-400:]}")
    print(done.stdout.strip())


def table(out: Path, faults: list[str]) -> tuple[list[tuple[str, int, int, int]], int]:
    """(fault, findings, buckets, mixed buckets) per fault, and the mixed buckets in all."""
    findings: Counter[str] = Counter()
    records = out / "findings" / "findings-campaign.jsonl"
    for line in records.read_text(encoding="ascii").splitlines():
        findings[json.loads(line)["broker_id"]] += 1
    buckets: list[list[str]] = []
    if (out / "buckets").is_dir():
        rows = ds.dataset(out / "buckets", format="parquet", partitioning="hive").to_table(
            columns=["brokers"]).to_pylist()
        buckets = [list(r["brokers"]) for r in rows]
    rows_out = []
    for fault in faults:
        mine = [b for b in buckets if broker_id(fault) in b]
        rows_out.append((fault or "(none)", findings[broker_id(fault)], len(mine),
                         sum(len(b) > 1 for b in mine)))
    return rows_out, sum(len(b) > 1 for b in buckets)


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--time", type=float, default=30.0, help="seconds per campaign")
    options.add_argument("--seed", type=int, default=1)
    options.add_argument("--master", default="local[1]")
    options.add_argument("--fault", action="append", metavar="NAME",
                         help=f"a fault to plant (repeatable; default: {', '.join(FAULTS)})")
    options.add_argument("--control", action="store_true",
                         help="also fuzz the reference broker with no fault")
    options.add_argument("--keep", metavar="DIR", help="write the campaigns here, and keep them")
    options.add_argument("--checkout", metavar="DIR", type=Path, default=ROOT,
                         help="measure the tool in this folder (default this checkout), e.g. "
                              "an earlier commit: git archive COMMIT | tar -x -C DIR")
    args = options.parse_args()
    faults = list(dict.fromkeys(args.fault or FAULTS))
    planted = faults + ([""] if args.control else [])

    with tempfile.TemporaryDirectory(prefix="bench-buckets-") as scratch:
        out = Path(args.keep) if args.keep else Path(scratch)
        started = time.monotonic()
        campaign(out, planted, args.time, args.seed, args.master, args.checkout.resolve())
        rows, mixed = table(out, planted)
    print(f"\n{len(faults)} faults, one campaign each: seed {args.seed}, {args.time:g} s, "
          f"{args.master}; {time.monotonic() - started:.0f} s in all\n")
    print("| planted fault | findings | buckets | mixed buckets |")
    print("| --- | ---: | ---: | ---: |")
    for fault, found, buckets, mine_mixed in rows:
        print(f"| {fault} | {found} | {buckets} | {mine_mixed} |")
    found_some = [r for r in rows if r[0] != "(none)" and r[1]]
    per_fault = sum(r[2] for r in found_some) / len(found_some) if found_some else 0.0
    silent = [r[0] for r in rows if r[0] != "(none)" and not r[1]]
    print(f"\nbuckets per fault (over the {len(found_some)} faults with findings): "
          f"{per_fault:.2f}  goal {GOAL[0]:g} to {GOAL[1]:g}; mixed buckets: {mixed}  goal 0")
    if silent:
        print(f"no finding for: {', '.join(silent)}")


if __name__ == "__main__":
    main()
