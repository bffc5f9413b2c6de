"""The statement catalogue against the spec texts, and the `spec` verb."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import cli, spec_text

from conformance.spec import Level, catalogue, rule_of, statement_id

KEYWORD = re.compile(r"\b(MUST NOT|MUST|REQUIRED|SHALL NOT|SHALL|SHOULD NOT|SHOULD|RECOMMENDED"
                     r"|MAY|OPTIONAL)\b")


def normalised(version: str) -> str:
    text = spec_text(version)
    return re.sub(r"\s+", " ", text)


def test_every_quote_is_in_the_text_of_its_versions() -> None:
    texts = {v: normalised(v) for v in ("1.0", "1.1", "1.2")}
    for statement in catalogue():
        assert any(statement.quote in texts[v] for v in statement.versions), statement.id


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_every_key_word_of_the_text_is_in_a_statement(version: str) -> None:
    text = normalised(version)
    covered = [False] * len(text)
    for statement in catalogue().select(version=version):
        for match in re.finditer(re.escape(statement.quote), text):
            covered[match.start():match.end()] = [True] * (match.end() - match.start())
    conformance = text.index('The key words "MUST"')
    definition = range(conformance, text.index(".", text.index("RFC 2119", conformance)))
    missing = [text[max(0, m.start() - 60):m.end() + 20] for m in KEYWORD.finditer(text)
               if not covered[m.start()] and m.start() not in definition]
    assert missing == []


def test_ids_are_unique_stable_and_levels_match_their_quote() -> None:
    statements = list(catalogue())
    assert len({s.id for s in statements}) == len(statements) > 150
    for s in statements:
        assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*", s.id), s.id
        if not s.implicit:
            assert s.level.value in s.quote, s.id


def test_every_id_the_code_names_is_in_the_catalogue() -> None:
    package = Path(__file__).resolve().parents[1] / "conformance"
    named = set()
    for source in [*package.glob("codec/*.py"), *package.glob("spec/*.py")]:
        named |= set(re.findall(r'"([a-z][a-z0-9-]*\.[a-z0-9-]+(?:\.[a-z0-9-]+)*)"',
                                source.read_text()))
    named -= {"statements.yaml"}
    assert named and sorted(n for n in named if n not in catalogue()) == []


def test_older_wording_is_found_per_version() -> None:
    assert statement_id("value-encoding.undefined-escape-fatal", "1.1") == \
        "value-encoding.undefined-escape-fatal-v11"
    assert statement_id("value-encoding.undefined-escape-fatal", "1.2") == \
        "value-encoding.undefined-escape-fatal"
    assert statement_id("content-length.nul-terminated", "1.0") == \
        "content-length.nul-terminated-v11"


def test_every_version_of_a_rule_names_the_rule() -> None:
    for statement in catalogue():
        for version in statement.versions:
            assert statement_id(rule_of(statement.id), version) == statement.id
    assert rule_of("content-length.nul-terminated-v11") == "content-length.nul-terminated"
    # an older statement whose name 1.2 does not use is a rule of its own
    assert rule_of("message.message-id-required-v10") == "message.message-id-required-v10"
    assert rule_of("not.a-statement-v11") == "not.a-statement-v11"


def test_select_filters_by_level_party_section_and_version() -> None:
    musts = catalogue().select(level="must")
    assert musts and all(s.level.strength == "must" for s in musts)
    assert {s.level for s in catalogue().select(level="MUST NOT")} == {Level.MUST_NOT}
    servers = catalogue().select(party="server")
    assert {s.party.value for s in servers} == {"server", "both"}  # both bind the server too
    assert {s.party.value for s in catalogue().select(party="both")} == {"both"}
    assert all("heart" in s.section.lower() for s in catalogue().select(section="Heart"))
    assert all("1.0" in s.versions for s in catalogue().select(version="1.0"))



def test_spec_json_lists_the_catalogue_and_nothing_else() -> None:
    done = cli("spec", "--json")
    assert done.returncode == 0 and done.stderr == ""
    listed = json.loads(done.stdout)
    assert [s["id"] for s in listed] == [s.id for s in catalogue()]
    assert set(listed[0]) >= {"id", "versions", "level", "party", "section", "quote",
                              "observable"}


def test_spec_filters_on_the_command_line() -> None:
    done = cli("spec", "--json", "--level", "should", "--party", "server", "--section", "error")
    listed = json.loads(done.stdout)
    assert listed and all(s["party"] == "server" and "error" in s["section"].lower()
                          and s["level"] in ("SHOULD", "SHOULD NOT", "RECOMMENDED")
                          for s in listed)
    table = cli("spec", "--level", "MUST NOT")
    assert table.returncode == 0 and "subscribe-ack.individual-not-cumulative" in table.stdout


def test_a_bad_flag_is_a_one_line_usage_error() -> None:
    done = cli("spec", "--level", "SOMETIMES")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "unknown level 'SOMETIMES'" in done.stderr
