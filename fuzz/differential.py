"""atheris harness for differential parsing: the same bytes through our parser, stomp.py's
and stompest's (conformance.fuzz.parsing.differential). Each disagreement is classified by the
spec; one that no rule explains is a finding (UnclassifiedDisagreement).

    python fuzz/differential.py [--report=PATH] [libFuzzer flags] [corpus dirs]
    python fuzz/differential.py ARTIFACT
    python fuzz/differential.py --classify [--report=PATH] [--markdown=PATH] DIR_OR_FILE...

Fuzzing, --report appends one JSON line per class of disagreement the first time it is
seen. --classify runs no fuzzer: it classifies every input of the corpus directories (a
fuzzing run's grown corpus) and writes every class with its count and shortest example,
as JSON Lines (--report) and a Markdown table (--markdown, else on stdout).

Our parser and the peers' parsing modules are traced, so coverage of their parsers guides
the search.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import _harness


def options(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """This harness's own --flags, and the arguments left for libFuzzer."""
    ours: dict[str, str] = {}
    rest = [argv[0]]
    for arg in argv[1:]:
        if arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            if name not in ("report", "markdown", "classify"):
                sys.exit(f"unknown option {arg}; see {Path(__file__).name}'s docstring")
            ours[name] = value
        else:
            rest.append(arg)
    return ours, rest


#: The peers' modules that split and parse frames: traced with our parser.
PEERS = ("stomp.transport", "stomp.utils", "stompest.protocol.parser")


def load(report: str | None) -> _harness.Load:
    def target(traced: dict[str, ModuleType]) -> Callable[[bytes], None]:
        from conformance.fuzz.parsing.differential import Example, Tally, differential_target

        if report is None:
            return differential_target

        def write(example: Example) -> None:
            _append(report, json.dumps(example.record(), sort_keys=True))

        return functools.partial(differential_target, tally=Tally(), on_new=write)

    return target


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")


def classify(paths: list[str], report: str | None, markdown: str | None) -> None:
    """Classify every input under `paths`; write the report(s)."""
    from conformance.fuzz.parsing.differential import Tally, differential, version_of

    files = sorted(f for p in map(Path, paths)
                   for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
    if not files:
        sys.exit(f"no input files under {' '.join(paths)}")
    tally = Tally()
    for file in files:
        version, stream = version_of(file.read_bytes())
        tally.add(stream, differential(stream, version=version))
    if report:
        Path(report).write_text(tally.jsonl(), encoding="utf-8")
    table = tally.markdown()
    if markdown:
        Path(markdown).write_text(table, encoding="utf-8")
    else:
        sys.stdout.write(table)
    print(f"{len(files)} inputs, {len(tally.classes)} classes of disagreement", file=sys.stderr)


if __name__ == "__main__":
    flags, rest = options(sys.argv)
    for name in ("report", "markdown"):
        if flags.get(name):
            Path(flags[name]).parent.mkdir(parents=True, exist_ok=True)
    if "classify" in flags:
        classify(rest[1:], flags.get("report"), flags.get("markdown"))
    else:
        _harness.main(load(flags.get("report")), argv=rest, trace=(*_harness.PARSER, *PEERS))
