"""The pipeline on a real Spark cluster: a standalone master and two workers (one core and
1 GiB each) started on loopback from PySpark's own jars, nothing downloaded; `pipeline all`
and `pipeline fuzz` run against it as a user would (`--master spark://...`), and what they
write is compared with local mode's on the same input. The executors are separate JVMs
started by the workers, running this checkout's Python; OUTPUT is a folder on this machine,
which every executor sees."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pyspark
import pytest
from helpers import cli

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

#: Seconds the master and the workers get to start and register.
READY_S = 120
#: The executors' settings: small, so that two fit next to the rest of the suite, and
#: quick to start (the JIT's first tier); the driver starts from a class-data archive.
EXECUTOR = ("--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
            "--conf", "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 "
            "-XX:+UseSerialGC", "--cds",
            # a partition per executor core: Spark's default of 200 tasks per shuffle costs
            # these few rows more than all the rest of the job
            "--shuffle-partitions", "2")


@dataclass
class Cluster:
    url: str
    #: each worker's folder, where it keeps its executors' logs (app-ID/N/)
    work: list[Path]
    #: the drivers' cache (their class-data archive, their log)
    cache: Path


def _daemon(name: str, main: str, args: list[str], folder: Path,
            env: dict[str, str]) -> subprocess.Popen[bytes]:
    home = Path(pyspark.__file__).parent
    with (folder / f"{name}.log").open("wb") as log:
        return subprocess.Popen(
            # the JIT's first tier and a serial GC: a daemon that lives a minute spends
            # more CPU optimising than it would save (the cores are shared with the suite)
            ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
             "-Dspark.master.rest.enabled=false",
             "-cp", f"{home / 'jars'}/*", main, *args],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True)  # its own group: its executors go with it


def _await(log: Path, pattern: str, count: int, processes: list[subprocess.Popen[bytes]]
           ) -> list[re.Match[str]]:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        found = list(re.finditer(pattern, log.read_text(errors="replace")))
        if len(found) >= count:
            return found
        dead = [p.args for p in processes if p.poll() is not None]
        assert not dead, f"exited: {dead}\n{log.read_text()[-3000:]}"
        time.sleep(0.2)
    raise AssertionError(f"{pattern!r} not {count}x in {log} after {READY_S} s:\n"
                         f"{log.read_text()[-3000:]}")


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:  # workers first: each stops its executors
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("cluster")
    home = Path(pyspark.__file__).parent
    # what Spark's scripts would set: a worker builds its executors' class path from them
    scala = next(home.glob("jars/spark-core_*.jar")).name.split("_")[1].split("-")[0]
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_SCALA_VERSION": scala,
           # every daemon, web UI and executor on loopback only
           "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(folder / "local")}
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes.append(_daemon("master", "org.apache.spark.deploy.master.Master",
                                 ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
                                 folder, env))
        master_log = folder / "master.log"
        url = _await(master_log, r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", 1,
                     processes)[0][1]
        work = [folder / f"worker{n}" for n in (1, 2)]
        for n, path in enumerate(work, start=1):
            path.mkdir()
            processes.insert(0, _daemon(
                f"worker{n}", "org.apache.spark.deploy.worker.Worker",
                ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", "1",
                 "--memory", "1g", "--work-dir", str(path), url], folder, env))
        _await(master_log, r"Registering worker 127\.0\.0\.1:\d+ with 1 cores", 2, processes)
        yield Cluster(url, work, folder / "cache")
    finally:
        _stop(processes)


# -- comparing outputs ---------------------------------------------------------------------

def _rows(table: Path) -> list[str]:
    """A Parquet table's rows (the partition column among them), in a canonical order."""
    if not any(table.rglob("*.parquet")):
        return []
    rows = pq.read_table(table).to_pylist()
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in rows)


def _tables(output: Path) -> dict[str, list[str]]:
    """Every table under OUTPUT by its path (a folder holding _SUCCESS), with its rows;
    not the staged records, which name the files they came from."""
    tables = {done.parent.relative_to(output): done.parent for done in output.rglob("_SUCCESS")}
    return {str(name): _rows(path) for name, path in tables.items()
            if name.parts[0] != "records"}


def _report(output: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((output / "report-data.json").read_text())
    data.pop("generated")
    return data


def _executor_logs(cluster: Cluster) -> list[Path]:
    return [path for work in cluster.work for path in work.glob("app-*/*/stderr")]


# -- the tests -----------------------------------------------------------------------------

def _pipeline(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`stomp-conformance pipeline ARGS`, its Spark log and archive in the cluster's
    folder."""
    return cli("pipeline", *args, env={"XDG_CACHE_HOME": str(cluster.cache)})


def test_pipeline_all_on_the_cluster_writes_what_local_mode_writes(
        cluster: Cluster, real_records: Path, local_pipeline: Path, tmp_path: Path) -> None:
    local, remote = local_pipeline / "out", tmp_path / "cluster"
    done = _pipeline(cluster, "all", "--input", str(real_records), "--output", str(remote),
                     "--master", cluster.url, *EXECUTOR)
    assert (local_pipeline / "returncode").read_text() == "0"
    assert done.returncode == 0, done.stderr
    assert f"spark {cluster.url}: started" in done.stderr
    # the work ran in executors the workers started: both workers ran one for this app
    assert {log.parents[2] for log in _executor_logs(cluster)} == set(cluster.work)
    tables = _tables(remote)
    assert set(tables) == {"matrix/by_run", "matrix/by_version", "regressions/cases",
                           "regressions/statements", "flaky", "trends/runs", "trends/daily"}
    assert tables["matrix/by_run"] and tables["regressions/cases"]
    assert tables == _tables(local)
    assert _report(remote) == _report(local)


def test_pipeline_fuzz_on_the_cluster_and_its_buckets_as_local_mode_makes_them(
        cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "fuzz"
    done = _pipeline(cluster, "fuzz", "--broker", "reference+error-without-close",
                     "--seeds", "2", "--time", "3s", "--minimise", "0.5", "--output", str(out),
                     "--master", cluster.url, *EXECUTOR)
    assert done.returncode in (0, 1), done.stderr
    # each seed was a task with its campaign folder, each found the fault's bug
    for seed in (0, 1):
        assert re.search(rf"reference\+error-without-close seed {seed}: [1-9]\d* findings",
                         done.stdout), done.stdout
        assert (out / "campaigns" / f"reference_error-without-close-seed{seed}").is_dir()
    findings = out / "findings" / "findings-campaign.jsonl"
    seeds = {json.loads(line)["seed"] for line in findings.read_text().splitlines()}
    assert seeds == {0, 1}
    assert _rows(out / "buckets")
    # the same findings bucketed in local mode: the same buckets and report data
    local = tmp_path / "local"
    again = _pipeline(cluster, "buckets", "--input", str(findings), "--output", str(local),
                      "--master", "local[2]", "--cds")
    assert again.returncode == 0, again.stderr
    assert "class-data archive used" in again.stderr  # made by a driver of the cluster
    assert _rows(local / "buckets") == _rows(out / "buckets")
    assert _report(local) == _report(out)
