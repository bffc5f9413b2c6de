"""The `stomp-conformance` command line. Each verb is a small function; exit codes follow
the contract: 0 conformant, 1 a conformance failure, 2 usage or configuration error,
3 broker unreachable or the harness could not run."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from conformance import __version__
from conformance.broker import CHOICES, FAULTS, LIMITS, Broker, BrokerConfig, embedded
from conformance.broker.variants import VARIANTS, variant
from conformance.cli.arguments import positive, seconds
from conformance.cli.options import tls_options
from conformance.cli.pipeline import add_pipeline
from conformance.files import STDOUT, ReportFileError, write_atomic
from conformance.profiles import ProfileError, load_profile, shipped
from conformance.report import ReportWriter
from conformance.report.baseline import BaselineDiff, compare_baseline, load_report
from conformance.report.compare import compare, compare_html, compare_markdown, dumps_json
from conformance.report.console import ConsoleReporter
from conformance.report.history import load_history
from conformance.runner.engine import Engine, HarnessError
from conformance.runner.results import CaseResult, Outcome
from conformance.scenario import Case, CaseLoadError, load_cases
from conformance.selftest import coverage, selftest, selftest_variants
from conformance.spec import Level, Party, catalogue
from conformance.spec.grammar import HEART_BEAT, VERSIONS
from conformance.wire.target import Target
from conformance.wire.transport import BrokerAddress, parse_broker

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_HARNESS = 0, 1, 2, 3


def _spec(args: argparse.Namespace) -> int:
    statements = catalogue().select(level=args.level, party=args.party, section=args.section,
                                    version=args.version, observable=args.observable)
    if args.json:
        json.dump([s.to_json() for s in statements], sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return EXIT_OK
    console = Console(highlight=False)
    colour = {"must": "bold red", "should": "yellow", "may": "cyan"}
    for s in statements:
        line = Text(s.id, style="bold")
        line.append(f"  {s.level.value}", style=colour[s.level.strength])
        line.append(f"  {s.party.value}  {','.join(s.versions)}"
                    f"{'  observable' if s.observable else ''}")
        console.print(line)
        console.print(Text(f"    {s.quote}", style="dim"))
    console.print(f"{len(statements)} statements")
    return EXIT_OK


def default_cases() -> Path:
    """The shipped catalogue: cases/ beside the package in a checkout, conformance/cases in
    an installed wheel (pyproject.toml maps one onto the other)."""
    here = Path(__file__).resolve().parent.parent
    checkout = here.parent / "cases"
    return checkout if checkout.is_dir() else here / "cases"


def _cases(args: argparse.Namespace) -> list[Case]:
    """The cases named by --cases (default: the shipped catalogue), filtered by the flags."""
    cases = load_cases([Path(p) for p in args.cases] if args.cases else [default_cases()])
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


def _list(args: argparse.Namespace) -> int:
    cases = _cases(args)
    if args.json:
        json.dump([{"id": c.id, "title": c.title, "level": c.level,
                    "statements": list(c.statements), "versions": list(c.versions),
                    "tags": list(c.tags), "file": c.file, "line": c.line} for c in cases],
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    console = Console(highlight=False)
    for c in cases:
        console.print(Text(f"{c.id}  ", style="bold") + Text(f"{c.level}  {','.join(c.versions)}  "
                                                             f"{c.title}"))
    console.print(f"{len(cases)} cases")
    return EXIT_OK


def _show(args: argparse.Namespace) -> int:
    found = [c for c in _cases(args) if c.id == args.case]
    if not found:
        print(f"stomp-conformance: no case {args.case!r} (see `stomp-conformance list`)",
              file=sys.stderr)
        return EXIT_USAGE
    case = found[0]
    console = Console(highlight=False)
    console.print(Text(case.id, style="bold"), Text(f"  {case.title}"))
    console.print(f"{case.file}:{case.line}  level {case.level}  versions "
                  f"{', '.join(case.versions)}  tags {', '.join(case.tags) or '-'}")
    for statement_id in case.statements:
        statement = catalogue()[statement_id]
        console.print(Text(f"  {statement.id} ({statement.level.value}): ", style="bold"),
                      Text(statement.quote))
    for step in case.steps:
        console.print(Text(f"  line {step.line}: {step.kind} {json.dumps(step.args)}"))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    try:
        address = parse_broker(args.broker) if args.broker else None
        profile = load_profile(args.profile)
    except (ValueError, ProfileError) as error:
        print(f"stomp-conformance: {error}", file=sys.stderr)
        return EXIT_USAGE
    tls = tls_options(args, address)
    cases = _cases(args)
    if not cases:
        print("stomp-conformance: no case matches", file=sys.stderr)
        return EXIT_USAGE
    if args.history and not args.html:
        print("stomp-conformance: --history adds sections to the HTML report: give --html too",
              file=sys.stderr)
        return EXIT_USAGE
    to_stdout = [f"--{name}" for name in ("json", "junit", "html", "markdown")
                 if getattr(args, name) == STDOUT]
    if len(to_stdout) > 1:  # one stream cannot hold two reports a reader could split
        print(f"stomp-conformance: {', '.join(to_stdout)}: only one report can go to "
              "standard output (-)", file=sys.stderr)
        return EXIT_USAGE
    flag = "--baseline"
    try:  # both read before the run starts, so a bad file costs no run
        baseline = load_report(args.baseline) if args.baseline else None
        flag = "--history"
        history = load_history(args.history) if args.history else None
    except ReportFileError as error:
        print(f"stomp-conformance: {flag}: {error}", file=sys.stderr)
        return EXIT_USAGE

    async def run() -> list[CaseResult]:
        if address is not None:
            return await go(address)
        async with embedded() as broker:  # the reference broker, in this process
            return await go(parse_broker(f"127.0.0.1:{broker.port}"))

    async def go(where: BrokerAddress) -> list[CaseResult]:
        target = Target(where, profile, tls=tls, login=args.login, passcode=args.passcode,
                        host=args.vhost)
        engine = Engine(target, jobs=args.jobs, case_timeout=args.timeout,
                        deadline=args.deadline, strict=args.strict,
                        transcripts=args.transcript_budget << 20)
        reports.run_id = engine.run_id
        return await engine.run(cases, [ConsoleReporter(), reports])

    reports = ReportWriter(run_id="", json_path=args.json, junit_path=args.junit,
                           records_dir=args.results, html_path=args.html,
                           markdown_path=args.markdown, history=history, strict=args.strict)
    try:
        results = asyncio.run(run())
    except HarnessError as error:
        print(f"stomp-conformance: {error}", file=sys.stderr)
        return EXIT_HARNESS
    except OSError as error:
        print(f"stomp-conformance: cannot write a report: {error}", file=sys.stderr)
        return EXIT_USAGE
    for path in reports.written:
        print(f"wrote {path}", file=sys.stderr)
    refused = [r for r in results if r.setup_refused]
    if refused and all(r.setup_refused for r in results
                       if r.outcome not in (Outcome.SKIPPED, Outcome.UNSUPPORTED)):
        why = refused[0].message  # "STOMP 1.2: a CONNECT ... got ERROR (...)"
        line = why.partition(": ")[2] if "never answered CONNECT" in why else \
            f"every CONNECT was refused: {why}"
        print(f"stomp-conformance: {line}", file=sys.stderr)
        return EXIT_HARNESS
    outcomes = {r.outcome for r in results}
    failed = Outcome.FAILED in outcomes
    if baseline is not None:
        failed = _gate(compare_baseline(results, baseline), args.baseline)
    if failed:
        return EXIT_FAILED
    return EXIT_HARNESS if Outcome.ERROR in outcomes else EXIT_OK


def _gate(diff: BaselineDiff, where: str) -> bool:
    """Print what changed since the baseline; True when something regressed."""
    console = Console(stderr=True, highlight=False)
    for name in diff.regressions:
        console.print(Text(f"regression (passed in the baseline): {name}", style="bold red"))
    for name in diff.new_passes:
        console.print(Text(f"new pass (not passing in the baseline): {name}", style="green"))
    for name in diff.new_failing:
        console.print(Text(f"failing, not in the baseline: {name}", style="yellow"))
    console.print(f"baseline {where}: {len(diff.regressions)} regressions, "
                  f"{len(diff.new_passes)} new passes, {len(diff.still_failing)} still failing"
                  f", {len(diff.new_failing)} new failing", soft_wrap=True)
    return bool(diff.regressions)


def _coverage(args: argparse.Namespace) -> int:
    report = coverage(_cases(args))
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        console = Console(highlight=False)
        for statement, version in report.uncovered:
            console.print(Text(f"not covered  {statement} [STOMP {version}]", style="yellow"))
        for orphan in report.orphans:
            console.print(Text(f"no statement  {orphan}", style="yellow"))
        console.print(f"{len(report.covered)} of {len(report.covered) + len(report.uncovered)} "
                      f"observable statement-version pairs covered ({report.rate:.1%}); "
                      f"{len(report.orphans)} cases name no statement")
    return EXIT_OK if not report.uncovered and not report.orphans else EXIT_FAILED


def _selftest(args: argparse.Namespace) -> int:
    if args.list_variants:
        for known in VARIANTS:
            print(f"{known.name:32} {known.about}")
        return EXIT_OK
    if args.variants or args.variant:
        return _selftest_variants(args)
    cases = _cases(args)
    console = Console(stderr=True, highlight=False)
    result = asyncio.run(selftest(cases, full=args.full, jobs=args.jobs,
                                  progress=lambda text: console.print(Text(text, style="dim"))))
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK if result.ok else EXIT_FAILED
    out = Console(highlight=False)
    for r in result.not_passing:
        out.print(Text(f"does not pass on the reference broker: {r.id} [{r.version}] "
                       f"{r.outcome.value}: {r.message}", style="bold red"))
    out.print("case x fault kill matrix (faults that make the case fail):")
    for case_id in sorted({r.id for r in result.clean}):
        killers = result.killers(case_id)
        out.print(Text(f"  {case_id}: ", style="bold") +
                  Text(", ".join(killers) if killers else "SURVIVES every fault",
                       style="" if killers else "bold red"))
    for fault in result.idle_faults:
        out.print(Text(f"fault {fault} makes no case fail", style="bold red"))
    out.print(f"kill rate {result.kill_rate:.1%} ({len(result.survivors)} surviving cases); "
              f"{len(result.matrix) - len(result.idle_faults)} of {len(result.matrix)} faults "
              f"kill at least one case; selftest {'passed' if result.ok else 'FAILED'}")
    return EXIT_OK if result.ok else EXIT_FAILED


def _selftest_variants(args: argparse.Namespace) -> int:
    try:
        chosen = [variant(name) for name in args.variant] if args.variant else list(VARIANTS)
    except ValueError as error:
        print(f"stomp-conformance: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.full:
        print("stomp-conformance: --full is for the fault matrix, not --variants",
              file=sys.stderr)
        return EXIT_USAGE
    cases = _cases(args)
    console = Console(stderr=True, highlight=False)
    result = asyncio.run(selftest_variants(
        cases, chosen, jobs=args.jobs, at_once=args.at_once,
        progress=lambda text: console.print(Text(text, style="dim"))))
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK if result.ok else EXIT_FAILED
    out = Console(highlight=False)
    table = Table("variant", "case runs", "clean", "bad", box=None)
    for run in result.runs:
        table.add_row(run.variant.name, str(len(run.results)),
                      str(len(run.results) - len(run.bad)),
                      Text(str(len(run.bad)), style="bold red" if run.bad else ""))
    out.print(table)
    for name, r in result.bad:
        out.print(Text(f"{name}: {r.id} [{r.version}] {r.outcome.value}: {r.message}",
                       style="bold red"), soft_wrap=True)
    total = sum(len(run.results) for run in result.runs)
    out.print(f"{len(result.runs)} configurations, {total} case runs, {len(result.bad)} bad; "
              f"selftest --variants {'passed' if result.ok else 'FAILED'}")
    return EXIT_OK if result.ok else EXIT_FAILED


def _broker(args: argparse.Namespace) -> int:
    if args.list_faults:
        for name, (statement, does) in sorted(FAULTS.items()):
            print(f"{name:40} {statement:45} {does}")
        return EXIT_OK
    users = None
    if args.login is not None:
        users = {args.login: args.passcode or ""}
    try:
        config = BrokerConfig(
            host=args.host, port=args.port, users=users, v10_anonymous=args.v10_anonymous,
            vhosts=tuple(dict.fromkeys(args.vhost)) if args.vhost else None,
            unknown_vhost=args.unknown_vhost, heartbeat=args.heartbeat, nack=args.nack,
            unknown_command=args.unknown_command, minimal_connected=args.minimal_connected,
            colon_ids=args.colon_ids, server_headers=args.server_headers,
            faults=frozenset(args.fault or ())).with_limits(_limits(args.limit or ()))
    except ValueError as error:  # one line, as argparse's own errors are not
        print(f"stomp-conformance: {error}", file=sys.stderr)
        return EXIT_USAGE

    async def serve() -> None:
        broker = Broker(config)
        try:
            await broker.start()
        except OSError as error:
            raise HarnessError(f"cannot listen on {config.host}:{config.port}: "
                               f"{error.strerror or error}") from None
        faults = f" with faults {', '.join(sorted(config.faults))}" if config.faults else ""
        print(f"stomp-conformance broker listening on {config.host}:{broker.port}{faults}",
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
        print(f"stomp-conformance: {error}", file=sys.stderr)
        return EXIT_HARNESS
    return EXIT_OK


async def _stop_at_eof(stdin: asyncio.StreamReader, stop: asyncio.Event) -> None:
    while await stdin.read(4096):
        pass
    stop.set()


def _not_run(value: str) -> tuple[str, str]:
    name, sep, reason = value.partition("=")
    if not sep or not name.strip() or not reason.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=REASON, got {value!r}")
    return name.strip(), reason.strip()


def _compare(args: argparse.Namespace) -> int:
    try:
        reports = [load_report(path) for path in args.reports]
    except ReportFileError as error:
        print(f"stomp-conformance: {error}", file=sys.stderr)
        return EXIT_USAGE
    matrix = compare(reports, args.reports, not_run=args.not_run)
    outputs: list[tuple[str | None, Callable[[], bytes]]] = [
        (args.html, lambda: compare_html(matrix).encode("utf-8")),
        (args.markdown, lambda: compare_markdown(matrix).encode("utf-8")),
        (args.json, lambda: dumps_json(matrix))]
    if all(path is None for path, _ in outputs):
        sys.stdout.flush()
        sys.stdout.buffer.write(compare_markdown(matrix).encode("utf-8"))  # whatever the locale
        return EXIT_OK
    for path, render in outputs:
        if path is None:
            continue
        try:
            write_atomic(Path(path), render())
        except OSError as error:
            print(f"stomp-conformance: cannot write {path}: {error.strerror or error}",
                  file=sys.stderr)
            return EXIT_USAGE
        print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK


def _fuzz(args: argparse.Namespace) -> int:
    from conformance.cli.fuzz import fuzz_command  # the fuzzer loads only when used

    return fuzz_command(args)


def _replay(args: argparse.Namespace) -> int:
    from conformance.cli.fuzz import replay_command

    return replay_command(args)


def _probe(args: argparse.Namespace) -> int:
    from conformance.probes import probe_command  # loads only when used

    return probe_command(args)


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


def _level(value: str) -> str:
    known = {level.value for level in Level} | {"must", "should", "may"}
    if value.upper() not in known and value.lower() not in known:
        raise argparse.ArgumentTypeError(
            f"unknown level {value!r}: use must, should, may or a key word such as 'MUST NOT'")
    return value


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="stomp-conformance",
        description="Conformance suite and fuzzer for STOMP 1.0, 1.1 and 1.2 brokers.")
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = top.add_subparsers(dest="verb", metavar="VERB", required=True)

    spec = verbs.add_parser("spec", help="list the normative statements of the spec",
                            description="List the catalogue of normative statements.")
    spec.add_argument("--json", action="store_true", help="print JSON on stdout, nothing else")
    spec.add_argument("--level", type=_level,
                      help="a key word (MUST, 'MUST NOT', SHOULD, ...) or must/should/may")
    spec.add_argument("--party", choices=[p.value for p in Party])
    spec.add_argument("--section", help="part of a section heading, e.g. 'heart'")
    spec.add_argument("--stomp-version", dest="version", choices=VERSIONS)
    spec.add_argument("--observable", action=argparse.BooleanOptionalAction, default=None,
                      help="only statements a client can (or cannot) observe on the wire")
    spec.set_defaults(run=_spec)

    def session_flags(verb: argparse.ArgumentParser, default_profile: str | None) -> None:
        """Who connects, and what the broker is known to do (run, fuzz, replay, probe)."""
        verb.add_argument("--login")
        verb.add_argument("--passcode")
        verb.add_argument("--vhost", help="the value of CONNECT's host header")
        verb.add_argument("--profile", default=default_profile,
                          help=f"a shipped profile ({', '.join(shipped())}) or a YAML file")

    def tls_flags(verb: argparse.ArgumentParser) -> None:
        verb.add_argument("--tls-ca", metavar="FILE", help="CA certificates to verify the broker")
        verb.add_argument("--tls-cert", metavar="FILE", help="client certificate")
        verb.add_argument("--tls-key", metavar="FILE", help="client key")
        verb.add_argument("--tls-no-verify", action="store_true", help="do not verify the broker")

    run = verbs.add_parser("run", help="run the cases against a broker",
                           description="Run the conformance cases against a broker.",
                           usage="%(prog)s [--broker URL] [--profile NAME] [--cases PATH] "
                                 "[reports] [selection] [options] (see --help)")
    run.add_argument("--broker", metavar="URL",
                     help="HOST:PORT, stomp://HOST:PORT or stomp+ssl://HOST:PORT (default: "
                          "the reference broker, started in this process)")
    session_flags(run, "reference")
    run.add_argument("--jobs", type=positive, default=8, help="cases run at once (default 8)")
    run.add_argument("--timeout", type=seconds, default=30.0,
                     help="seconds a case may take (default 30)")
    run.add_argument("--deadline", type=seconds, help="seconds the whole run may take")
    run.add_argument("--transcript-budget", type=positive, default=16, metavar="MIB",
                     help="MiB of transcripts the run keeps for its reports, in all (default "
                          "16; a case keeps its first 256 KiB and last 64 KiB, and only its "
                          "first 16 KiB and last 4 KiB once the budget is spent)")
    tls_flags(run)
    run.add_argument("--json", metavar="PATH", help="write the JSON report to PATH (- for stdout)")
    run.add_argument("--junit", metavar="PATH", help="write JUnit XML to PATH (- for stdout)")
    run.add_argument("--html", metavar="PATH",
                     help="write the single-file HTML report to PATH (- for stdout)")
    run.add_argument("--history", metavar="PATH",
                     help="add trend, regression, flaky-case and fuzz-bug sections to the HTML "
                          "report from the report-data.json of `stomp-conformance pipeline` "
                          "(the file, or the pipeline's output folder)")
    run.add_argument("--markdown", metavar="PATH",
                     help="write a Markdown summary (for a pull-request comment) to PATH "
                          "(- for stdout)")
    run.add_argument("--baseline", metavar="PATH",
                     help="an earlier JSON report: exit 1 only on regressions (cases that "
                          "passed there and fail now), and list new passes")
    run.add_argument("--results", metavar="DIR",
                     help="write JSON Lines result records for the pipeline into DIR")
    run.add_argument("--strict", action="store_true",
                     help="certification: grade the profile's known deviations as what they "
                          "are (failed or non-strict), so a failed one exits 1; with "
                          "--baseline these grades are compared. Without it they are "
                          "known-deviation and keep exit 0")
    verbs_with_cases = [("run", _run, run)]

    broker = verbs.add_parser("broker", help="serve the reference broker",
                              description="Serve the reference STOMP broker until interrupted.")
    broker.add_argument("--host", default="127.0.0.1", help="address to listen on")
    broker.add_argument("--port", type=int, default=61613, help="port (0: any free port)")
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
    broker.set_defaults(run=_broker)

    def broker_flags(verb: argparse.ArgumentParser, default_profile: str | None, *,
                     deadline: bool = True) -> None:
        """The target of fuzz, replay and probe: loopback only unless --allow-remote."""
        verb.add_argument("--broker", metavar="URL",
                          help="HOST:PORT, stomp://HOST:PORT or stomp+ssl://HOST:PORT; only "
                               "loopback addresses unless --allow-remote (default: the "
                               "reference broker, started for the command)")
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

    fuzz = verbs.add_parser(
        "fuzz", help="fuzz a broker with grammar-driven input",
        description="Send inputs built from the spec's grammar (valid sessions and inputs that "
                    "each break one rule) to a broker, judge each answer, probe that it stays "
                    "alive, and save each finding (reproducer, answer, grade, YAML case) in "
                    "--corpus DIR as it is found. A campaign stopped at any point resumes from "
                    "DIR. Exit 1 when a finding is graded failed, 0 otherwise.")
    broker_flags(fuzz, "reference")
    fuzz.add_argument("--time", default="60s", metavar="DURATION",
                      help="how long to fuzz: 90s, 10m, 1h (default 60s)")
    fuzz.add_argument("--seed", type=int, help="the campaign's seed (default: a random one)")
    fuzz.add_argument("--corpus", default="fuzz-campaign", metavar="DIR",
                      help="the campaign folder: state, corpus, findings (default "
                           "./fuzz-campaign; an existing campaign there is resumed)")
    fuzz.add_argument("--jobs", type=positive, default=16,
                      help="inputs under way at once (default 16)")
    fuzz.add_argument("--minimise", type=float, default=10.0, metavar="SECONDS",
                      help="seconds spent minimising each finding (default 10; 0: none)")
    fuzz.add_argument("--stomp-version", action="append", choices=VERSIONS,
                      help="fuzz this version only (repeatable; default: the profile's)")
    fuzz.add_argument("--mutation", action="append", metavar="NAME",
                      help="use only this mutation (repeatable; default: all)")
    fuzz.add_argument("--generator", default="grammar", help="what draws the inputs "
                      "(default grammar)")
    fuzz.add_argument("--results", metavar="DIR",
                      help="write JSON Lines finding records for the pipeline into "
                           "DIR/findings.jsonl")
    fuzz.set_defaults(run=_fuzz)

    again = verbs.add_parser(
        "replay", help="replay a fuzz finding",
        description="Send a finding's reproducer again and judge the answer. Without "
                    "--broker, against the broker it was found on (the reference broker, started "
                    "with the same faults). Exit 1 when it reproduces, 0 when it does not.")
    again.add_argument("finding", metavar="FINDING.json")
    broker_flags(again, None)
    again.add_argument("--times", type=positive, default=1,
                       help="how many times to send it (default 1)")
    again.set_defaults(run=_replay)

    probing = verbs.add_parser(
        "probe", help="probe a broker's size limits and its handling of cut, slow and "
                      "batched frames",
        description="Find the broker's header count, header line and body limits (grown, "
                    "then bisected to the exact value), send frames cut at every octet, "
                    "dribble a frame an octet at a time, and write many frames at once; "
                    "each probe gets a verdict. Exit 1 when a verdict is failed, 0 otherwise.")
    broker_flags(probing, "reference", deadline=False)
    probing.add_argument("--probe", action="append", metavar="NAME",
                         help="run this probe only (repeatable): header-count, header-line, "
                              "body, split, slow-loris, many-frames (default: all)")
    probing.add_argument("--stomp-version", choices=VERSIONS, default="1.2")
    probing.add_argument("--budget", type=seconds, default=60.0,
                         help="seconds each probe may take (default 60)")
    probing.add_argument("--within", type=seconds, default=5.0,
                         help="seconds an answer may take (default 5)")
    probing.add_argument("--slow-budget", type=seconds, default=40.0,
                         help="seconds slow-loris dribbles each of its two frames (default 40)")
    probing.add_argument("--slow-interval", type=seconds, default=1.0,
                         help="seconds between the octets slow-loris sends (default 1)")
    probing.add_argument("--json", action="store_true",
                         help="print the verdicts as JSON on stdout, nothing else")
    probing.set_defaults(run=_probe)
    add_pipeline(verbs)

    matrix = verbs.add_parser(
        "compare", help="compare JSON reports: brokers x case runs",
        description="Compare JSON reports of several brokers (or runs) case run by case run. "
                    "With none of --html, --markdown and --json, print the Markdown on stdout.")
    matrix.add_argument("reports", nargs="+", metavar="REPORT.json")
    matrix.add_argument("--html", metavar="PATH", help="write the HTML matrix to PATH")
    matrix.add_argument("--markdown", metavar="PATH", help="write the Markdown matrix to PATH")
    matrix.add_argument("--json", metavar="PATH",
                        help="write the outcomes alone (broker x id@version) as JSON to PATH")
    matrix.add_argument("--not-run", metavar="NAME=REASON", type=_not_run, action="append",
                        default=[], help="name a broker that could not be run, and why "
                                         "(repeatable); the outputs say so")
    matrix.set_defaults(run=_compare)

    verbs_with_cases.append(("coverage", _coverage, verbs.add_parser(
        "coverage", help="statements x cases: what the catalogue covers",
        description="Which observable statements the cases cover, per STOMP version.")))
    check = verbs.add_parser(
        "selftest", help="the catalogue against the reference broker and its faults",
        description="Run the catalogue against the reference broker (every case must pass) "
                    "and against each of its faults (every case must fail under one).")
    check.add_argument("--full", action="store_true",
                       help="every case under every fault (default: the faults each case's "
                            "fault:NAME tags name)")
    check.add_argument("--jobs", type=positive, default=8)
    check.add_argument("--variants", action="store_true",
                       help="instead: run the catalogue against the reference broker under "
                            "each of its legal configurations (every case must pass, be "
                            "informational or unsupported on each)")
    check.add_argument("--variant", action="append", metavar="NAME",
                       help="with --variants: only this configuration (repeatable; see "
                            "--list-variants)")
    check.add_argument("--list-variants", action="store_true",
                       help="list the configurations of --variants and exit")
    check.add_argument("--at-once", type=positive, default=2,
                       help="with --variants: brokers run at once (default 2)")
    verbs_with_cases.append(("selftest", _selftest, check))

    for name, run_verb, text in (("list", _list, "list the cases"),
                            ("show", _show, "show a case, its statements' text and its steps")):
        verb = verbs.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        if name == "show":
            verb.add_argument("case", help="a case id")
        verbs_with_cases.append((name, run_verb, verb))
    for name, run_verb, verb in verbs_with_cases:
        verb.add_argument("--cases", action="append", metavar="PATH",
                          help="a folder or file of YAML cases (default: the shipped catalogue)")
        verb.add_argument("--tag")
        verb.add_argument("--statement", help="a statement id")
        verb.add_argument("--level", choices=["must", "should", "may"])
        verb.add_argument("--stomp-version", choices=VERSIONS)
        verb.add_argument("-k", metavar="TEXT", help="only cases whose id contains TEXT")
        if name != "run":
            verb.add_argument("--json", action="store_true",
                              help="print JSON on stdout, nothing else")
        verb.set_defaults(run=run_verb)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except CaseLoadError as error:
        print(f"stomp-conformance: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `stomp-conformance spec | head`
        return EXIT_OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
