"""`loadfleet controller`: serve the controller, which agents and the CLI connect to."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path

from loadfleet.controller.model.errors import EXIT_OK, UsageError
from loadfleet.controller.rpc.server import ControllerServer
from loadfleet.controller.service.controller import DEFAULT_RUNS_DIR, Controller
from loadfleet.controller.service.security import ServerSecurity, server_security
from loadfleet.wire import DEFAULT_CONTROLLER

from ..options import Subcommands, add_influx_options, influx_config, spool_limit_mb

# The name the CLI's messages have always been logged under (the log format shows it).
_log = logging.getLogger("loadfleet.controller.cli")


def add_parser(commands: Subcommands, name: str) -> None:
    p = commands.add_parser(
        name,
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
    _add_server_security(p)
    add_influx_options(p)
    p.add_argument(
        "--allow-plan-influx",
        action="store_true",
        help="let plans name their own InfluxDB (sinks.influxdb); off: only the --influx-* destination",
    )


def _add_server_security(p: argparse.ArgumentParser) -> None:
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


async def handle(args: argparse.Namespace) -> int:
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


async def serve_controller(listen: str, controller: Controller, security: ServerSecurity = ServerSecurity()) -> int:
    """Serves until SIGINT or SIGTERM, then stops the server; UsageError when it cannot listen."""
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
        _log.warning("--insecure: anyone who reaches %s can start runs and join as an agent", server.address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()
    return EXIT_OK
