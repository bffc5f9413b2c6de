"""Case files: what loads, and the file:line of everything that does not."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from helpers import cli

from conformance.scenario import CaseLoadError, load_cases, load_catalogue, load_file

GOOD = """\
- id: escaping.undefined-escape-is-fatal
  title: An undefined escape gets ERROR then close
  statements: [value-encoding.undefined-escape-fatal, error.close-after]
  versions: ["1.2"]
  tags: [escaping]
  steps:
    - connect: {}
    - raw:
        data: "SEND\\ndestination:${queue}\\nk:\\\\t\\n\\n\\0"
"""


def write(tmp_path: Path, text: str, name: str = "case.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def valid(tmp_path: Path) -> Path:
    return write(tmp_path, """\
- id: receipts.receipt-for-send
  title: SEND with a receipt header gets a RECEIPT
  statements: [receipt.receipt-id-required]
  versions: ["1.2"]
  steps:
    - connect: {}
    - send: {command: SEND, headers: {destination: "${queue}", receipt: r1}, body: hi}
    - expect: {command: RECEIPT, headers: {receipt-id: r1}, capture: {rid: receipt-id}}
    - send: {command: SEND, headers: [[destination, "${queue}"], [x, "${rid}"]]}
- id: heart-beat.optional-header
  title: heart-beat is optional
  statements: [heart-beating.optional, heart-beating.missing-header]
  versions: ["1.1", "1.2"]
  level: should
  steps:
    - sleep: 0.1
""")


def test_a_valid_file_loads_with_levels_and_lines(tmp_path: Path) -> None:
    first, second = load_file(valid(tmp_path))
    assert first.id == "receipts.receipt-for-send" and first.level == "must"
    assert [s.kind for s in first.steps] == ["connect", "send", "expect", "send"]
    assert first.steps[2].line == 8 and first.line == 1 and first.area == "receipts"
    assert second.level == "should"  # overridden: MUST is its strongest statement


MIXED = """\
- id: receipts.mixed
  title: a MUST and a SHOULD, each checked by its own step
  statements: [receipt-header.server-acknowledges, receipt-header.server-acknowledges-v11,
               connecting.reject-error-v11]
  versions: ["1.1", "1.2"]
  steps:
    - connect: {}
    - expect_none: {}
      statements: [connecting.reject-error-v11, receipt-header.server-acknowledges]
