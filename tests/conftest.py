import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli
from hypothesis import HealthCheck, settings

# CI machines are slow and shared: no per-example deadline, more examples than locally.
settings.register_profile("ci", deadline=None, max_examples=300,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def _broker(*flags: str) -> tuple[subprocess.Popen[str], int]:
    """The reference broker in a child process on a free port: (process, port)."""
    process = subprocess.Popen([sys.executable, "-m", "conformance", "broker", "--port", "0",
                                *flags], stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    line = process.stderr.readline()
    assert "listening on 127.0.0.1:" in line, line
    return process, int(line.rsplit(":", 1)[1].split()[0])


@pytest.fixture(scope="session")
def real_records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Records of two real runs of the header cases on the reference broker: clean, then
    with the trim-headers fault (a regression between them, on one build)."""
    folder = tmp_path_factory.mktemp("records")
    clean = cli("run", "--results", str(folder), "-k", "headers")
    assert clean.returncode == 0, clean.stderr
    process, port = _broker("--fault", "trim-headers")
    try:
        faulty = cli("run", "--broker", f"127.0.0.1:{port}", "--results", str(folder),
                     "-k", "headers")
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert faulty.returncode == 1, faulty.stderr
    return folder
