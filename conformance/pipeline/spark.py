"""A SparkSession that starts fast and keeps quiet.

On small inputs the JVM's start dominates, so the session: turns the UI and the progress
bar off; logs errors only, into a file (`SparkSettings.log_file`), so the terminal never
shows a Java stack trace; in local mode uses few shuffle partitions; runs the driver's JIT
at its first tier only (`-XX:TieredStopAtLevel=1`: a short job never lives long enough for
the second to pay off); and, with `cds`, maps the classes the driver loaded last time from
a class-data-sharing archive instead of parsing and verifying thousands of them again. The
first session with `cds` writes the archive when its JVM exits (`stop`); it is keyed by the
Java and the class path, so an upgrade makes a new one. The driver's class path is PySpark's
jars but MLlib's (`spark_home`). benchmarks/pipeline.py measures each step.

The driver always runs here (PySpark's client mode), so its JVM flags apply whatever the
master; with another master than local (`spark://...`, `yarn`, `k8s://...`) the cluster's
own configuration decides the rest (the executors, the shuffle partitions). A standalone
master on loopback (`spark://127.0.0.1:7077`, a cluster on this machine) has the driver
listen on loopback too, where its executors reach it."""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import IO, cast

import pyspark
from pyspark.sql import SparkSession

LOCAL_DEFAULT = "local[*]"
#: Flags of the driver's JVM in local mode, where it is the executor too: the throughput
#: collector (G1's concurrent threads cost a small machine CPU the tasks need).
LOCAL_JVM = ("-XX:+UseParallelGC",)
#: With `fast_jvm` (any master): the JIT's first tier only, and no JVM log lines (the CDS
#: archive's warnings about classes it skips) on the terminal.
FAST_JVM = ("-XX:TieredStopAtLevel=1", "-Xlog:disable")
#: Without, in local mode: the second tier only for code that runs long (the tasks' inner
#: loops), not for the thousands of methods of Spark's planning it would otherwise compile on
#: the cores the tasks need: a third less JIT work on 1M records, tasks as fast at 10M.
FULL_JVM = ("-XX:Tier4InvocationThreshold=100000", "-XX:Tier4CompileThreshold=150000",
            "-XX:Tier4BackEdgeThreshold=400000")
#: Files a task keeps open at once when it writes a partitioned table, in local mode.
LOCAL_WRITERS = 16
#: Seconds after which an archive still being written is taken for a killed session's.
STALE_PART_S = 3600
#: Octets the log may hold before a session starts it anew.
LOG_LIMIT = 8 << 20
#: Jars of PySpark's distribution the driver's class path leaves out: MLlib registers its SQL
#: functions into every new session through a session-extension service, 0.4 s of Scala
#: reflection at each start, and no pipeline job calls them.
LEFT_OUT_JARS = ("spark-mllib_",)


class SparkStartError(Exception):
    """Spark could not start (no Java, a bad master URL, ...): one line."""


@dataclass(frozen=True)
class SparkSettings:
    master: str = LOCAL_DEFAULT
    app_name: str = "stomp-conformance"
    #: shuffle partitions; None: twice the cores in local mode, Spark's default elsewhere
    shuffle_partitions: int | None = None
    #: the driver's heap, e.g. "4g" (local mode: the driver is the executor)
    driver_memory: str | None = None
    #: the driver's JIT at its first tier only (else, in local mode, FULL_JVM)
    fast_jvm: bool = True
    #: start the driver from, or make, a class-data-sharing archive
    cds: bool = False
    #: where the archive and the log live (default: the user's cache)
    cache_dir: Path | None = None
    #: more Spark settings, applied last
    conf: tuple[tuple[str, str], ...] = field(default=())

    @property
    def local(self) -> bool:
        return self.master == "local" or self.master.startswith("local[")

    @property
    def loopback(self) -> bool:
        """Local mode, or a standalone master on this machine's loopback."""
        if self.local:
            return True
        if not self.master.startswith("spark://"):
            return False
        hosts = [h.rpartition(":")[0].strip("[]") for h in self.master[8:].split(",")]
        return all(h == "localhost" or _loopback_ip(h) for h in hosts)

    @property
    def cache(self) -> Path:
        if self.cache_dir is not None:
            return self.cache_dir
        root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(root) / "stomp-conformance" / "spark"

    @property
    def log_file(self) -> Path:
        return self.cache / "spark.log"


@dataclass
class Started:
    """A running session and how it started."""

    spark: SparkSession
    settings: SparkSettings
    seconds: float
    #: "used", "writing" (made when the JVM exits), or "off"
    cds: str
    _archive: Path | None = None
    _partial: Path | None = None


