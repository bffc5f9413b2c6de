"""Report files: written atomically (a reader, a CI job or a file watcher, sees the old file
or the whole new one, never half of one, even when the run is killed mid-write), and read
back checked against their JSON Schema.

Only a regular file, or a path that does not exist yet, is replaced atomically (a temporary
file beside it, renamed over it). A symlink is followed and its target written by the same
rules (a dangling one's target is created), so the link stays a link. A character device, a
FIFO, a socket or any other special file is opened and written in place, never replaced:
`--json /dev/null` or `/dev/stdout` must not turn the device into a regular file. Nothing is
ever written through a temporary file in /dev. `-` for standard output is the caller's
business (write_report), not write_atomic's: a file may be called `-`."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
import sys
from collections.abc import Iterable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO

import jsonschema


class ReportFileError(Exception):
    """A file that is not a readable report of the kind asked for (one line)."""


@cache
def package_schema(package: str, name: str) -> dict[str, Any]:
    """The JSON Schema `name` shipped in `package`, read once."""
    loaded: dict[str, Any] = json.loads(
        resources.files(package).joinpath(name).read_text("utf-8"))
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


# A name in /dev is written in place even when it is not a device yet: no temp file there.
_DEVICES = Path("/dev")

STDOUT = "-"  # a report path meaning standard output (write_report)


def write_atomic(path: Path, data: bytes | Iterable[bytes], *, sync: bool = True) -> None:
    """Write `data` (octets, or pieces of them) to `path`: a regular file or a new path
    through a temporary file in the same folder (os.replace is atomic only within one file
    system), creating the folder if needed; a symlink's target by the same rules; a device,
    FIFO or socket in place (see the module docstring). `sync`: a regular file is on the
    disk before the rename (else atomic, not durable)."""
    try:
        # os.stat follows every link, /proc's magic ones too (/dev/stdout onto a pipe).
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None  # nothing there yet, or a dangling symlink: its target is created
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    target = Path(os.path.realpath(path))
    if (mode is not None and not stat.S_ISREG(mode)) or target.is_relative_to(_DEVICES):
        # The path as given, not `target`: a magic link such as /proc/self/fd/1 reads as
        # "pipe:[123]", which only the kernel can follow.
        with open(path, "wb") as out:
            _write(out, data)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    # os.open with 0o666 leaves the mode to the umask, as a plain open() would.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            _write(out, data)
            if sync:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _write(out: BinaryIO, data: bytes | Iterable[bytes]) -> None:
    for piece in (data,) if isinstance(data, bytes) else data:
        out.write(piece)


def write_report(path: Path | str, data: bytes | Iterable[bytes]) -> None:
    """`data` to standard output when `path` is `-`, else to `path` by write_atomic."""
    if str(path) == STDOUT:
        sys.stdout.flush()  # text already buffered goes first
        _write(sys.stdout.buffer, data)
        sys.stdout.buffer.flush()
    else:
        write_atomic(Path(path), data)
