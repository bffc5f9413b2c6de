"""The command line as a user meets it: output read through a pipe or a CI log keeps each
line whole, `spec --party` counts statements that bind both parties, and the fuzz summary
says which figures are this run's and which the campaign's."""

from __future__ import annotations

import io
import json

import pytest
from helpers import cli
from rich.console import Console

from conformance.cli import parser
from conformance.fuzz.network.display import CampaignDisplay
from conformance.fuzz.network.events import Finished, Stats
from conformance.report.console import make_console
from conformance.spec import catalogue


def test_list_spec_and_show_keep_each_line_whole_through_a_pipe() -> None:
    listed = cli("list", env={"COLUMNS": "80"})
    cases = json.loads(cli("list", "--json").stdout)
    lines = set(listed.stdout.splitlines())
    for c in cases:
        assert f"{c['id']}  {c['level']}  {','.join(c['versions'])}  {c['title']}" in lines
    spec = cli("spec", env={"COLUMNS": "80"})
    quotes = {line for line in spec.stdout.splitlines() if line.startswith("    ")}
    assert quotes == {f"    {s.quote}" for s in catalogue()}
    longest = max(cases, key=lambda c: len(c["file"]))
    shown = cli("show", longest["id"], env={"COLUMNS": "80"})
    assert any(line.startswith(f"{longest['file']}:{longest['line']}  level ")
               for line in shown.stdout.splitlines())


def test_the_console_wraps_only_on_a_terminal(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    long = "/a/folder/" + "deep/" * 30 + "undefined-escapes.yaml:16"
    make_console().print(long)
    make_console(stderr=True).print(long)
    out, err = capsys.readouterr()
    assert out == err == long + "\n"
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich takes the output for a terminal
    monkeypatch.setenv("COLUMNS", "80")
    make_console().print(long)
    assert capsys.readouterr().out.count("\n") > 1


def test_the_probe_verdicts_keep_each_line_whole() -> None:
    done = cli("probe", "--probe", "many-frames", env={"COLUMNS": "40"})
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if "many-frames" in line]
    assert line.startswith("passed") and line.endswith("]")  # the statements close it


def test_spec_party_includes_the_statements_that_bind_both() -> None:
    done = cli("spec", "--level", "must", "--party", "server", "--section", "heart")
    assert done.returncode == 0
    shown = json.loads(cli("spec", "--json", "--level", "must", "--party", "server",
                           "--section", "heart").stdout)
    expected = [s.id for s in catalogue().select(level="must", section="heart")
                if s.party.value in ("server", "both")]
    assert expected and [s["id"] for s in shown] == expected
    assert f"{len(expected)} statements" in done.stdout
    both = json.loads(cli("spec", "--json", "--party", "both").stdout)
    assert both and {s["party"] for s in both} == {"both"}
    client = json.loads(cli("spec", "--json", "--party", "client").stdout)
    assert {s["party"] for s in client} == {"client", "both"}


def test_the_fuzz_summary_tells_this_run_from_the_campaign() -> None:
    screen = io.StringIO()
    display = CampaignDisplay(Console(file=screen, width=80), live=False)
    stats = Stats(elapsed=10.0, budget=10.0, inputs=120, total_inputs=1120, checks=12,
                  anomalies=37, findings={"failed": 2})
    display(Finished(stats, [], "the time is up"))
    text = screen.getvalue()
    summary = text.splitlines()[0]
    assert "this run sent 120 inputs" in summary and "12 liveness checks" in summary
    assert "the campaign so far: 1120 inputs, 37 anomalies (answers the oracle judged off " \
           "the spec" in summary
    assert "findings in the campaign: 2 failed" in text


def test_every_verb_is_in_the_help() -> None:
    help_text = parser().format_help()
    for verb in ("spec", "run", "broker", "fuzz", "replay", "stateful", "probe", "pipeline",
                 "compare", "coverage", "selftest", "list", "show"):
        assert f"    {verb} " in help_text
