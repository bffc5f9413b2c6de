"""`stomp-conformance broker`: the reference broker served until interrupted (or until
standard input closes), with the switches of its legal configurations and its faults."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

from conformance.broker import CHOICES, FAULTS, LIMITS, Broker, BrokerConfig
from conformance.cli.exits import Exit, fail
from conformance.cli.options import Verbs
from conformance.spec.grammar import HEART_BEAT
from conformance.wire.target import HarnessError


def add(verbs: Verbs) -> None:
    broker = verbs.add_parser("broker", help="serve the reference broker",
                              description="Serve the reference STOMP broker until interrupted.")
    broker.add_argument("--host", default="127.0.0.1", help="address to listen on")
    broker.add_argument("--port", type=int, default=61613, help="port (0: any free port)")
    broker.add_argument("--ws-port", type=int, metavar="PORT",
                        help="also serve STOMP over WebSocket on this port, at /ws (0: any "
                             "free port; default: no WebSocket)")
    broker.add_argument("--login", help="require this login (with --passcode)")
    broker.add_argument("--passcode", help="the passcode of --login")
    broker.add_argument("--v10-anonymous", action="store_true",
                        help="with --login: serve a 1.0 CONNECT without login anonymously "
                             "(default: refuse it, as at 1.1 and 1.2)")
    broker.add_argument("--vhost", action="append", help="serve this virtual host "
                        "(repeatable; the first is the default, which a 1.0 CONNECT without "
                        "host gets; default: any host)")
    broker.add_argument("--unknown-vhost", default="reject",
                        metavar="|".join(CHOICES["unknown_vhost"]),
                        help="with --vhost: a host header naming none of them is refused with "
                             "ERROR, or served as the default host (default reject)")
    broker.add_argument("--heartbeat", type=_heartbeat, default=(1000, 1000), metavar="SX,SY",
                        help="CONNECTED's heart-beat: ms the broker can send, ms it wants "
                             "(default 1000,1000; 0: none)")
    broker.add_argument("--nack", default="redeliver", metavar="|".join(CHOICES["nack"]),
                        help="what becomes of a NACKed message (default redeliver)")
    broker.add_argument("--unknown-command", default="error",
                        metavar="|".join(CHOICES["unknown_command"]),
                        help="a frame of unknown command gets ERROR then close, or is ignored "
                             "(default error)")
    broker.add_argument("--minimal-connected", action="store_true",
                        help="CONNECTED without the optional server header, session header "
                             "(1.1, 1.2) and heart-beat header (when 0,0)")
    broker.add_argument("--colon-ids", action="store_true",
                        help="message-id and ack values holding ':' as ActiveMQ's do")
    broker.add_argument("--server-headers", action="store_true",
                        help="MESSAGE also carries server headers: expires, priority, "
                             "timestamp")
    broker.add_argument("--limit", action="append", metavar="NAME=VALUE",
                        help=f"set a limit (repeatable): {', '.join(LIMITS)}")
    broker.add_argument("--fault", action="append", metavar="NAME",
                        help="break one statement on purpose (repeatable; see --list-faults)")
    broker.add_argument("--list-faults", action="store_true", help="list the faults and exit")
    broker.add_argument("--until-stdin-closes", action="store_true",
                        help="also stop when standard input reaches its end (for a parent "
                             "process that holds the other end of a pipe)")
    broker.set_defaults(run=broker_command)


def broker_command(args: argparse.Namespace) -> Exit:
    if args.list_faults:
        for name, (statement, does) in sorted(FAULTS.items()):
            print(f"{name:40} {statement:45} {does}")
        return Exit.OK
    users = None
    if args.login is not None:
        users = {args.login: args.passcode or ""}
    try:
        config = BrokerConfig(
            host=args.host, port=args.port, ws_port=args.ws_port, users=users,
            v10_anonymous=args.v10_anonymous,
            vhosts=tuple(dict.fromkeys(args.vhost)) if args.vhost else None,
            unknown_vhost=args.unknown_vhost, heartbeat=args.heartbeat, nack=args.nack,
            unknown_command=args.unknown_command, minimal_connected=args.minimal_connected,
            colon_ids=args.colon_ids, server_headers=args.server_headers,
            faults=frozenset(args.fault or ())).with_limits(_limits(args.limit or ()))
    except ValueError as error:  # one line, as argparse's own errors are not
        return fail(Exit.USAGE, str(error))

    async def serve() -> None:
        broker = Broker(config)
        try:
            await broker.start()
        except OSError as error:
            ports = f"{config.port}" if config.ws_port is None else \
                f"{config.port} or {config.ws_port}"
            raise HarnessError(f"cannot listen on {config.host}:{ports}: "
                               f"{error.strerror or error}") from None
        faults = f" with faults {', '.join(sorted(config.faults))}" if config.faults else ""
        ws = "" if config.ws_port is None else f" and {broker.url(websocket=True)}"
        print(f"stomp-conformance broker listening on {config.host}:{broker.port}{ws}{faults}",
              file=sys.stderr, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        watching = None
        if args.until_stdin_closes:
            stdin = asyncio.StreamReader()
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
            watching = asyncio.create_task(_stop_at_eof(stdin, stop))
        await stop.wait()
        if watching is not None:
            watching.cancel()
        await broker.stop()
        print("stomp-conformance broker stopped", file=sys.stderr)

    try:
        asyncio.run(serve())
    except HarnessError as error:
        return fail(Exit.HARNESS, str(error))
    return Exit.OK


async def _stop_at_eof(stdin: asyncio.StreamReader, stop: asyncio.Event) -> None:
    while await stdin.read(4096):
        pass
    stop.set()


def _limits(given: Sequence[str]) -> dict[str, int]:
    """--limit NAME=VALUE flags (BrokerConfig.with_limits checks the names)."""
    limits = {}
    for text in given:
        name, sep, value = text.partition("=")
        if not sep or not value.strip().isdigit():
            raise ValueError(f"--limit {text!r}: expected NAME=NUMBER, e.g. body=65536 "
                             f"(names: {', '.join(LIMITS)})")
        limits[name.strip()] = int(value)
    return limits


def _heartbeat(value: str) -> tuple[int, int]:
    match = HEART_BEAT.match(value)
    if match is None:
        raise argparse.ArgumentTypeError(f"expected two integers like 1000,1000, not {value!r}")
    return int(match.group(1)), int(match.group(2))
