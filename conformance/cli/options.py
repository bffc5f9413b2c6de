"""The flags several verbs share, declared once with one help text each, and what the verbs
read from them alike: the TLS options of an address, the broker a fuzzer may send to, the
cases a selection names, and the report files of a run."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from conformance.broker import BrokerConfig
from conformance.cli.arguments import seconds
from conformance.files import STDOUT
from conformance.profiles import ProfileError, load_profile, shipped
from conformance.scenario import (
    Case,
    Catalogue,
    load_cases,
    load_catalogue,
    shipped_catalogue,
)
from conformance.spec.grammar import VERSIONS
from conformance.wire.transport import BrokerAddress, TlsOptions, is_loopback, parse_broker

if TYPE_CHECKING:
    from conformance.fuzz.network.where import Where

#: what each verb module's `add` declares its verb in (a string: not subscriptable at run time)
Verbs: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


# -- the broker and the session -------------------------------------------------------------

def session_flags(verb: argparse.ArgumentParser, default_profile: str | None) -> None:
    """Who connects, and what the broker is known to do (run, fuzz, replay, probe,
    stateful)."""
    verb.add_argument("--login")
    verb.add_argument("--passcode")
    verb.add_argument("--vhost", help="the value of CONNECT's host header")
    verb.add_argument("--profile", default=default_profile,
                      help=f"a shipped profile ({', '.join(shipped())}) or a YAML file")


def transport_flag(verb: argparse.ArgumentParser) -> None:
    """--transport: how to reach the reference broker a verb starts (run, fuzz, replay,
    probe, stateful); with --broker, the URL's scheme chooses and the flag must agree."""
    verb.add_argument("--transport", choices=("tcp", "ws"),
                      help="how to reach the reference broker started for the command: TCP "
                           "(default) or STOMP over WebSocket (with --broker, the URL's "
                           "scheme says)")


def websocket_chosen(args: argparse.Namespace, address: BrokerAddress | None, *,
                     default: bool = False) -> bool:
    """Whether the command speaks STOMP over WebSocket: the address's scheme, else
    --transport, else `default`; ValueError when --transport contradicts the address."""
    transport = getattr(args, "transport", None)  # a Namespace built by hand may lack it
    if address is None:
        return default if transport is None else transport == "ws"
    if transport is not None and address.websocket != (transport == "ws"):
        raise ValueError(f"--transport {transport} contradicts --broker "
                         f"{address.display}: the URL's scheme chooses the transport")
    return address.websocket


def tls_flags(verb: argparse.ArgumentParser) -> None:
    verb.add_argument("--tls-ca", metavar="FILE", help="CA certificates to verify the broker")
    verb.add_argument("--tls-cert", metavar="FILE", help="client certificate")
    verb.add_argument("--tls-key", metavar="FILE", help="client key")
    verb.add_argument("--tls-no-verify", action="store_true", help="do not verify the broker")


def broker_flags(verb: argparse.ArgumentParser, default_profile: str | None, *,
                 deadline: bool = True) -> None:
    """The target of fuzz, replay, probe and stateful: loopback only unless --allow-remote,
    the reference broker (with --fault switches) when no --broker is given."""
    verb.add_argument("--broker", metavar="URL",
                      help="HOST:PORT, stomp://HOST:PORT, stomp+ssl://HOST:PORT, "
                           "ws://HOST:PORT/PATH or wss://HOST:PORT/PATH; only loopback "
                           "addresses unless --allow-remote (default: the reference broker, "
                           "started for the command)")
    transport_flag(verb)
    verb.add_argument("--allow-remote", action="store_true",
                      help="send to a broker that is not on this machine")
    session_flags(verb, default_profile)
    verb.add_argument("--fault", action="append", metavar="NAME",
                      help="with no --broker: switch on a fault of the reference broker "
                           "(repeatable; see broker --list-faults)")
    if deadline:
        verb.add_argument("--deadline", type=seconds, default=2.0,
                          help="seconds an input may take (default 2)")
    tls_flags(verb)


def tls_options(args: argparse.Namespace, address: BrokerAddress | None) -> TlsOptions | None:
    """TLS settings from --tls-* for a stomp+ssl:// address or when any --tls flag is given;
    None for a plain connection."""
    if (address and address.tls) or args.tls_ca or args.tls_cert or args.tls_no_verify:
        return TlsOptions(ca_file=args.tls_ca, cert_file=args.tls_cert, key_file=args.tls_key,
                          verify=not args.tls_no_verify)
    return None


