"""The build with STOMP_CONFORMANCE_MYPYC=1 (setup.py): a wheel whose codec and broker are
compiled by mypyc must behave as the pure-Python package does. Built once here by
fuzz/coverage_build.py (its plain build, about a minute) into a folder put first on
PYTHONPATH, it runs the fault self-test (the catalogue first) and the codec and broker tests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fuzz"))
from coverage_build import BuildError, build  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

TESTS = ["tests/test_broker_protocol.py", "tests/test_broker.py", "tests/test_parser.py",
         "tests/test_transport.py"]


def compiled_run(site: Path, *args: str, timeout: float = 600,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python ARGS` with the compiled package first on the path (its folder as the working
    directory, so that this checkout's own `conformance` is not found first)."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=site,
                          timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(site), **(env or {})})


def built(work: Path, *, coverage: bool) -> Path:
    """fuzz/coverage_build.py's build into `work`; where it fails, the test fails in CI
    (.ci/install puts the compilers and headers in) and is skipped, saying why, elsewhere."""
    what, needs = (("coverage build", "clang with its libFuzzer") if coverage
                   else ("mypyc build", "a C compiler"))
    try:
        return build(work, coverage=coverage)
    except BuildError as error:
        if os.environ.get("CI"):
            pytest.fail(f"the {what} failed: {error}")
        pytest.skip(f"the {what} failed here ({needs} and Python's headers are needed): "
                    f"{error}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built(tmp_path_factory.mktemp("mypyc"), coverage=False)


def test_the_wheel_holds_compiled_modules(site: Path) -> None:
    compiled = {str(path.relative_to(site)).split(".")[0].replace("/", ".")
                for path in (site / "conformance").rglob("*.so")}
    assert compiled == {"conformance.codec.events", "conformance.codec.commandline",
                        "conformance.codec.escaping",
                        "conformance.codec.encoder", "conformance.codec.parser",
                        "conformance.codec.headblock",
                        "conformance.broker.destinations", "conformance.broker.outgoing",
                        "conformance.broker.protocol", "conformance.broker.session",
                        "conformance.fuzz.parsing.draw", "conformance.fuzz.parsing.readings"}
    loaded = compiled_run(site, "-c", "import conformance.broker.session as m; print(m.__file__)")
    assert loaded.stdout.strip().endswith(".so"), loaded.stdout + loaded.stderr


def test_the_catalogue_passes_and_every_fault_fails_a_case_on_the_compiled_broker(
        site: Path) -> None:
    # the self-test's first run is the catalogue against the clean compiled broker
    done = compiled_run(site, "-m", "conformance", "selftest", "--json")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["ok"] and report["kill_rate"] == 1.0 and report["idle_faults"] == []
    assert report["case_runs"] > 200 and report["clean"] == {"passed": report["case_runs"]}


def test_codec_and_broker_tests_pass_on_the_compiled_package(site: Path) -> None:
    # The compiled modules are imported before pytest starts, so every test module gets them.
    script = ("import sys, pytest, conformance.codec.parser as p, conformance.broker.session as s\n"
              "assert p.__file__.endswith('.so') and s.__file__.endswith('.so')\n"
              "sys.exit(pytest.main(sys.argv[1:]))")
    # in this heavy test's process, without the timing tests: beside heavy work their clocks
    # would measure the machine (the self-test above times the compiled heart-beats); with
    # Hypothesis's everyday profile, as the pure-Python run has the CI one
    done = compiled_run(site, "-c", script, "-q", "-n", "0", "-m", "not timing", "-p",
                        "no:cacheprovider", f"--rootdir={ROOT}",
                        *(str(ROOT / test) for test in TESTS), env={"CI": ""})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout


@pytest.mark.parametrize("harness", ["parser", "roundtrip"])
def test_the_atheris_harnesses_run_the_compiled_codec_and_trace_its_source(
        site: Path, harness: str, tmp_path: Path) -> None:
    # The parser harness's reference reading runs the compiled parser, its traced reading a
    # copy compiled from the source beside it; the others trace the modules they need.
    done = compiled_run(site, str(ROOT / "fuzz" / f"{harness}.py"), "-runs=2000",
                        f"-artifact_prefix={tmp_path}/", str(tmp_path),
                        str(ROOT / "fuzz" / "corpus" / harness))
    assert done.returncode == 0, done.stderr[-3000:]
    said = re.search(r"^INFO: codec (.*) \((.*)\); traced from source(.*)$", done.stderr, re.M)
    assert said is not None, done.stderr[-3000:]
    assert said.group(1) == "compiled (mypyc)" and said.group(2) == str(site / "conformance")
    assert ("beside the installed modules" in said.group(3)) == (harness == "parser")
    cov = re.search(r"DONE\s+cov: (\d+)", done.stderr)
    assert cov is not None and int(cov.group(1)) > 100, done.stderr[-3000:]
