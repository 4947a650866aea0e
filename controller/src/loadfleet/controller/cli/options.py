"""The option groups that several commands share, each with its reader: the controller's
address and the client's credentials, a plan's targets (--target), InfluxDB (--influx-*), the
files a CI system reads (--junit, --markdown), and the listing of agents or runs as a table or
JSON (--json)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from google.protobuf import json_format

from loadfleet.controller.model.errors import UsageError
from loadfleet.controller.output.sinks.influx import DEFAULT_SPOOL_LIMIT_MB, InfluxConfig
from loadfleet.wire import DEFAULT_CONTROLLER, dial
from loadfleet.wire.dial import TLS_CA_ENV, TLS_CERT_ENV, TLS_KEY_ENV, TOKEN_FILE_ENV, ClientCredentials

from .client import RunClient

CONTROLLER_ENV = dial.CONTROLLER_ENV
INFLUX_ENV = {
    "url": "LOADFLEET_INFLUX_URL",
    "bucket": "LOADFLEET_INFLUX_BUCKET",
    "org": "LOADFLEET_INFLUX_ORG",
    "token": "LOADFLEET_INFLUX_TOKEN",
}

# The subparsers of `loadfleet` (and of `loadfleet certs`): each command adds its own parser.
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

# ------------------------------------------------------------------ controller address, credentials


def add_controller_option(p: argparse._ActionsContainer, text: str | None = None) -> None:
    """--controller HOST:PORT (default $LOADFLEET_CONTROLLER), on a parser or in a group; `text` its help."""
    p.add_argument(
        "--controller", default=os.environ.get(CONTROLLER_ENV, DEFAULT_CONTROLLER), metavar="HOST:PORT", help=text
    )


def add_client_security(p: argparse.ArgumentParser) -> None:
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


def client_credentials(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> ClientCredentials:
    try:
        return dial.client_credentials(
            tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key, token_file=args.token_file, env=env
        )
    except dial.CredentialsError as exc:
        raise UsageError(str(exc)) from None


def connect(args: argparse.Namespace) -> RunClient:
    """A client of the controller at --controller, with the credentials of the security flags."""
    return RunClient(args.controller, credentials=client_credentials(args))


# ------------------------------------------------------------------ a plan's targets


def add_target_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="the url of the plan's target named NAME (targets[].name), e.g. to run a lab's plan "
        "against real hosts unchanged: --target web1=http://10.0.0.11 (repeatable)",
    )


def target_urls(args: argparse.Namespace) -> dict[str, str]:
    """--target NAME=URL options as a mapping; UsageError for one without its '='."""
    urls = {}
    for option in args.target:
        name, equals, url = option.partition("=")
        if not equals or not name or not url:
            raise UsageError(f"--target {option!r}: give NAME=URL, e.g. --target web1=http://10.0.0.11")
        urls[name] = url
    return urls


def add_threshold_option(p: argparse.ArgumentParser) -> None:
    """--threshold, for `run` and `validate` (a pipeline checks its thresholds before a run)."""
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="SPEC",
        help="another threshold, added to the plan's: e.g. 'p99_ms<250', 'request=account:error_pct<1@step' "
        "(repeatable; grammar below)",
    )


# ------------------------------------------------------------------ InfluxDB


def add_influx_options(p: argparse.ArgumentParser) -> None:
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


def influx_config(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> InfluxConfig | None:
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
    return float(args.influx_spool_limit_mb)


# ------------------------------------------------------------------ files for CI systems


@dataclass(frozen=True)
class CiOutputs:
    """Where to write the run's verdict for a CI system (none: not written)."""

    junit: Path | None = None  # JUnit XML: each threshold a test case (output/junit.py)
    markdown: Path | None = None  # a summary a pipeline can post (output/markdown.py)


def add_ci_output_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("files for CI systems (docs/ci.md); written when the run ends, also when it failed")
    g.add_argument(
        "--junit", type=Path, metavar="FILE", help="write the verdict as JUnit XML: each threshold a test case"
    )
    g.add_argument("--markdown", type=Path, metavar="FILE", help="write a Markdown summary a pipeline can post")


def ci_outputs(args: argparse.Namespace) -> CiOutputs:
    """--junit and --markdown, each checked writable now, before a run starts (UsageError)."""
    outputs = CiOutputs(junit=getattr(args, "junit", None), markdown=getattr(args, "markdown", None))
    for flag, path in (("--junit", outputs.junit), ("--markdown", outputs.markdown)):
        if path is not None:
            _check_writable(flag, path)
    if outputs.junit is not None and outputs.junit == outputs.markdown:
        raise UsageError(f"--junit and --markdown name the same file {outputs.junit}: give each its own")
    return outputs


def _check_writable(flag: str, path: Path) -> None:
    """The file can be made (or replaced) where it is named: its folder exists and is writable
    (files are written to a temporary name there, then renamed), and it is not a folder."""
    folder = path.parent
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; name a file")
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: the directory {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: cannot write in the directory {folder}")


# ------------------------------------------------------------------ output format


def print_listing(items: Iterable[Any], table: Callable[[Any], str], as_json: bool) -> None:
    """Agents or runs (protobuf messages): a table, or with --json a JSON list of them."""
    if as_json:
        print(json.dumps([json_format.MessageToDict(i) for i in items], indent=2))
    else:
        print(table(items))