def where_from_flags(args: argparse.Namespace, *, broker: str | None, profile: str,
                     faults: Sequence[str], websocket: bool = False) -> Where:
    """The broker a fuzzer sends to, from the flags; UsageError for a bad one or a refused
    remote one. `websocket`: reach the reference broker over WebSocket when neither an
    address nor --transport says. The fuzzer's modules load here, when a fuzzing verb runs,
    not for --help."""
    from conformance.fuzz.network.where import UsageError, Where

    try:
        address = parse_broker(broker) if broker else None
        loaded = load_profile(profile)
        websocket = websocket_chosen(args, address, default=websocket)
    except (ValueError, ProfileError) as error:
        raise UsageError(str(error)) from None
    if address is not None:
        if faults:
            raise UsageError("--fault switches faults of the reference broker that this "
                             "command starts: it cannot be used with --broker")
        if not args.allow_remote and not is_loopback(address):
            raise UsageError(f"refusing to send fuzz input to {address.display}: it is not a "
                             "loopback address (malformed input can crash a broker); add "
                             "--allow-remote to fuzz a broker you own there")
    try:
        BrokerConfig(faults=frozenset(faults))
    except ValueError as error:
        raise UsageError(str(error)) from None
    tls = tls_options(args, address)
    return Where(address, loaded, profile, tuple(sorted(set(faults))), tls, args.login,
                 args.passcode, args.vhost, websocket)


# -- the cases ------------------------------------------------------------------------------

def case_flags(verb: argparse.ArgumentParser, *, json: bool = True) -> None:
    """Which cases a verb takes (run, list, show, coverage, selftest); `json`: the verb
    also has --json for stdout."""
    verb.add_argument("--cases", action="append", metavar="PATH",
                      help="a folder or file of YAML cases (default: the shipped catalogue)")
    verb.add_argument("--tag")
    verb.add_argument("--statement", help="a statement id")
    verb.add_argument("--level", choices=["must", "should", "may"])
    verb.add_argument("--stomp-version", choices=VERSIONS)
    verb.add_argument("-k", metavar="TEXT", help="only cases whose id contains TEXT")
    if json:
        verb.add_argument("--json", action="store_true",
                          help="print JSON on stdout, nothing else")


def default_cases() -> Path:
    """The shipped catalogue (scenario.shipped_catalogue, which the pytest plugin takes too)."""
    return shipped_catalogue()


def chosen_cases(args: argparse.Namespace, *, client: bool = False) -> list[Case]:
    """The cases named by --cases (default: the shipped catalogue), filtered by the flags;
    `client`: the client cases there instead of the broker cases."""
    return _filtered(args, load_cases(
        [Path(p) for p in args.cases] if args.cases else [default_cases()], client=client))


def chosen_catalogue(args: argparse.Namespace, *,
                     client: bool = False) -> tuple[Catalogue, list[Case]]:
    """The catalogue a run's cases come from, and the cases the flags choose (as
    chosen_cases). --cases within the shipped catalogue choose from it (a selection of it,
    as -k is); --cases elsewhere are a catalogue of their own, which is never certified."""
    shipped = default_cases()
    if not args.cases:
        catalogue = load_catalogue([shipped], client=client, shipped=True)
        return catalogue, _filtered(args, list(catalogue.cases))
    paths = [Path(p) for p in args.cases]
    root = shipped.resolve()
    within = all(root == p.resolve() or root in p.resolve().parents for p in paths)
    catalogue = load_catalogue([shipped] if within else paths, client=client, shipped=within)
    given = load_cases(paths, client=client) if within else list(catalogue.cases)
    return catalogue, _filtered(args, given)


def _filtered(args: argparse.Namespace, cases: list[Case]) -> list[Case]:
    """Those of `cases` that --tag, --statement, --level, --stomp-version and -k choose."""
    chosen = []
    for case in cases:
        if args.tag and args.tag not in case.tags:
            continue
        if args.statement and args.statement not in case.statements:
            continue
        if args.level and args.level.lower() != case.level:
            continue
        if args.stomp_version:  # run the case at that version only
            if args.stomp_version not in case.versions:
                continue
            case = dataclasses.replace(case, versions=(args.stomp_version,))
        if args.k and args.k not in case.id:
            continue
        chosen.append(case)
    return chosen


# -- the reports ----------------------------------------------------------------------------

#: The report files of a run (run, clients), each rendered from the JSON report's dict.
REPORTS = ("json", "junit", "html", "markdown")


def report_flags(verb: argparse.ArgumentParser) -> None:
    """--json, --junit, --html and --markdown, each a PATH or - for standard output."""
    verb.add_argument("--json", metavar="PATH", help="write the JSON report to PATH (- for stdout)")
    verb.add_argument("--junit", metavar="PATH", help="write JUnit XML to PATH (- for stdout)")
    verb.add_argument("--html", metavar="PATH",
                      help="write the single-file HTML report to PATH (- for stdout)")
    verb.add_argument("--markdown", metavar="PATH",
                      help="write a Markdown summary (for a pull-request comment) to PATH "
                           "(- for stdout)")


def stdout_clash(args: argparse.Namespace) -> str | None:
    """The usage error when more than one report goes to standard output (one stream
    cannot hold two reports a reader could split), else None."""
    to_stdout = [f"--{name}" for name in REPORTS if getattr(args, name) == STDOUT]
    if len(to_stdout) < 2:
        return None
    return f"{', '.join(to_stdout)}: only one report can go to standard output (-)"
