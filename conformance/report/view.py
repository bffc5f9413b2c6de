"""What the pages and summaries (HTML, Markdown, JUnit, compare) read off a JSON report dict:
who the report judges (a broker, or a client library), the level line of each version,
outcome counts overall and per area, the verdict, statement texts. Plain text only: each
format escapes it its own way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.report.rendering import show_hidden
from conformance.report.verdict import report_certification
from conformance.scenario.catalogue import short
from conformance.scenario.model import TRANSPORT_NAMES
from conformance.spec import catalogue

#: Outcomes in the order every page lists them: best first, then the graded failures, then
#: the outcomes that graded nothing.
OUTCOMES = ("passed", "failed", "non-strict", "known-deviation", "informational",
            "unsupported", "error", "skipped")
LEVELS = ("must", "should", "may")


@dataclass(frozen=True, slots=True)
class Subject:
    """Who a report judges, as every format names it."""

    #: "broker", or "client" for a client library's run (`stomp-conformance clients`)
    party: str
    #: the title's parts: "rabbitmq" "at" "127.0.0.1:61613", "stomp.py 9.0.0" "over"
    #: "WebSocket (ws)"
    name: str
    joiner: str
    place: str
    #: (label, value) pairs: the page's meta block and JUnit's properties
    meta: tuple[tuple[str, str], ...]
    #: of those, what a summary's one line adds to its title (Markdown)
    brief: tuple[tuple[str, str], ...]

    @property
    def title(self) -> str:
        return f"{self.name} {self.joiner} {self.place}"

    @property
    def heading(self) -> str:
        return heading(self.party)


def party(report: dict[str, Any]) -> str:
    """"client" for a client run's report, else "broker"."""
    return "client" if "client" in report else "broker"


def heading(party: str) -> str:
    """'STOMP conformance' for a broker, 'STOMP client conformance' for a client."""
    return "STOMP client conformance" if party == "client" else "STOMP conformance"


def library(client: dict[str, Any]) -> str:
    """'stomp.py 9.0.0': the library and version a client report's driver named."""
    named = " ".join(str(part) for part in (client["library"], client["version"]) if part)
    return named or "(the driver named no library)"


def transport_name(transport: str) -> str:
    """'WebSocket (ws)', 'TCP (tcp)'."""
    return f"{TRANSPORT_NAMES.get(transport, transport)} ({transport})"


def subject(report: dict[str, Any]) -> Subject:
    if party(report) == "client":
        client = report["client"]
        offered = [f"{v}: offered {', '.join(ws['offered']) or 'none'}, "
                   f"{'accepted ' + ws['accepted'] if ws['accepted'] else 'refused'}"
                   for v, ws in sorted(client.get("websocket", {}).items())]
        profile = client.get("profile") or "(none)"
        return Subject(
            "client", library(client), "over", transport_name(client["transport"]),
            (("client", library(client)), ("driver", client["driver"]),
             ("transport", transport_name(client["transport"])), ("profile", profile),
             ("versions", ", ".join(client["versions"]) or "none ran"),
             *((("subprotocols", "; ".join(offered)),) if offered else ())),
            (("driver", client["driver"]),
             *((("profile", client["profile"]),) if client.get("profile") else ())))
    broker = report["broker"]
    server = broker["server"] or ""
    return Subject(
        "broker", broker["profile"], "at", broker["url"],
        (("broker", broker["url"]), ("profile", broker["profile"]),
         ("server", server or "(no server header)"),
         ("versions", ", ".join(broker["versions"]) or "none negotiated"),
         *((("subprotocol", broker["subprotocol"]),) if "subprotocol" in broker else ())),
        (("server", server),) if server else ())


def level_line(version: str, levels: dict[str, dict[str, int]]) -> str:
    """'STOMP 1.2: MUST 97/102, SHOULD 30/35, MAY 4/6': passed of those that ran."""
    ran = [f"{level.upper()} {levels[level]['passed']}/{levels[level]['total']}"
           for level in LEVELS if levels.get(level, {}).get("total")]
    return f"STOMP {version}: {', '.join(ran) if ran else 'nothing ran'}"


def level_lines(report: dict[str, Any]) -> list[str]:
    return [level_line(version, levels)
            for version, levels in sorted(report["summary"]["versions"].items())]


def must_score(report: dict[str, Any], version: str) -> str | None:
    """'109/109': MUST cases passed of those that ran at `version`; None if none ran."""
    must = report["summary"]["versions"].get(version, {}).get("must")
    return f"{must['passed']}/{must['total']}" if must and must["total"] else None


def outcome_counts(report: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = report["summary"]["outcomes"]
    return {outcome: counts.get(outcome, 0) for outcome in OUTCOMES}


def area_counts(report: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per area (sorted), the outcome counts of its cases, in OUTCOMES order."""
    areas: dict[str, dict[str, int]] = {}
    for case in report["cases"]:
        counts = areas.setdefault(case["area"], dict.fromkeys(OUTCOMES, 0))
        counts[case["outcome"]] += 1
    return dict(sorted(areas.items()))


def verdict(report: dict[str, Any]) -> tuple[str, str]:
    """(outcome to colour it by, the certification line of verdict.py)."""
    certification = report_certification(report)
    colour = {True: "passed", False: "failed", None: "error"}[certification.conforms]
    return colour, certification.text


def catalogue_line(report: dict[str, Any]) -> str | None:
    """'the shipped catalogue of 0.1.0 (sha256:1a2b3c4d5e6f): 17 of 253 case runs
    selected': what the verdict was given on; None for a report that predates the record."""
    recorded = report.get("certification", {}).get("catalogue")
    if recorded is None:
        return None
    which = f"the shipped catalogue of {recorded['version']}" if recorded["shipped"] else \
        f"cases outside the shipped catalogue of {recorded['version']}"
    runs = f"all {recorded['total']} case runs" if recorded["whole"] else \
        f"{recorded['selected']} of {recorded['total']} case runs selected"
    return f"{which} ({short(recorded['digest'])}): {runs}"


@dataclass(frozen=True, slots=True)
class StatementText:
    id: str
    #: the key word ('MUST NOT'), empty when the catalogue does not know the id
    keyword: str
    #: 'must', 'should', 'may' or '' (unknown)
    strength: str
    quote: str


def statement_texts(ids: list[str]) -> list[StatementText]:
    known = catalogue()
    out = []
    for statement_id in ids:
        if statement_id in known:
            s = known[statement_id]
            out.append(StatementText(s.id, s.level.value, s.level.strength, s.quote))
        else:  # a report from another catalogue: say so rather than fail
            out.append(StatementText(statement_id, "", "", "(not in this catalogue)"))
    return out


def one_line(text: str, *, limit: int = 0) -> str:
    """Broker text on one line, hidden characters shown, cut to `limit` characters."""
    line = show_hidden(" ".join(text.split()))
    return line[:limit - 1] + "\u2026" if 0 < limit < len(line) else line

