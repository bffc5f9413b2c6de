"""The coverage build (fuzz/coverage_build.py): the mypyc modules compiled by clang with
libFuzzer's coverage, and libFuzzer beside them. Built once here (about half a minute), its
harnesses count the compiled codec's own edges instead of tracing its Python, say so, and
still find every planted fault, with a reproducer that replays in that build."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_compiled import built
from test_fuzz_codec import PLANTED, harness

ROOT = Path(__file__).resolve().parents[1]
FUZZ = ROOT / "fuzz"
sys.path.insert(0, str(FUZZ))
from coverage_build import LIBFUZZER  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built(tmp_path_factory.mktemp("coverage"), coverage=True)


def test_the_build_holds_libfuzzer_and_modules_that_need_it(site: Path) -> None:
    assert (site / LIBFUZZER).is_file()
    # Its compiled modules call libFuzzer's hooks: without libFuzzer they cannot load.
    plain = subprocess.run([sys.executable, "-c", "import conformance.codec.parser"],
                           cwd=site, capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(site)})
    assert plain.returncode != 0 and "undefined symbol: __san" in plain.stderr, plain.stderr


def test_the_parser_harness_counts_the_compiled_codecs_own_coverage(site: Path,
                                                                   tmp_path: Path) -> None:
    done = harness("parser", "-runs=3000", f"-artifact_prefix={tmp_path}/", str(tmp_path),
                   str(FUZZ / "corpus" / "parser"), site=site)
    assert done.returncode == 0, done.stdout[-3000:]
    said = re.search(r"^INFO: codec (.*) \((.*)\); traced from source: (.*?); counting their "
                     r"own coverage: (.*)$", done.stdout, re.M)
    assert said is not None, done.stdout[-3000:]
    assert said.group(1) == "compiled (mypyc) with clang's coverage"
    assert said.group(2) == str(site / "conformance") and said.group(3) == "none"
    assert "conformance.codec.parser" in said.group(4)
    # libFuzzer took the compiled codec's counters (only the codec's: the allowlist leaves
    # the harness's checks and the broker out), and the runs reached many of their edges
    counters = re.search(r"INFO: Loaded 1 modules\s+\((\d+) inline 8-bit counters\)",
                         done.stdout)
    assert counters is not None and 2000 < int(counters.group(1)) < 20_000, done.stdout[-3000:]
    cov = re.search(r"DONE\s+cov: (\d+)", done.stdout)
    assert cov is not None and int(cov.group(1)) > 800, done.stdout[-3000:]


@pytest.mark.parametrize("plant", sorted(PLANTED))
def test_a_planted_fault_is_found_in_the_coverage_build(site: Path, plant: str,
                                                        tmp_path: Path) -> None:
    # no-escape patches the encoder's module, which compiled code would not see: the harness
    # traces that module from source for the run, and says so.
    target = PLANTED[plant]
    result = harness(target, "-runs=20000", f"-artifact_prefix={tmp_path}/", str(tmp_path),
                     str(FUZZ / "corpus" / target), plant=plant, site=site)
    assert result.returncode != 0
    assert "InvariantBroken" in result.stdout, result.stdout[-3000:]
    (crash,) = tmp_path.glob("crash-*")
    assert harness(target, str(crash), plant=plant, site=site).returncode != 0
    replay = harness(target, str(crash), site=site)
    assert replay.returncode == 0, replay.stdout[-3000:]
