"""A real HAProxy in front of a server group: round robin over named backends, with its
own config and a stats socket under the state directory.

`backend_requests()` reads per-backend request counts from the stats socket (`show stat`,
CSV), so a test can compare them with the backends' access logs. The reading and parsing are
the monitor agent's (loadfleet.agent.servercounters), so the lab counts as a run does.

`delay_ms` holds every request that long before it is forwarded (a Lua action, `core.msleep`):
a known slowdown injected into a real server, as the regression gate's experiment needs
(bench/gate). HAProxy's timers tick in milliseconds and a Lua sleep yields to its scheduler, so
the delay added is at least `delay_ms` and more on a busy host (2 ms measured as +3.5 ms on an
idle one): measure it, do not assume it.

`front` picks what the frontend speaks to clients (issue 32): "http1" (plain HTTP/1.1), "h2"
(TLS with ALPN h2 then http/1.1, on a self-signed certificate) or "h2c" (cleartext HTTP/2 with
prior knowledge, `proto h2` on the bind). The backends stay HTTP/1.1 whatever the front: in
`mode http` HAProxy ends each h2 stream and balances it as its own request. `mode tcp` is a
connection-level balancer instead: it forwards bytes, so every stream of one client connection
reaches the same backend (which must then speak the front's protocol itself).

Each request (in `mode tcp`, each connection) is one "access " line on HAProxy's stdout, which
`start` sends to `haproxy.log`: `%HV` is the front's HTTP version ("HTTP/2.0" over h2), `%s`
the backend server that took it, so a test can count both.
"""

from __future__ import annotations

from pathlib import Path

from loadfleet.agent.servercounters import CounterError, haproxy_counters, haproxy_show_stat

from .daemon import LOCAL, LabError, LabServer, Launcher, Upstream, check_upstreams, find_program, host_port, log_tail
from .tls import self_signed_cert

BACKEND_GROUP = "group"
STATS_TIMEOUT_S = 5.0
MAX_DELAY_MS = 10_000  # longer than any lab's client timeout: a slowdown, not an outage
FRONTS = ("http1", "h2", "h2c")
MODES = ("http", "tcp")
ACCESS = "access "  # the first word of every access log line (`access_lines`)


def haproxy_program() -> str:
    return find_program("haproxy", "haproxy")


class HaproxyServer(LabServer):
    """HAProxy on a loopback address or a lab host's (its launcher's), balancing round robin over
    `backends` (loopback ones, or on a lab host the same lab network's: `check_upstreams`)."""

    kind = "haproxy"

    def __init__(
        self,
        host: str,
        port: int,
        state_dir: Path,
        name: str,
        backends: list[Upstream],
        *,
        launcher: Launcher = LOCAL,
        delay_ms: int = 0,
        front: str = "http1",
        mode: str = "http",
    ):
        super().__init__(host, port, state_dir, name, launcher=launcher)
        check_upstreams(launcher, list(backends), what=f"haproxy {name}")
        if not 0 <= delay_ms <= MAX_DELAY_MS:
            raise LabError(f"haproxy {name}: delay_ms must be 0 to {MAX_DELAY_MS}, not {delay_ms}")
        if front not in FRONTS:
            raise LabError(f"haproxy {name}: front must be one of {', '.join(FRONTS)}, not {front!r}")
        if mode not in MODES:
            raise LabError(f"haproxy {name}: mode must be one of {', '.join(MODES)}, not {mode!r}")
        if mode == "tcp" and delay_ms:
            raise LabError(f"haproxy {name}: delay_ms needs mode http (a Lua http-request action)")
        self.backends = list(backends)
        self.delay_ms = delay_ms
        self.front = front
        self.mode = mode

    @property
    def pem(self) -> Path:
        """Certificate and key in one file, as HAProxy's `crt` reads them."""
        return self.dir / "front.pem"

    def bind_line(self) -> str:
        address = host_port(self.host, self.port)
        if self.mode == "tcp":  # bytes pass through: TLS and h2 are the backends' to speak
            return f"bind {address}"
        if self.front == "h2":
            return f"bind {address} ssl crt {self.pem} alpn h2,http/1.1"
        if self.front == "h2c":
            return f"bind {address} proto h2"
        return f"bind {address}"

    def log_format(self) -> str:
        if self.mode == "tcp":
            return f'log-format "{ACCESS}tcp %s"'
        return f'log-format "{ACCESS}%HV %ST %s"'

    def access_lines(self) -> list[str]:
        """The access log's lines (one per request, in mode tcp one per connection)."""
        return [line for line in self.log.read_text().splitlines() if line.startswith(ACCESS)]

    @property
    def delay_script(self) -> Path:
        return self.dir / "delay.lua"

    @property
    def stats_socket(self) -> Path:
        return self.dir / "stats.sock"

    @property
    def log(self) -> Path:
        return self.dir / "haproxy.log"

    def config(self) -> str:
        servers = "".join(f"    server {b.name} {host_port(b.host, b.port)}\n" for b in self.backends)
        lua_load, delay = (
            (f"    lua-load {self.delay_script}\n", "    http-request lua.delay\n") if self.delay_ms else ("", "")
        )
        return f"""global
    stats socket {self.stats_socket} mode 600 level admin
    maxconn 8192
    # One thread: with several, HAProxy drops the odd stdout log line (a few in 20,000 seen,
    # while `show stat` counted them all), and the tests count those lines.
    nbthread 1
    log stdout format raw local0
{lua_load}
defaults
    mode {self.mode}
    log global
    # The readiness probe's connect-and-close would log a <BADREQ> line: not a request.
    option dontlognull
    {self.log_format()}
    maxconn 8192
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s

frontend {self.name}
    {self.bind_line()}
{delay}    default_backend {BACKEND_GROUP}

backend {BACKEND_GROUP}
    balance roundrobin
{servers}"""

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        conf = self.dir / "haproxy.cfg"
        if self.delay_ms:
            self.delay_script.write_text(
                f'core.register_action("delay", {{ "http-req" }}, function(txn) core.msleep({self.delay_ms}) end)\n'
            )
        if self.front == "h2" and self.mode == "http":
            cert, key = self_signed_cert(self.dir, self.host)
            self.pem.write_text(cert.read_text() + key.read_text())
            self.pem.chmod(0o600)
        conf.write_text(self.config())
        self.log.write_text("")
        proc = self.start_listening(
            [haproxy_program(), "-db", "-f", str(conf)], what=f"haproxy {self.name}", log=self.log
        )
        self.pid = proc.pid

    def stats_csv(self) -> str:
        """The `show stat` CSV from the stats socket (its header line starts with '# ')."""
        try:
            return haproxy_show_stat(self.stats_socket, STATS_TIMEOUT_S)
        except CounterError as exc:
            raise LabError(f"haproxy {self.name}: {exc}") from exc

    def backend_requests(self) -> dict[str, int]:
        """HTTP requests sent to each backend server, by name (from `show stat`)."""
        return parse_backend_requests(self.stats_csv())

    def error_tail(self) -> str:
        return log_tail(self.log)


def parse_backend_requests(stats_csv: str, group: str = BACKEND_GROUP) -> dict[str, int]:
    try:
        counters = haproxy_counters(stats_csv)
    except CounterError as exc:
        raise LabError(str(exc)) from exc
    prefix, suffix = f"haproxy.{group}.", ".req_tot"
    servers = {
        name.removeprefix(prefix).removesuffix(suffix): int(value)
        for name, value in counters.items()
        if name.startswith(prefix) and name.endswith(suffix)
    }
    return {server: n for server, n in servers.items() if server not in ("FRONTEND", "BACKEND")}
