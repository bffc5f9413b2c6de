"""A finding's reproducer as a YAML case of the catalogue's format
(conformance/scenario/case.schema.json), so that `stomp-conformance run --cases FILE` runs
it against any broker and it can join the catalogue.

The case does what the fuzzer did: the handshake (with the input's own CONNECT or STOMP
headers), the input's writes as `raw` steps (text where it is UTF-8, hex otherwise), and
then what the spec requires, graded as the oracle grades it:
- well-formed input: the MESSAGEs the session sends itself (body and user headers as
  sent) and the RECEIPT, in the order the broker answered when the finding was made (the
  spec does not order a RECEIPT and a delivery);
- broken input: ERROR then close passes; ERROR left open, a close without ERROR and a
  RECEIPT are graded alternatives; beyond a limit a RECEIPT passes too;
- a crash: the suspect inputs one connection each, then a new connection must still get
  CONNECTED.
"""

from __future__ import annotations

from typing import Any

import yaml

from conformance.codec import Frame, Parser, StompError
from conformance.fuzz.inputs.expected import Delivery, deliveries, frames_of
from conformance.fuzz.inputs.fuzz_input import Expect, FuzzInput
from conformance.fuzz.inputs.mutations import MUTATIONS
from conformance.fuzz.network.findings import Finding
from conformance.fuzz.network.oracle import Anomaly, Kind, grade
from conformance.runner.results import Outcome
from conformance.spec import catalogue, statement_id

WITHIN = 5
_PLAIN_GRADES = {Outcome.FAILED: "failed", Outcome.NON_STRICT: "non-strict",
                 Outcome.INFORMATIONAL: "informational", Outcome.PASSED: "passed"}


def case_yaml(finding: Finding, *, path: str = "") -> str:
    """The finding as a one-case YAML document, with a comment saying where it comes from."""
    fuzz = finding.input
    head = (f"# Reproducer of fuzz finding {finding.id}: {finding.kind.value}, "
            f"{finding.statement} ({finding.grade.value}).\n"
            f"# Found by `stomp-conformance fuzz` (campaign {finding.campaign}, seed "
            f"{finding.seed}, input {finding.index}) on {finding.broker.id}.\n"
            f"# {' '.join(finding.detail.split())[:300]}\n")
    if path:
        head += f"# Replay the finding itself: {finding.replay_command(path)}\n"
    case = {
        "id": f"fuzz.{finding.id}",
        "title": f"fuzz finding {finding.id}: {finding.kind.value} ({fuzz.mutation}, "
                 f"STOMP {fuzz.version})",
        "statements": _statements(finding),
        "versions": [fuzz.version],
        "tags": ["fuzz", fuzz.mutation.replace(":", "-")],
        "timeout": 60,
        "steps": _crash_steps(finding) if finding.kind.outage else _steps(finding),
    }
    body = yaml.safe_dump([case], sort_keys=False, allow_unicode=False, width=100)
    return head + body


def _statements(finding: Finding) -> list[str]:
    """The statements the case names: known ones that the input's version states."""
    known, version = catalogue(), finding.input.version
    chosen = []
    for candidate in (finding.statement, finding.input.statement,
                      statement_id("frames.frame-grammar", version)):
        if candidate in known and version in known[candidate].versions \
                and candidate not in chosen:
            chosen.append(candidate)
    return chosen


def _raw(chunk: bytes) -> dict[str, Any]:
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError:
        return {"raw": {"hex": chunk.hex()}}
    if "${" in text:  # would read as a variable
        return {"raw": {"hex": chunk.hex()}}
    return {"raw": {"data": text}}


