"""A real Varnish in front of a server group: a round robin director (VCL), caching on or
off, its own working directory (`-n`) under the state directory.

`counters()` reads `varnishstat -j -n DIR`: cache hits and misses, and requests per backend,
so a test can compare them with the backends' access logs. The reading and
parsing are the monitor agent's (loadfleet.agent.servercounters), so the lab counts as a run does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadfleet.agent.servercounters import CounterError, varnish_counters, varnishstat

from .daemon import LOCAL, LabError, LabServer, Launcher, Upstream, check_upstreams, find_program, host_port, log_tail

DEFAULT_CACHE = True
CACHE_MEMORY = "64m"
# varnishd compiles the VCL with cc before it listens, which takes a few seconds.
START_TIMEOUT_S = 30.0
STAT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class VarnishCounters:
    client_requests: int
    hits: int
    misses: int
    per_backend: dict[str, int]

    @property
    def backend_requests(self) -> int:
        """The sum of the per-backend counters, which Varnish counts as each request goes out.
        Not `MAIN.backend_req`: that one is a worker's count, folded into the total when a
        worker idles, and was seen 2 behind the backends' logs 15 s after the load stopped."""
        return sum(self.per_backend.values())


def varnishd_program() -> str:
    return find_program("varnishd", "varnish")


class VarnishServer(LabServer):
    """Varnish on a loopback address or a lab host's, with backends as HAProxy's (`check_upstreams`);
    `cache=False` passes every request to a backend."""

    kind = "varnish"

    def __init__(
        self,
        host: str,
        port: int,
        state_dir: Path,
        name: str,
        backends: list[Upstream],
        *,
        cache: bool = DEFAULT_CACHE,
        launcher: Launcher = LOCAL,
    ):
        super().__init__(host, port, state_dir, name, launcher=launcher)
        check_upstreams(launcher, list(backends), what=f"varnish {name}")
        self.backends, self.cache = list(backends), cache

    @property
    def workdir(self) -> Path:
        return self.dir / "work"

    @property
    def log(self) -> Path:
        return self.dir / "varnishd.log"

    def vcl(self) -> str:
        backends = "".join(
            f'backend {_vcl_name(b.name)} {{ .host = "{b.host}"; .port = "{b.port}"; }}\n' for b in self.backends
        )
        adds = "".join(f"    group.add_backend({_vcl_name(b.name)});\n" for b in self.backends)
        recv = "    set req.backend_hint = group.backend();\n"
        if not self.cache:
            recv += "    return (pass);\n"
        return f"""vcl 4.1;
import directors;

{backends}
sub vcl_init {{
    new group = directors.round_robin();
{adds}}}

sub vcl_recv {{
{recv}}}
"""

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        vcl = self.dir / "default.vcl"
        vcl.write_text(self.vcl())
        self.log.write_text("")
        # -F: foreground, so the PID is ours; -j none: no jail user (the state dir may be private);
        # -T none: no management port, nothing listens but -a.
        argv = [
            varnishd_program(),
            "-F",
            "-j",
            "none",
            "-T",
            "none",
            "-a",
            host_port(self.host, self.port),
            "-f",
            str(vcl),
            "-n",
            str(self.workdir),
            "-s",
            f"malloc,{CACHE_MEMORY}",
            "-P",
            str(self.dir / "varnishd.pid"),
        ]
        proc = self.start_listening(argv, what=f"varnish {self.name}", log=self.log, timeout_s=START_TIMEOUT_S)
        self.pid = proc.pid

    def counters(self) -> VarnishCounters:
        try:
            return parse_counters(varnishstat(self.workdir, STAT_TIMEOUT_S), [b.name for b in self.backends])
        except CounterError as exc:
            raise LabError(f"varnish {self.name}: {exc}") from exc

    def error_tail(self) -> str:
        return log_tail(self.log)


def parse_counters(stats: dict[str, Any], backend_names: list[str]) -> VarnishCounters:
    """From varnishstat's counters (raises CounterError on odd ones)."""
    counters = varnish_counters(stats)

    def value(name: str) -> int:
        return int(counters.get(f"varnish.{name}", 0))

    return VarnishCounters(
        client_requests=value("client_req"),
        hits=value("cache_hit"),
        misses=value("cache_miss"),
        per_backend={name: value(f"backend.{_vcl_name(name)}.req") for name in backend_names},
    )


def _vcl_name(name: str) -> str:
    """Server names may hold '-' or '.', VCL identifiers may not."""
    return "b_" + "".join(c if c.isalnum() else "_" for c in name)
