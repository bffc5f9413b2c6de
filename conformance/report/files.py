"""Report files: written atomically (a reader, a CI job or a file watcher, sees the old file
or the whole new one, never half of one, even when the run is killed mid-write), and read
back checked against their JSON Schema."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema


class ReportFileError(Exception):
    """A file that is not a readable report of the kind asked for (one line)."""


@cache
def package_schema(name: str) -> dict[str, Any]:
    """The JSON Schema `name` shipped beside this module, read once."""
    loaded: dict[str, Any] = json.loads(
        resources.files(__package__).joinpath(name).read_text("utf-8"))
    return loaded


def read_checked(path: Path | str, schema: dict[str, Any], kind: str) -> dict[str, Any]:
    """The JSON object in `path`, valid against `schema`; else ReportFileError naming the
    first problem and where it is (`kind` says what the file should have been)."""
    path = Path(path)
    try:
        data = json.loads(path.read_bytes())
    except OSError as error:
        raise ReportFileError(f"cannot read {path}: {error.strerror or error}") from None
    except ValueError as error:  # JSONDecodeError, or bytes that are not UTF-8
        raise ReportFileError(f"{path} is not JSON: {error}") from None
    problem = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(data))
    if problem is not None:
        at = "/".join(str(p) for p in problem.absolute_path) or "top level"
        raise ReportFileError(f"{path} is not {kind}: {at}: {problem.message[:200]}")
    checked: dict[str, Any] = data
    return checked


def write_atomic(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write `data` to `path` through a temporary file in the same folder (os.replace is
    atomic only within one file system), creating the folder if needed. `sync`: on the
    disk before the rename (else atomic, not durable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    # os.open with 0o666 leaves the mode to the umask, as a plain open() would.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            if sync:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