def _connect(fuzz: FuzzInput, conn: str | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if conn:
        args["conn"] = conn
    if fuzz.connect == "STOMP":
        args["command"] = "STOMP"
    headers = [["heart-beat", "0,0"]] if fuzz.version != "1.0" else []
    given = {k for k, _ in fuzz.connect_headers}
    headers = [h for h in headers if h[0] not in given] + [list(h) for h in fuzz.connect_headers]
    if headers:
        args["headers"] = headers
    if fuzz.expect is not Expect.VALID and fuzz.connect_headers:
        args["expect"] = "nothing"  # the handshake is what breaks the rule
    return {"connect": args}


def _opening(fuzz: FuzzInput, conn: str | None = None) -> list[dict[str, Any]]:
    if fuzz.connect is None:
        return [{"open": {"conn": conn} if conn else {}}]
    return [_connect(fuzz, conn)]


def _steps(finding: Finding) -> list[dict[str, Any]]:
    fuzz = finding.input
    if fuzz.expect is not Expect.VALID and fuzz.connect_headers:
        # The handshake breaks the rule: its answer is what is judged (the fuzzer sends
        # the rest only after a CONNECTED, which is then the departure).
        return [*_opening(fuzz), {"expect_any": _refusals(fuzz, handshake=True)}]
    steps = _opening(fuzz) + [_raw(chunk) for chunk in fuzz.chunks if chunk]
    if fuzz.expect is Expect.VALID:
        return steps + _valid_expectations(finding)
    return steps + [{"expect_any": _refusals(fuzz)}]


def _refusals(fuzz: FuzzInput, *, handshake: bool = False) -> list[dict[str, Any]]:
    def graded(kind: Kind, statement: str) -> str:
        return _PLAIN_GRADES[grade(Anomaly(kind, statement, ""), fuzz)]

    mutation = MUTATIONS.get(fuzz.mutation)
    left_open = graded(Kind.ERROR_WITHOUT_CLOSE, statement_id("error.close-after", fuzz.version))
    receipt: dict[str, Any] = {"command": "RECEIPT", "headers": {"receipt-id": fuzz.receipt},
                               "within": WITHIN}
    if handshake:
        receipt = {"command": "CONNECTED", "within": WITHIN}
    out: list[dict[str, Any]] = [{"grade": "passed", "expect_error_close": {"within": WITHIN}}]
    if fuzz.expect is Expect.LIMIT:
        out.append({"grade": "passed", "expect": receipt,
                    "note": "the broker accepted the input (it MAY have no such limit)"})
    out.append({"grade": left_open, "expect": {"command": "ERROR", "within": WITHIN},
                "note": "the connection stayed open after the ERROR"})
    out.append({"grade": "non-strict", "expect_close": {"within": WITHIN},
                "note": "the connection was closed without an ERROR"})
    if fuzz.expect is Expect.ERROR:
        accepted = _PLAIN_GRADES[mutation.accepted if mutation else Outcome.INFORMATIONAL]
        out.append({"grade": accepted, "expect": receipt,
                    "note": f"the broker accepted input that breaks {fuzz.statement}"})
    return out


def _valid_expectations(finding: Finding) -> list[dict[str, Any]]:
    """MESSAGEs and the RECEIPT, in the order the broker sent them (what it did not send
    goes where it was due: the RECEIPT first, then the deliveries)."""
    fuzz = finding.input
    due = deliveries(frames_of(fuzz) or [])
    receipt = {"expect": {"command": "RECEIPT", "headers": {"receipt-id": fuzz.receipt},
                          "within": WITHIN}}
    out: list[dict[str, Any]] = []
    receipted = False
    for frame in _answer(finding):
        if frame.command == "RECEIPT" and frame.get("receipt-id") == fuzz.receipt:
            out.append(receipt)
            receipted = True
        elif frame.command == "MESSAGE":
            key = frame.get("subscription") or frame.get("destination") or ""
            match = next((d for d in due if d.key == key), None)
            if match is not None:
                due.remove(match)
                out.append(_message(match, fuzz))
    if not receipted:
        out.append(receipt)
    return out + [_message(d, fuzz) for d in due]


def _message(delivery: Delivery, fuzz: FuzzInput) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if fuzz.version == "1.0":
        headers["destination"] = delivery.destination
    else:
        headers["subscription"] = delivery.key
        for name, value in delivery.headers:
            if "${" not in name + value:
                headers[name] = value
    body: Any = delivery.body.decode("utf-8", "replace") if delivery.body else {"absent": True}
    if isinstance(body, str) and "${" in body:
        body = {"present": True}
    return {"expect": {"command": "MESSAGE", "headers": headers, "body": body,
                       "within": WITHIN}}


def _answer(finding: Finding) -> list[Frame]:
    """The frames of the broker's answer, after its CONNECTED."""
    parser = Parser(version=finding.input.version, strict=False)
    try:
        events = parser.feed(finding.response)
    except StompError as error:
        events = getattr(error, "events", [])
    return [e for e in events if isinstance(e, Frame) and e.command != "CONNECTED"]


def _crash_steps(finding: Finding) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for n, suspect in enumerate(finding.sent):
        conn = f"s{n}"
        opening = _opening(suspect, conn)
        if "connect" in opening[0]:
            opening[0]["connect"]["expect"] = "nothing"
        steps += opening
        steps += [{"raw": {**_raw(chunk)["raw"], "conn": conn}}
                  for chunk in suspect.chunks if chunk]
        steps.append({"sleep": 0.2})
        steps.append({"close": {"conn": conn, "abort": True}})
    steps.append({"connect": {"conn": "probe"}})
    return steps
