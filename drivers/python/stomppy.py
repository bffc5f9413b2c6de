"""A driver (cases/clients/README.md) for stomp.py: its Connection10/11/12 with a listener
reporting what the library hands the application.

    python stomppy.py [--ws-subprotocol NAME]

By default stomp.py runs as its users get it. `--ws-subprotocol` is a named configuration
(drivers/shipped.yaml): the Sec-WebSocket-Protocol its WSStompConnection offers through
its `header` argument, which stomp.py needs to reach a broker negotiating STOMP over
WebSocket, since it offers none of its own."""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import version as installed
from typing import Any

import stomp
from contract import Unsupported, answer, b64, commands, emit, endpoint, heart_beat, text_or_bytes

CONNECTIONS = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}


class Listener(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.messages: list[Any] = []

    def on_connected(self, frame: Any) -> None:
        emit("connected", headers=dict(frame.headers))

    def on_message(self, frame: Any) -> None:
        self.messages.append(frame)
        emit("message", n=len(self.messages) - 1, headers=dict(frame.headers),
             body_b64=b64(frame.body))

    def on_receipt(self, frame: Any) -> None:
        emit("receipt", id=frame.headers.get("receipt-id", ""))

    def on_error(self, frame: Any) -> None:
        emit("error", headers=dict(frame.headers), body_b64=b64(frame.body))

    def on_disconnected(self) -> None:
        emit("disconnected")


def connection(c: dict[str, Any], subprotocol: str | None) -> Any:
    """The connection class of the version asked, over TCP or WebSocket."""
    version = str(c.get("version", "1.2"))
    scheme, host, port, path = endpoint(str(c["url"]), ("tcp", "ws"))
    if version not in CONNECTIONS:
        raise Unsupported(f"STOMP {version}")
    # the library's defaults, as its users run it (no vhost, auto_decode on): only what the
    # application chooses is set; 1.0 has no heart-beats
    kwargs = {} if version == "1.0" else {"heartbeats": heart_beat(c)}
    if scheme == "tcp":
        return CONNECTIONS[version]([(host, port)], reconnect_attempts_max=1, **kwargs)
    if version != "1.2":  # its WSStompConnection is a StompConnection12
        raise Unsupported(f"STOMP {version} over WebSocket (WSStompConnection speaks 1.2 only)")
    # WSStompConnection offers no STOMP subprotocol of its own (websocket-client's
    # create_connection is called without subprotocols): only the ws-subprotocol
    # configuration offers one, through its `header` argument, the handshake headers an
    # application may add
    header = {"Sec-WebSocket-Protocol": subprotocol} if subprotocol else None
    return stomp.WSStompConnection([(host, port)], ws_path=path, reconnect_attempts_max=1,
                                   header=header, **kwargs)


def run(conn: Any, listener: Listener, op: str, c: dict[str, Any],
        subprotocol: str | None = None) -> Any:
    if op == "connect":
        conn = connection(c, subprotocol)
        conn.set_listener("driver", listener)
        conn.connect(c.get("login"), c.get("passcode"), wait=True)
        return conn
    if conn is None:
        raise RuntimeError("not connected")
    receipt = {"receipt": str(c["receipt"])} if c.get("receipt") else {}
    if op == "send":
        conn.send(str(c["destination"]), text_or_bytes(c), headers=dict(c.get("headers") or {}),
                  **receipt)
    elif op == "subscribe":
        conn.subscribe(str(c["destination"]), id=str(c["id"]), ack=str(c.get("ack", "auto")))
    elif op == "unsubscribe":
        conn.unsubscribe(id=str(c["id"]))
    elif op in ("ack", "nack"):
        headers = listener.messages[int(c["message"])].headers
        act = conn.ack if op == "ack" else getattr(conn, "nack", None)
        if act is None:
            raise Unsupported("NACK at STOMP 1.0")
        transaction = c.get("transaction")
        if isinstance(conn, stomp.Connection12):
            act(headers["ack"], transaction=transaction)
        elif isinstance(conn, stomp.Connection11):
            act(headers["message-id"], headers["subscription"], transaction=transaction)
        else:
            act(headers["message-id"], transaction=transaction)
    elif op in ("begin", "commit", "abort"):
        getattr(conn, op)(str(c["transaction"]))
    elif op == "disconnect":
        # stomp.py always asks a receipt for DISCONNECT, and waits for it
        conn.disconnect()
    else:
        raise Unsupported(f"no command {op!r}")
    return conn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ws-subprotocol", metavar="NAME",
                        help="the Sec-WebSocket-Protocol header WSStompConnection sends")
    subprotocol = parser.parse_args().ws_subprotocol
    emit("ready", library="stomp.py", version=installed("stomp-py"))
    conn, listener = None, Listener()
    for op, command in commands():
        try:
            conn = run(conn, listener, op, command, subprotocol)
        except Exception as error:  # the library's refusal, reported as the contract says
            answer(op, error)
        else:
            answer(op, None)
    sys.stdout.flush()
    os._exit(0)  # the library's receiver thread may still be blocked on the socket


if __name__ == "__main__":
    main()
