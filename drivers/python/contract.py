"""What the Python drivers share: the driver contract's two ends (cases/clients/README.md).
Events go to standard output, one JSON line each, from any thread; commands come from
standard input, one JSON object a line."""

from __future__ import annotations

import base64
import json
import sys
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

_lock = threading.Lock()


class Unsupported(Exception):
    """What the library cannot do: reported `failed` with an error starting `unsupported`."""

    def __init__(self, what: str) -> None:
        super().__init__(f"unsupported: {what}")


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, **fields}) + "\n"
    with _lock:  # library threads report while the main thread answers commands
        sys.stdout.write(line)
        sys.stdout.flush()


def b64(body: bytes | str | None) -> str:
    data = body.encode() if isinstance(body, str) else body or b""
    return base64.b64encode(data).decode()


def body(command: dict[str, Any]) -> bytes:
    if "body_b64" in command:
        return base64.b64decode(command["body_b64"])
    return str(command.get("body", "")).encode()


def text_or_bytes(command: dict[str, Any]) -> str | bytes:
    """A command's body as an application holds it: text as str, octets as bytes (for a
    library that takes either)."""
    return body(command) if "body_b64" in command else str(command.get("body", ""))


def endpoint(url: str, schemes: tuple[str, ...] = ("tcp",)) -> tuple[str, str, int, str]:
    """The url's scheme, host, port and path; Unsupported for a scheme not in `schemes`
    (a library without a WebSocket transport takes tcp:// only)."""
    parts = urlsplit(url)
    if parts.scheme not in schemes or not parts.hostname or not parts.port:
        shown = " or ".join(f"{s}://" for s in schemes)
        raise Unsupported(f"url {url!r} ({shown} only)")
    return parts.scheme, parts.hostname, parts.port, parts.path


def address(url: str) -> tuple[str, int]:
    _, host, port, _ = endpoint(url)
    return host, port


def heart_beat(command: dict[str, Any]) -> tuple[int, int]:
    cx, cy = str(command.get("heart_beat") or "0,0").split(",")
    return int(cx), int(cy)


def commands() -> Iterator[tuple[str, dict[str, Any]]]:
    """Each command as (op, fields) until `exit` or the end of the input."""
    for line in sys.stdin:
        try:
            command = json.loads(line)
            op = str(command.pop("op"))
        except (ValueError, KeyError, AttributeError, TypeError):
            emit("failed", op="?", error="not a command line")
            continue
        if op == "exit":
            return
        yield op, command


def answer(op: str, error: BaseException | None) -> None:
    """The event ending a command: done, or failed with the library's error."""
    if error is None:
        emit("done", op=op)
    elif isinstance(error, Unsupported):
        emit("failed", op=op, error=str(error))
    else:
        emit("failed", op=op, error=f"{type(error).__name__}: {error}")
