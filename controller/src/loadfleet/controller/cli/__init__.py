"""The `loadfleet` command: a thin shell over the controller and its client."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path

from google.protobuf import json_format

from loadfleet.controller import __version__
from loadfleet.controller.cli import certs
from loadfleet.controller.cli.client import RunClient
from loadfleet.controller.cli.local import local_cluster
from loadfleet.controller.model.errors import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_STOPPED_BY_CONDITION,
    ControllerUnreachable,
    LoadfleetError,
    UsageError,
)
from loadfleet.controller.output import console, report
from loadfleet.controller.output.sinks.influx import DEFAULT_SPOOL_LIMIT_MB, InfluxConfig
from loadfleet.controller.plan.parse import load_plan, plan_schema
from loadfleet.controller.rpc.server import ControllerServer
from loadfleet.controller.service.controller import DEFAULT_RUNS_DIR, Controller
from loadfleet.controller.service.security import ServerSecurity, server_security
from loadfleet.v1 import run_pb2
from loadfleet.wire import DEFAULT_CONTROLLER, dial
from loadfleet.wire.dial import TLS_CA_ENV, TLS_CERT_ENV, TLS_KEY_ENV, TOKEN_FILE_ENV, ClientCredentials

CONTROLLER_ENV = dial.CONTROLLER_ENV
INFLUX_ENV = {
    "url": "LOADFLEET_INFLUX_URL",
    "bucket": "LOADFLEET_INFLUX_BUCKET",
    "org": "LOADFLEET_INFLUX_ORG",
    "token": "LOADFLEET_INFLUX_TOKEN",
}

# A run that ended in one of these states exits 1.
_FAILED_STATES = (run_pb2.RUN_STATE_FAILED,)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadfleet",
        description="Distributed HTTP load testing: controller and CLI.",
        epilog="Exit codes: 0 done, 1 run failed, its run directory incomplete (a full disk) or controller "
        "unreachable, 2 bad input, "
        "3 a stop condition of the plan ended the run early (results are written).",
    )
    parser.add_argument("--version", action="version", version=f"loadfleet {__version__}")
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    default_controller = os.environ.get(CONTROLLER_ENV, DEFAULT_CONTROLLER)

    p = sub.add_parser(
        "controller",
        help="serve the controller (agents and the CLI connect to it)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples (docs/security.md):\n"
        "  loadfleet controller --listen 0.0.0.0:7700 --tls-cert pki/controller.crt "
        "--tls-key pki/controller.key --tls-ca pki/ca.crt\n"
        "  loadfleet controller --listen 0.0.0.0:7700 --tls-cert pki/controller.crt "
        "--tls-key pki/controller.key --token-file /etc/loadfleet/tokens",
    )
    p.add_argument(
        "--listen",
        default=DEFAULT_CONTROLLER,
        metavar="HOST:PORT",
        help=f"address to serve on (default {DEFAULT_CONTROLLER}); beyond loopback only with TLS and "
        "authentication, or --insecure",
    )
    p.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS_DIR, help="where run directories go (default ./runs)")
    g = p.add_argument_group("security (docs/security.md)")
    g.add_argument(
        "--tls-cert", metavar="FILE", help="the controller's certificate (PEM; `loadfleet certs controller`)"
    )
    g.add_argument("--tls-key", metavar="FILE", help="its private key (PEM)")
    g.add_argument(
        "--tls-ca",
        metavar="FILE",
        help="CA that signs the clients' certificates: every agent and operator must show one",
    )
    g.add_argument(
        "--token-file",
        metavar="FILE",
        help="instead of client certificates: `role name token` lines (roles agent, operator)",
    )
    g.add_argument(
        "--insecure",
        action="store_true",
        help="serve without TLS and authentication on any address (anyone who reaches it controls the agents)",
    )
    _add_influx_options(p)
    p.add_argument(
        "--allow-plan-influx",
        action="store_true",
        help="let plans name their own InfluxDB (sinks.influxdb); off: only the --influx-* destination",
    )

    p = sub.add_parser(
        "run",
        help="run a plan and print live figures and a summary",
        description="Run a plan on a controller's agents (--controller), or on N agents "
        "started on this machine (--local N).",
        epilog="example: loadfleet run plans/quickstart.yaml --local 2",
    )
    p.add_argument("plan", type=Path, help="plan file (YAML)")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--controller",
        default=default_controller,
        metavar="HOST:PORT",
        help=f"controller to use (default ${CONTROLLER_ENV} or {DEFAULT_CONTROLLER})",
    )
    where.add_argument("--local", type=int, metavar="N", help="start a controller and N agents here")
    p.add_argument("--runs-dir", type=Path, default=DEFAULT_RUNS_DIR, help="with --local: where run directories go")
    p.add_argument(
        "--monitor",
        action="append",
        default=[],
        metavar="PROCESS",
        help="with --local: also report this host's CPU, memory, network and the named server "
        "processes (e.g. nginx) in the results (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON (progress goes to stderr)")
    _add_target_option(p)
    _add_client_security(p)
    _add_influx_options(p)

    p = sub.add_parser("validate", help="check a plan and list every problem")
    p.add_argument("plan", type=Path)
    _add_target_option(p)

    p = sub.add_parser("schema", help="print the plan's JSON Schema")

    p = sub.add_parser(
        "report",
        help="write a run's report.html (tables, plots over time, events)",
        description="Build one self-contained HTML file from a run directory "
        "(summary.json, intervals.csv). Every run writes it at its end; "
        "this writes it again, e.g. after an upgrade.",
        epilog="example: loadfleet report runs/20261123-071223-c3c8",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory, e.g. runs/<run-id>")
    p.add_argument("--out", type=Path, metavar="FILE", help="where to write (default RUN_DIR/report.html)")

    p = sub.add_parser(
        "compare",
        help="compare runs side by side (table, and HTML with overlaid curves)",
        description="Print the runs' totals side by side (changes against the first run) "
        "and write an HTML file with their req/s and p99 curves overlaid, "
        "aligned at their start.",
        epilog="example: loadfleet compare runs/A runs/B --out before-after.html",
    )
    p.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR", help="two or more run directories")
    p.add_argument(
        "--out",
        type=Path,
        default=report.DEFAULT_COMPARE_FILE,
        metavar="FILE",
        help=f"HTML file to write (default {report.DEFAULT_COMPARE_FILE})",
    )
    p.add_argument("--json", action="store_true", help="print the table as JSON (the HTML is still written)")

    for name, text in (("agents", "list the controller's agents"), ("runs", "list the controller's runs")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--controller", default=default_controller, metavar="HOST:PORT")
        p.add_argument("--json", action="store_true")
        _add_client_security(p)

    p = sub.add_parser(
        "status",
        help="follow a run that is going (progress lines, then its summary)",
        epilog="example: loadfleet status 20261123-071223-c3c8 --controller ctrl:7700",
    )
    p.add_argument("run_id", metavar="RUN_ID", help="as `loadfleet runs` lists it")
    p.add_argument("--controller", default=default_controller, metavar="HOST:PORT")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (progress goes to stderr)")
    _add_client_security(p)

    _add_certs_parser(sub)

    p = sub.add_parser(
        "stop",
        help="stop a run; its results are still written",
        epilog="example: loadfleet stop 20261123-071223-c3c8 --controller ctrl:7700",
    )
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--controller", default=default_controller, metavar="HOST:PORT")
    _add_client_security(p)
    return parser


def _add_target_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="the url of the plan's target named NAME (targets[].name), e.g. to run a lab's plan "
        "against real hosts unchanged: --target web1=http://10.0.0.11 (repeatable)",
    )


def target_urls(args) -> dict[str, str]:
    """--target NAME=URL options as a mapping; UsageError for one without its '='."""
    urls = {}
    for option in args.target:
        name, equals, url = option.partition("=")
        if not equals or not name or not url:
            raise UsageError(f"--target {option!r}: give NAME=URL, e.g. --target web1=http://10.0.0.11")
        urls[name] = url
    return urls


def _add_client_security(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("security: how to reach a controller that serves TLS (docs/security.md)")
    g.add_argument(
        "--tls-ca", metavar="FILE", help=f"CA that signed the controller's certificate (default ${TLS_CA_ENV})"
    )
    g.add_argument("--tls-cert", metavar="FILE", help=f"this operator's certificate (default ${TLS_CERT_ENV})")
    g.add_argument("--tls-key", metavar="FILE", help=f"its private key (default ${TLS_KEY_ENV})")
    g.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"instead of a certificate: a file holding this operator's token (default ${TOKEN_FILE_ENV})",
    )


def client_credentials(args: argparse.Namespace, env=os.environ) -> ClientCredentials:
    try:
        return dial.client_credentials(
            tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key, token_file=args.token_file, env=env
        )
    except dial.CredentialsError as exc:
        raise UsageError(str(exc)) from None


def _add_certs_parser(sub) -> None:
    p = sub.add_parser(
        "certs",
        help="make a CA and the certificates of a fleet (docs/security.md)",
        description="A private CA and certificates for the controller, agents and operators. "
        "The role is carried in the certificate; an agent's id is its certificate's name.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n"
        "  loadfleet certs init --dir pki\n"
        "  loadfleet certs controller --dir pki --name ctrl.example --ip 10.0.0.5\n"
        "  loadfleet certs agent --dir pki load-1 load-2 load-3\n"
        "  loadfleet certs operator --dir pki alice",
    )
    kinds = p.add_subparsers(dest="certs_command", required=True, metavar="KIND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, required=True, help="where the CA and certificates are")
    common.add_argument("--force", action="store_true", help="replace files that exist")
    k = kinds.add_parser("init", parents=[common], help="a new CA (ca.crt, ca.key)")
    k.add_argument(
        "--days", type=int, default=certs.DEFAULT_CA_DAYS, help=f"validity (default {certs.DEFAULT_CA_DAYS})"
    )
    k = kinds.add_parser("controller", parents=[common], help="the controller's certificate (controller.crt/.key)")
    k.add_argument(
        "--name",
        dest="dns_names",
        action="append",
        default=[],
        metavar="HOSTNAME",
        help="a DNS name agents and the CLI dial the controller by (repeatable)",
    )
    k.add_argument(
        "--ip", dest="ips", action="append", default=[], metavar="IP", help="an IP address they dial it by (repeatable)"
    )
    for kind, what in (
        ("agent", "agents (agent-NAME.crt/.key); the name is the agent's id"),
        ("operator", "operators who start, stop, watch and list runs (operator-NAME.crt/.key)"),
    ):
        k = kinds.add_parser(kind, parents=[common], help=f"certificates for {what}")
        k.add_argument("names", nargs="+" if kind == "agent" else 1, metavar="NAME")
    for k in kinds.choices.values():
        if k.prog.split()[-1] != "init":
            k.add_argument(
                "--days",
                type=int,
                default=certs.DEFAULT_CERT_DAYS,
                help=f"validity (default {certs.DEFAULT_CERT_DAYS}; never beyond the CA's)",
            )


def make_certs(args) -> int:
    if args.days < 1:
        raise UsageError("--days must be at least 1")
    if args.certs_command == "init":
        issued = [certs.init_ca(args.dir, days=args.days, force=args.force)]
    elif args.certs_command == "controller":
        name = (args.dns_names or args.ips or ["controller"])[0]
        issued = [
            certs.issue(
                args.dir,
                certs.Role.CONTROLLER,
                name,
                dns_names=tuple(args.dns_names),
                ips=tuple(args.ips),
                days=args.days,
                force=args.force,
            )
        ]
    else:
        role = certs.Role(args.certs_command)
        for name in args.names:  # every name is checked before anything is written
            certs.check_name(name, f"{role.value} name")
        issued = [certs.issue(args.dir, role, name, days=args.days, force=args.force) for name in args.names]
    for i in issued:
        print(f"wrote {i.cert} and {i.key} (key mode 0600), valid until {i.not_after:%Y-%m-%d}")
    if args.certs_command == "init":
        print(
            f"next: `loadfleet certs controller --dir {args.dir} --name HOST`; keep {issued[0].key} offline "
            "once the fleet's certificates are made"
        )
    return EXIT_OK


def _add_influx_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "InfluxDB (a plan's sinks.influxdb overrides these; with --controller "
        "the remote controller's own settings apply)"
    )
    g.add_argument("--influx-url", help=f"e.g. http://127.0.0.1:8086 (default ${INFLUX_ENV['url']}; none: no InfluxDB)")
    g.add_argument(
        "--influx-bucket",
        help=f"bucket, or db/retention-policy on 1.8 (default ${INFLUX_ENV['bucket']} or loadfleet/autogen)",
    )
    g.add_argument("--influx-org", help=f"organization (default ${INFLUX_ENV['org']} or -)")
    g.add_argument("--influx-token", help=f"token, or user:password on 1.8 (default ${INFLUX_ENV['token']})")
    g.add_argument(
        "--influx-spool-limit-mb",
        type=float,
        default=DEFAULT_SPOOL_LIMIT_MB,
        metavar="MIB",
        help="most a run's spool of points may hold on disk while InfluxDB is unreachable; beyond, "
        f"its oldest points are dropped and the run says so (default {DEFAULT_SPOOL_LIMIT_MB:g})",
    )


def influx_config(args: argparse.Namespace, env=os.environ) -> InfluxConfig | None:
    """Defaults, then environment, then flags; no URL anywhere means no InfluxDB."""
    values = {"bucket": InfluxConfig.bucket, "org": InfluxConfig.org, "token": InfluxConfig.token}
    for key, name in INFLUX_ENV.items():
        if env.get(name):
            values[key] = env[name]
    for key in INFLUX_ENV:
        flag = getattr(args, f"influx_{key}", None)
        if flag:
            values[key] = flag
    return InfluxConfig(**values) if values.get("url") else None


def spool_limit_mb(args: argparse.Namespace) -> float:
    if not args.influx_spool_limit_mb > 0:
        raise UsageError("--influx-spool-limit-mb must be more than 0")
    return args.influx_spool_limit_mb


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_dispatch(args))
    except KeyboardInterrupt:
        print("loadfleet: interrupted", file=sys.stderr)
        return EXIT_RUN_FAILED
    except LoadfleetError as exc:
        print(f"loadfleet: {exc}", file=sys.stderr)
        return exc.exit_code


async def _dispatch(args) -> int:
    if args.command == "controller":
        security = server_security(
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            tls_ca=args.tls_ca,
            token_file=args.token_file,
            insecure=args.insecure,
        )
        controller = Controller(
            runs_dir=args.runs_dir,
            influx=influx_config(args),
            allow_plan_influx=args.allow_plan_influx,
            influx_spool_limit_mb=spool_limit_mb(args),
        )
        return await serve_controller(args.listen, controller, security)
    if args.command == "run":
        return await run_plan(args)
    if args.command == "validate":
        plan = load_plan(args.plan, target_urls(args))
        load = (
            f"a sweep of {plan.sweep.total_steps} steps of {plan.sweep.step_s:g} s"
            if plan.sweep
            else plan.load.describe()
        )
        print(
            f"{args.plan}: ok ({len(plan.targets)} targets, {len(plan.requests)} requests, "
            f"{load}, {plan.duration_s:g} s)"
        )
        return EXIT_OK
    if args.command == "schema":
        print(json.dumps(plan_schema(), indent=2))
        return EXIT_OK
    if args.command == "report":
        print(f"wrote {report.write_report(args.run_dir, args.out)}")
        return EXIT_OK
    if args.command == "compare":
        return compare_runs(args.run_dirs, args.out, args.json)
    if args.command == "certs":
        return make_certs(args)
    async with RunClient(args.controller, credentials=client_credentials(args)) as client:
        if args.command == "status":
            return await _follow(client, args.run_id, args.json)
        if args.command == "stop":
            await client.stop_run(args.run_id)
            print(f"run {args.run_id}: stop requested (agents finish their in-flight requests; results are written)")
        elif args.command == "agents":
            agents = await client.list_agents()
            _print_listing(agents, console.agents_table, args.json)
        else:
            runs = await client.list_runs()
            _print_listing(runs, console.runs_table, args.json)
    return EXIT_OK


def _print_listing(items, table, as_json: bool) -> None:
    if as_json:
        print(json.dumps([json_format.MessageToDict(i) for i in items], indent=2))
    else:
        print(table(items))


def compare_runs(run_dirs: list[Path], out: Path, as_json: bool) -> int:
    if len(run_dirs) < 2:
        raise UsageError("compare needs at least two run directories")
    runs = [report.load_run(d) for d in run_dirs]  # every run is read before anything is written
    written = report.write_compare(runs, out)
    if as_json:
        print(json.dumps({"runs": report.compare_rows(runs), "html": str(written)}, indent=2))
    else:
        print(report.compare_text(runs))
        print(f"wrote {written}")
    return EXIT_OK


async def serve_controller(listen: str, controller: Controller, security: ServerSecurity = ServerSecurity()) -> int:
    try:
        server = ControllerServer(controller, listen, security)
    except (OSError, RuntimeError) as exc:
        raise UsageError(f"cannot listen on {listen}: {exc}") from exc
    await server.start()
    influx = f"; points go to {controller.influx.url}" if controller.influx else ""
    print(
        f"loadfleet controller listening on {server.address} ({security.describe()}); "
        f"runs go to {controller.runs_dir}/{influx}",
        flush=True,
    )
    if security.insecure:
        logging.getLogger(__name__).warning(
            "--insecure: anyone who reaches %s can start runs and join as an agent", server.address
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()
    return EXIT_OK


async def run_plan(args) -> int:
    plan = load_plan(args.plan, target_urls(args))  # problems are reported before anything starts
    if args.monitor and args.local is None:
        raise UsageError(
            "--monitor goes with --local; on other hosts start `loadfleet-agent --monitor` next to the servers"
        )
    if args.local is not None:
        # Local: the plan's author owns this controller, so the plan may pick its InfluxDB.
        controller = Controller(
            runs_dir=args.runs_dir,
            influx=influx_config(args),
            allow_plan_influx=True,
            influx_spool_limit_mb=spool_limit_mb(args),
        )
        async with local_cluster(
            args.local, controller, monitor=tuple(args.monitor), targets=tuple(t.url for t in plan.targets)
        ) as address:
            return await _run_on(address, plan.to_yaml(), args.json)
    return await _run_on(args.controller, plan.to_yaml(), args.json, client_credentials(args))


async def _run_on(
    address: str, plan_yaml: str, as_json: bool, credentials: ClientCredentials = ClientCredentials()
) -> int:
    async with RunClient(address, credentials=credentials) as client:
        started = await client.start_run(plan_yaml)
        print(f"run {started.run_id} started on {address}", file=sys.stderr if as_json else sys.stdout, flush=True)
        return await _follow(client, started.run_id, as_json)


async def _follow(client: RunClient, run_id: str, as_json: bool) -> int:
    """Prints a run's progress until it ends, then its summary; returns the exit code."""
    progress = sys.stderr if as_json else sys.stdout
    summary = None
    stopping = _stop_on_interrupt(client, run_id)
    try:
        print(console.PROGRESS_HEADER, file=progress, flush=True)
        async for update in client.watch(run_id):
            kind = update.WhichOneof("update")
            if kind == "interval":
                print(console.progress_line(update.interval), file=progress, flush=True)
            elif kind == "event":
                print(console.event_line(update.event), file=progress, flush=True)
            else:
                summary = update.finished
    except ControllerUnreachable as exc:
        raise ControllerUnreachable(
            f"{exc}; run {run_id} may still be going: `loadfleet status {run_id}` follows it again"
        ) from None
    finally:
        stopping()
    if summary is None:
        raise LoadfleetError("the controller ended the run without a summary")
    doc = json.loads(summary.summary_json) if summary.summary_json else {}
    if as_json:
        print(summary.summary_json)
    else:
        print(console.summary_table(summary, doc))
        if phases := console.phases_table(doc):
            print(phases)
        if len(doc.get("steps", [])) > 1:
            print(console.steps_table(doc))
        if doc.get("hosts"):
            print(console.hosts_table(doc))
    if summary.state in _FAILED_STATES or doc.get("incomplete_files"):
        return EXIT_RUN_FAILED  # a full disk left results out: scripts must not take them as whole
    return EXIT_STOPPED_BY_CONDITION if doc.get("stop") else EXIT_OK


def _stop_on_interrupt(client: RunClient, run_id: str):
    """The first Ctrl-C asks the controller to stop the run (results are still written)."""
    loop = asyncio.get_running_loop()

    def request_stop() -> None:
        print("\nloadfleet: stopping the run (Ctrl-C again to quit at once)", file=sys.stderr)
        loop.remove_signal_handler(signal.SIGINT)
        loop.create_task(client.stop_run(run_id))

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, request_stop)
    return lambda: loop.remove_signal_handler(signal.SIGINT)


if __name__ == "__main__":
    sys.exit(main())
