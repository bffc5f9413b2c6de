"""A campaign's folder: what a campaign killed at any moment (kill -9 included) resumes
from, with nothing lost. Every file is written whole or not at all (write_atomic).

    DIR/state.json          the campaign: id, seed, broker, generator, counters
    DIR/findings/ID.json    one finding (findings.py), written the moment it is found,
                            rewritten when confirmed and minimised
    DIR/findings/ID.yaml    its reproducer as a catalogue case (reproducer.py)
    DIR/corpus/KEY.json     an input that made the broker behave in a way no earlier one
                            did; a resumed campaign sends them again, re-cut into writes
    DIR/.lock               held while a campaign runs (the kernel lets go at kill -9)

Findings are synced to disk before they count as saved; the state and the corpus, written
every few seconds or many times a second at first, are replaced atomically but not synced:
a killed process loses nothing the kernel has (only a crash of the machine could cost the
last few seconds of counters, never a finding).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from conformance import __version__
from conformance.files import write_atomic
from conformance.fuzz.inputs.fuzz_input import FuzzInput
from conformance.fuzz.network.findings import BrokerInfo, Finding, Replays
from conformance.fuzz.network.reproducer import case_yaml
from conformance.report.records import timestamp

STATE_FORMAT = "stomp-conformance-fuzz-campaign"
STATE_VERSION = 1
#: A corpus holds at most this many inputs (each under MAX_CORPUS_INPUT octets).
MAX_CORPUS = 1000
MAX_CORPUS_INPUT = 16 * 1024


class CampaignDirError(Exception):
    """The folder cannot hold this campaign (one line, for the user)."""


@dataclass
class Counters:
    #: inputs judged, over every run of the campaign
    inputs: int = 0
    #: every input numbered below this one has been judged: where a resumed run goes on
    frontier: int = 0
    anomalies: int = 0
    #: liveness checks, and those that failed ("probes" in the file, see _JSON_NAMES)
    checks: int = 0
    failed_checks: int = 0
    #: handshakes the broker did not answer while a liveness check found it alive
    unanswered: int = 0
    #: seconds spent fuzzing, over every run
    elapsed_s: float = 0.0
    #: how many times the campaign was started (1 + resumes)
    runs: int = 0

    def to_json(self) -> dict[str, Any]:
        return {_JSON_NAMES.get(k, k): v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Counters:
        """The counters in `data`; names it does not know are left out."""
        known = cls.__dataclass_fields__
        fields = {_CODE_NAMES.get(k, k): v for k, v in data.items()}
        return cls(**{k: v for k, v in fields.items() if k in known})


#: Counter names in state.json that differ from the code's: files written before (and the
#: benchmark reading them) say "probes" for liveness checks.
_JSON_NAMES = {"checks": "probes", "failed_checks": "failed_probes"}
_CODE_NAMES = {v: k for k, v in _JSON_NAMES.items()}


@dataclass
class CampaignState:
    """The campaign as state.json holds it: who, where, and its counters."""

    campaign: str
    seed: int
    broker: BrokerInfo
    generator: str
    versions: tuple[str, ...]
    created: str
    updated: str
    tool_version: str
    counters: Counters = field(default_factory=Counters)
    #: the broker's CONNECTED `server` header, as the last liveness check read it
    server: str = ""
    #: a launched broker's process (process.py): starts, the resource oracle's figures
    resources: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"format": STATE_FORMAT, "schema_version": STATE_VERSION,
                "campaign": self.campaign, "seed": self.seed, "broker": self.broker.to_json(),
                "generator": self.generator, "versions": list(self.versions),
                "created": self.created, "updated": self.updated,
                "tool_version": self.tool_version, "counters": self.counters.to_json(),
                "server": self.server, "resources": self.resources}

    @classmethod
    def from_json(cls, data: Any) -> CampaignState:
        if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
            raise ValueError("not a campaign state file")
        if data.get("schema_version") != STATE_VERSION:
            raise ValueError(f"campaign state version {data.get('schema_version')!r} is not "
                             f"{STATE_VERSION}")
        try:
            counters = Counters.from_json(data.get("counters", {}))
            return cls(campaign=str(data["campaign"]), seed=int(data["seed"]),
                       broker=BrokerInfo.from_json(data["broker"]),
                       generator=str(data["generator"]),
                       versions=tuple(str(v) for v in data["versions"]),
                       created=str(data["created"]), updated=str(data["updated"]),
                       tool_version=str(data.get("tool_version", "")), counters=counters,
                       server=str(data.get("server") or ""),
                       resources=dict(data.get("resources") or {}))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"malformed campaign state: {error}") from None


def _dump(data: Any) -> bytes:
    # ASCII with \\u escapes: a stray surrogate cannot make the file unreadable.
    return (json.dumps(data, indent=1, ensure_ascii=True) + "\n").encode("ascii")


class CampaignDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state_path = root / "state.json"
        self.findings_dir = root / "findings"
        self.corpus_dir = root / "corpus"
        self._lock: IO[bytes] | None = None

    # -- the lock -------------------------------------------------------------------------

    def lock(self) -> None:
        """Hold the folder for this process; CampaignDirError when another campaign does
        or the folder cannot be made."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            handle = open(self.root / ".lock", "ab")  # noqa: SIM115 (held until unlock)
        except OSError as error:
            raise CampaignDirError(f"cannot use {self.root}: {error.strerror or error}") \
                from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise CampaignDirError(f"another campaign is running in {self.root}") from None
        self._lock = handle

    def unlock(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    # -- state ----------------------------------------------------------------------------

    def load_state(self) -> CampaignState | None:
        try:
            text = self.state_path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise CampaignDirError(f"cannot read {self.state_path}: "
                                   f"{error.strerror or error}") from None
        try:
            return CampaignState.from_json(json.loads(text))
        except ValueError as error:  # json.JSONDecodeError is one
            raise CampaignDirError(f"{self.state_path}: {error}") from None

    def save_state(self, state: CampaignState) -> None:
        write_atomic(self.state_path, _dump(state.to_json()), sync=False)

    # -- findings -------------------------------------------------------------------------

    def finding_path(self, finding_id: str) -> Path:
        return self.findings_dir / f"{finding_id}.json"

    def save_finding(self, finding: Finding, *, sync: bool = True) -> Path:
        """Write the finding, then its YAML case; each file whole or not at all (`sync`:
        on the disk before returning; not for a count of hits)."""
        path = self.finding_path(finding.id)
        save_finding_at(path, finding, sync=sync)
        return path

    def load_findings(self) -> dict[str, Finding]:
        """Every finding in the folder by id (a missing YAML case is written again)."""
        found: dict[str, Finding] = {}
        if not self.findings_dir.is_dir():
            return found
        for path in sorted(self.findings_dir.glob("*.json")):
            finding = load_finding(path)
            found[finding.id] = finding
            if not path.with_suffix(".yaml").exists():
                write_atomic(path.with_suffix(".yaml"),
                             case_yaml(finding, path=str(path)).encode("utf-8"))
        return found

    # -- corpus ---------------------------------------------------------------------------

    def load_corpus(self) -> dict[str, FuzzInput]:
        out: dict[str, FuzzInput] = {}
        if not self.corpus_dir.is_dir():
            return out
        for path in sorted(self.corpus_dir.glob("*.json"))[:MAX_CORPUS]:
            try:
                out[path.stem] = FuzzInput.from_json(json.loads(path.read_bytes())["input"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a corpus entry is a hint: one that cannot be read is skipped
        return out

    def add_corpus(self, key: str, fuzz: FuzzInput, behaviour: tuple[str, ...]) -> None:
        write_atomic(self.corpus_dir / f"{key}.json",
                     _dump({"behaviour": list(behaviour), "input": fuzz.to_json()}), sync=False)


def save_finding_at(path: Path, finding: Finding, *, sync: bool = True) -> None:
    write_atomic(path, _dump(finding.to_json(str(path))), sync=sync)
    write_atomic(path.with_suffix(".yaml"), case_yaml(finding, path=str(path)).encode("utf-8"),
                 sync=sync)


def load_finding(path: Path) -> Finding:
    """The finding in `path`; CampaignDirError naming the file when it is not one."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as error:
        raise CampaignDirError(f"cannot read {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise CampaignDirError(f"{path}: not JSON: {error}") from None
    try:
        return Finding.from_json(data)
    except ValueError as error:
        raise CampaignDirError(f"{path}: {error}") from None


def record_replays(path: Path, finding: Finding, tries: int, reproduced: int) -> None:
    """Write into the finding's file (and its case's comment) how many of `tries` replays
    reproduced it; CampaignDirError when its campaign's folder is in use."""
    folder = CampaignDir(path.parent.parent)
    folder.lock()
    try:
        replays = Replays(tries, reproduced, timestamp(), __version__)
        save_finding_at(path, finding.updated(replays=replays))
    finally:
        folder.unlock()


def campaign_id() -> str:
    return os.urandom(6).hex()