def _loopback_ip(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _cores(master: str) -> int:
    inside = master[len("local["):-1] if master.startswith("local[") else "1"
    if inside in ("*", ""):
        return os.cpu_count() or 1
    try:
        return max(int(inside.split(",")[0]), 1)
    except ValueError:
        return os.cpu_count() or 1


@cache
def _java_version() -> str:
    java = shutil.which("java", path=os.environ.get("JAVA_HOME", "") + "/bin:" +
                        os.environ.get("PATH", ""))
    if java is None:
        raise SparkStartError("Spark needs Java 17 or later and no `java` is on the PATH: "
                              "install a JRE (Debian: openjdk-17-jre-headless) or set "
                              "JAVA_HOME")
    shown = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    return (shown.stderr.splitlines() or ["unknown"])[0] + "|" + os.path.realpath(java)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _jar_names(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "jars").glob("*.jar"))


def spark_home(cache: Path) -> Path:
    """PySpark's distribution as the driver sees it: a folder in the cache that links every
    entry of PySpark's folder but `jars`, and there every jar but LEFT_OUT_JARS. Made under a
    temporary name, then renamed whole; keyed by the jars, so an upgrade makes a new one.
    PySpark's own folder where the cache cannot hold links."""
    source = Path(pyspark.__file__).parent
    jars = _jar_names(source)
    home = cache / f"home-{pyspark.__version__}-{_digest(str(source), *jars)}"
    if home.is_dir():
        return home
    part = home.with_name(f"{home.name}.{os.getpid()}.part")
    try:
        (part / "jars").mkdir(parents=True)
        for entry in source.iterdir():
            if entry.name != "jars":
                (part / entry.name).symlink_to(entry)
        for name in jars:
            if not name.startswith(LEFT_OUT_JARS):
                (part / "jars" / name).symlink_to(source / "jars" / name)
        part.rename(home)
    except OSError:  # no links here, or another session renamed its copy first
        shutil.rmtree(part, ignore_errors=True)
    return home if home.is_dir() else source


def archive_path(settings: SparkSettings, home: Path) -> Path:
    """The CDS archive for this Java and the class path of this Spark home."""
    key = _digest(pyspark.__version__, _java_version(), str(home / "jars"), *_jar_names(home))
    return settings.cache / f"classes-{pyspark.__version__}-{key}.jsa"


def _java_options(settings: SparkSettings, archive: Path | None, partial: Path | None
                  ) -> str:
    config = Path(__file__).with_name("log4j2.properties")
    options = [f"-Dlog4j2.configurationFile={config.as_uri()}"]
    if settings.local:
        options += LOCAL_JVM
    if settings.fast_jvm:
        options += FAST_JVM
    elif settings.local:
        options += FULL_JVM
    if archive is not None:
        options.append(f"-XX:SharedArchiveFile={archive}")
    elif partial is not None:
        options.append(f"-XX:ArchiveClassesAtExit={partial}")
    return " ".join(options)