"""


def test_a_step_names_the_statements_it_checks_and_is_graded_by_them_per_version(
        tmp_path: Path) -> None:
    (case,) = load_file(write(tmp_path, MIXED))
    step = case.steps[1]
    assert step.kind == "expect_none" and step.line == 8
    assert step.statements == ("connecting.reject-error-v11",
                               "receipt-header.server-acknowledges")
    assert case.level == "must" and case.level_at("1.1", step.statements) == "should"
    assert case.level_at("1.2", step.statements) == "must"
    assert case.at_stake("1.2") == ("receipt-header.server-acknowledges",)
    assert case.levels_at("1.1") == ("must", "should") and case.levels_at("1.2") == ("must",)
    # a step whose statements leave a version of its case without one
    only_v11 = MIXED.replace(", receipt-header.server-acknowledges]", "]")
    with pytest.raises(CaseLoadError, match="names no statement of STOMP 1.2") as caught:
        load_file(write(tmp_path, only_v11))
    assert caught.value.line == 8


@pytest.mark.parametrize(("text", "line", "words"), [
    (GOOD.replace("  tags: [escaping]", "  tags: [escaping"), 6, "YAML syntax"),
    (GOOD.replace("    - raw:", "    - subscribe_like:"), 8, "'subscribe_like' was unexpected"),
    (GOOD.replace("    - connect: {}", "    - connect: {command: HELLO}"), 7,
     "'HELLO' is not one of"),
    (GOOD.replace("value-encoding.undefined-escape-fatal", "value-encoding.nope"), 3,
     "unknown statement 'value-encoding.nope'"),
    (GOOD.replace('["1.2"]', '["1.0"]'), 3, "is not part of STOMP 1.0"),
    (GOOD.replace("${queue}", "${nowhere}"), 9, "unknown variable ${nowhere}"),
    (GOOD.replace("  title: An undefined escape gets ERROR then close\n", ""), 1, "'title'"),
    ("", None, "empty file"),
    (GOOD.replace("    - raw:", "    - expect: {headers: {x: {regex: '\\\\Qa('}}}\n    - raw:"), 8,
     "bad regex"),
    (GOOD.replace("    - connect: {}", "    - connect: {}\n      statements: [error.must-close]"),
     7, "unknown statement 'error.must-close'"),
    (GOOD.replace("    - connect: {}", "    - connect: {}\n      send: {command: X}"), 7,
     "has too many properties"),
])
def test_broken_files_name_file_and_line(tmp_path: Path, text: str, line: int | None,
                                         words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CaseLoadError) as caught:
        load_file(path)
    assert caught.value.line == line and words in caught.value.message
    assert str(caught.value).startswith(f"{path}:{line}:" if line else f"{path}:")
    assert "\n" not in str(caught.value)


def test_a_variable_must_be_captured_before_it_is_used(tmp_path: Path) -> None:
    text = valid(tmp_path).read_text()
    moved = text.replace('    - send: {command: SEND, headers: [[destination, "${queue}"], '
                         '[x, "${rid}"]]}\n', "")
    moved = moved.replace("    - connect: {}\n", '    - connect: {}\n    - send: {command: SEND, '
                          'headers: {x: "${rid}"}}\n', 1)
    with pytest.raises(CaseLoadError, match=r"unknown variable \$\{rid\}"):
        load_file(write(tmp_path, moved, "moved.yaml"))


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    valid(tmp_path)
    (tmp_path / "more").mkdir()
    write(tmp_path, valid(tmp_path).read_text(), "more/again.yml")
    with pytest.raises(CaseLoadError, match="already used at"):
        load_cases([tmp_path])


def test_cases_come_out_in_a_stable_order(tmp_path: Path) -> None:
    assert [c.id for c in load_cases([valid(tmp_path)])] == [
        "heart-beat.optional-header", "receipts.receipt-for-send"]


def test_a_missing_path_is_a_load_error(tmp_path: Path) -> None:
    with pytest.raises(CaseLoadError, match="no such file"):
        load_cases([tmp_path / "nope"])



def test_the_catalogue_digest_names_the_files_read(tmp_path: Path) -> None:
    """The digest covers each file's path under the folder given and its octets: the same
    files anywhere hash alike; a changed octet, a renamed file or another file do not."""
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        (folder / "sub").mkdir(parents=True)
        write(folder, valid(tmp_path).read_text(), "sub/one.yaml")
        write(folder, GOOD, "two.yaml")
    loaded = load_catalogue([first])
    assert loaded.digest == load_catalogue([second]).digest
    assert loaded.digest.startswith("sha256:") and len(loaded.digest) == 7 + 64
    assert [c.id for c in loaded.cases] == [c.id for c in load_cases([first])]
    seen = {loaded.digest}
    write(second, GOOD + "# a comment changes no case, and the catalogue all the same\n",
          "two.yaml")
    seen.add(load_catalogue([second]).digest)
    (second / "two.yaml").rename(second / "three.yaml")
    seen.add(load_catalogue([second]).digest)
    write(second, "", "empty.yml")  # not a case, but a file of the catalogue
    with pytest.raises(CaseLoadError, match="empty file"):
        load_catalogue([second])
    (second / "empty.yml").unlink()
    more = write(tmp_path, GOOD.replace("is-fatal", "is-fatal-too"), "more.yaml")
    seen.add(load_catalogue([second, more]).digest)
    assert len(seen) == 4


def test_a_selection_is_whole_only_for_every_run_of_the_shipped_catalogue(
        tmp_path: Path) -> None:
    """Case runs over the run's transport, as the engine makes them; narrowing a case to
    one version is a selection too."""
    write(tmp_path, valid(tmp_path).read_text().replace(
        '  versions: ["1.1", "1.2"]\n', '  versions: ["1.1", "1.2"]\n  transports: [ws]\n'))
    shipped = load_catalogue([tmp_path], shipped=True)
    every = list(shipped.cases)
    one, two = every
    assert (one.id, one.transports, two.transports) == (
        "heart-beat.optional-header", ("ws",), ("tcp", "ws"))
    whole = shipped.selection(every, "ws")
    assert (whole.whole, whole.selected, whole.total, whole.shipped) == (True, 3, 3, True)
    assert whole.digest == shipped.digest
    assert shipped.selection([two], "tcp").whole  # the ws-only case is not a TCP run
    narrowed = [dataclasses.replace(one, versions=("1.2",)), two]
    for picked, transport in (([two], "ws"), (narrowed, "ws")):
        part = shipped.selection(picked, transport)
        assert not part.whole and part.total == 3 and part.selected == len(picked)
    other = load_catalogue([tmp_path]).selection(every, "ws")
    assert (other.whole, other.shipped, other.selected) == (False, False, 3)


def test_list_and_show_read_case_files(tmp_path: Path) -> None:
    path = valid(tmp_path)
    listed = json.loads(cli("list", "--cases", str(path), "--json", "--level", "must").stdout)
    assert [c["id"] for c in listed] == ["receipts.receipt-for-send"]
    shown = cli("show", "receipts.receipt-for-send", "--cases", str(path))
    assert shown.returncode == 0 and "A `RECEIPT` frame MUST include" in shown.stdout
    assert cli("show", "nope.nope", "--cases", str(path)).returncode == 2


def test_a_broken_case_file_exits_2_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("value-encoding.undefined-escape-fatal", "x.y"))
    done = cli("list", "--cases", str(path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == f"stomp-conformance: {path}:3: unknown statement 'x.y' " \
        "(see `stomp-conformance spec`)"


def test_every_step_kind_of_the_schema_has_an_interpreter() -> None:
    from conformance.runner.steps import STEPS
    from conformance.scenario.loader import schema
    kinds = set(schema()["$defs"]["step"]["properties"]) - {"statements"}  # beside a kind
    assert kinds == set(STEPS)


def test_a_case_on_queues_and_topics_is_one_case_per_kind(tmp_path: Path) -> None:
    """`destinations: [queue, topic]`: the queue run keeps the id, the topic run is
    ID.topic, requires topics, and its ${queue} names a topic; none may require queues."""
    both = GOOD.replace('versions: ["1.2"]', 'versions: ["1.2"]\n  destinations: [queue, topic]')
    queue, topic = load_file(write(tmp_path, both))
    assert (queue.id, queue.destination, queue.requires) == (
        "escaping.undefined-escape-is-fatal", "queue", ())
    assert (topic.id, topic.destination, topic.requires) == (
        "escaping.undefined-escape-is-fatal.topic", "topic", ("topics",))
    assert topic.steps == queue.steps and topic.title.endswith("(on a topic)")
    with pytest.raises(CaseLoadError, match=r"case.yaml:5: .*cannot require queues"):
        load_file(write(tmp_path, both.replace("  tags:", "  requires: [queues]\n  tags:")))


def test_an_alternative_names_statements_the_loader_knows(tmp_path: Path) -> None:
    """An expect_any alternative may name the statements it grades; an unknown one is a
    load error at its line."""
    text = GOOD.replace("    - raw:", """    - expect_any:
        - {grade: passed, expect_error_close: {within: 1}}
        - grade: failed
          expect: {command: ERROR, within: 1}
          statements: [error.close-after]
    - raw:""")
    (case,) = load_file(write(tmp_path, text))
    assert case.steps[1].args[1]["statements"] == ["error.close-after"]
    with pytest.raises(CaseLoadError, match="unknown statement 'error.nope'") as caught:
        load_file(write(tmp_path, text.replace("[error.close-after]", "[error.nope]")))
    assert caught.value.line == 10
