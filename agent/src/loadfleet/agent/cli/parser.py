"""The parser of `loadfleet-agent`: its description, examples and option groups, in the order
`--help` shows them (the flags without a group first, then security, limits, monitor-only mode)."""

from __future__ import annotations

import argparse

from .. import __version__
from .connection import add_address_options, add_security_options
from .load import add_limit_options, add_load_options
from .monitor import add_monitor_options
from .spooling import add_spool_options

EPILOG = (
    "examples (TLS flags from $LOADFLEET_TLS_CA/_CERT/_KEY; docs/security.md):\n"
    "  loadfleet-agent --controller 10.0.0.5:7700 --tls-ca pki/ca.crt --tls-cert pki/agent-load-1.crt "
    "--tls-key pki/agent-load-1.key --allow-targets 10.0.0.0/24\n"
    "  loadfleet-agent --controller 10.0.0.5:7700 --labels zone=a,rack=3\n"
    "  loadfleet-agent --controller 10.0.0.5:7700 --monitor --target http://10.0.0.7:8080 --process nginx\n"
    "  loadfleet-agent --controller 10.0.0.5:7700 --monitor --role nfs --process ganesha.nfsd\n"
    "  loadfleet-agent --controller 10.0.0.5:7700 --monitor --role lb --process haproxy "
    "--haproxy-stats /run/haproxy/admin.sock"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loadfleet-agent",
        description="Connect to a loadfleet controller and run the load it assigns on this host.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"loadfleet-agent {__version__}")
    add_address_options(parser)
    add_load_options(parser)
    add_spool_options(parser)
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    add_security_options(parser)
    add_limit_options(parser)
    add_monitor_options(parser)
    return parser