def _builder(settings: SparkSettings, java_options: str) -> SparkSession.Builder:
    builder = (SparkSession.builder.master(settings.master).appName(settings.app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               # a broker named "1" stays a string when partitions are read back
               .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
               # timestamps as Parquet's INT64 microseconds (what pyarrow and Spark read
               # as the same instants), not the legacy INT96: a twelve-octet binary per
               # value through a dictionary of binaries cost a tenth of the matrix's write
               .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
               .config("spark.driver.extraJavaOptions", java_options))
    partitions = settings.shuffle_partitions
    if settings.local:
        partitions = partitions or 2 * _cores(settings.master)
        # A task writes its rows of a table partitioned by broker into one open file per
        # broker instead of sorting them by broker first (a sort of every row written; past
        # LOCAL_WRITERS brokers a task sorts the rest): a fifth less work for the matrix.
        builder = (builder.config("spark.sql.optimizer.plannedWrite.enabled", "false")
                   .config("spark.sql.maxConcurrentOutputFileWriters", str(LOCAL_WRITERS)))
    if settings.loopback:
        # Spark on this machine talks to itself only: no host name lookup, nothing on other
        # interfaces.
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
    if partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    if settings.driver_memory is not None:
        builder = builder.config("spark.driver.memory", settings.driver_memory)
    for key, value in settings.conf:
        builder = builder.config(key, value)
    return builder


def start(settings: SparkSettings | None = None) -> Started:
    """Start Spark (one JVM per process: a second call while one runs returns that one).
    SparkStartError in one line when it cannot."""
    settings = settings or SparkSettings()
    _java_version()  # fails early, in one line, without Java
    settings.cache.mkdir(parents=True, exist_ok=True)
    # The executors (Python workers) run this interpreter, where this package is installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    _drop_stale_parts(settings.cache)
    home = Path(os.environ.get("SPARK_HOME") or spark_home(settings.cache))
    target = archive_path(settings, home) if settings.cds else None
    archive = partial = None
    state = "off"
    if target is not None:
        if target.is_file():
            archive, state = target, "used"
        else:
            partial, state = target.with_suffix(f".{os.getpid()}.part"), "writing"
    began = time.perf_counter()
    try:
        with _stderr_into(settings.log_file), _launching_from(home):
            spark = _builder(settings, _java_options(settings, archive, partial)).getOrCreate()
    except Exception as error:  # py4j and Spark raise many kinds; the user needs one line
        raise SparkStartError(f"Spark did not start on {settings.master}: "
                              f"{first_line(error)} (log: {settings.log_file})") from None
    spark.sparkContext.setLogLevel("ERROR")
    return Started(spark, settings, time.perf_counter() - began, state,
                   target if partial is not None else None, partial)


def _drop_stale_parts(cache: Path) -> None:
    """Archives (a few hundred MB each) and Spark homes half made by a session that was
    killed."""
    for part in cache.glob("*.part"):
        with contextlib.suppress(OSError):
            if time.time() - part.lstat().st_mtime > STALE_PART_S:
                if part.is_dir():
                    shutil.rmtree(part)
                else:
                    part.unlink()


@contextlib.contextmanager
def _launching_from(home: Path) -> Iterator[None]:
    """PySpark's launcher finds spark-submit through SPARK_HOME (given, the scripts need not
    start a Python to look for it). Set only while the JVM starts: a later session with
    another cache makes its own home."""
    saved = os.environ.get("SPARK_HOME")
    os.environ["SPARK_HOME"] = str(home)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["SPARK_HOME"]
        else:
            os.environ["SPARK_HOME"] = saved


@contextlib.contextmanager
def _stderr_into(log: Path) -> Iterator[None]:
    """The JVM started inside inherits a standard error that is the log file: its log
    lines, its warnings and its Python workers' tracebacks land there, not on the terminal.
    This process's own standard error is back once the JVM runs."""
    sys.stderr.flush()
    with contextlib.suppress(OSError):
        if log.stat().st_size > LOG_LIMIT:  # sessions append; the log stays bounded
            log.unlink()
    saved = os.dup(2)
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def stop(started: Started) -> None:
    """Stop Spark and wait for its JVM to exit, so that nothing of it outlives the command
    (and the CPU it used is this process's children's). A session writing the CDS archive
    waits longer: the JVM writes the archive as it exits; it is moved into place whole."""
    from pyspark import SparkContext

    started.spark.stop()
    gateway = SparkContext._gateway
    process = cast("subprocess.Popen[bytes] | None", getattr(gateway, "proc", None))
    if gateway is None or process is None:
        return
    # No command after this one: a Python handle's finalizer would otherwise write to a JVM
    # that is exiting, and py4j prints each such failure on stderr with a traceback.
    with contextlib.suppress(Exception):
        gateway.shutdown()
    with contextlib.suppress(OSError):
        cast(IO[bytes], process.stdin).close()  # the JVM exits when its stdin closes
    try:
        process.wait(timeout=600 if started._partial is not None else 60)
    except subprocess.TimeoutExpired:
        return
    # the next start() in this process launches a new JVM
    SparkContext._gateway = None
    SparkContext._jvm = None
    partial, archive = started._partial, started._archive
    if partial is not None and archive is not None and partial.is_file() \
            and partial.stat().st_size > 0:
        os.replace(partial, archive)


def first_line(error: BaseException) -> str:
    """The one line of an error from Spark or py4j that says what went wrong: the Java
    exception's message without its package, no stack frames."""
    text = str(getattr(error, "desc", None) or error)
    for line in text.splitlines():
        line = line.strip().removeprefix(": ")
        if not line or line.startswith(_NOISE):
            continue
        return _JAVA_CLASS.sub(r"\1", line)[:300]
    return type(error).__name__


_NOISE = ("at ", "Traceback", "py4j.", "JVM stacktrace", "An error occurred while calling")
_JAVA_CLASS = re.compile(r"^(?:[a-z_$][\w$]*\.)+([A-Z][\w$]*(?:Exception|Error)\b)")
