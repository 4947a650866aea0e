"""nginx on a lab network host (`netns.Host`): the one place where a lab server listens on an
address other than loopback.

`NginxServer` refuses every non-loopback address by design. The escape here is narrow: the
address is a host's address inside a network namespace that a running `LabNetwork` created,
which the root namespace cannot reach (the network's guard route), and nginx starts inside that
namespace through the host. Everything else (config, logs, stop by PID) is `NginxServer`'s.
"""
from __future__ import annotations

from pathlib import Path

from .daemon import LabError
from .netns import Host
from .nginx import NginxServer, nginx_program


class NamespaceNginx(NginxServer):
    """nginx serving `docroot` on `host.address:port`, inside `host`'s network namespace."""

    def __init__(self, host: Host, port: int, docroot: Path, state_dir: Path, name: str, *, workers: int = 1,
                 extra_conf: str = ""):
        if not host.netns_path.exists():
            raise LabError(f"nginx {name}: lab host {host.name} has no namespace {host.netns} (network closed?)")
        # The loopback check of NginxServer is replaced by the namespace check above.
        super().__init__("127.0.0.1", port, docroot, state_dir, name, workers=workers, extra_conf=extra_conf)
        self.host, self.lab_host = host.address, host

    def start(self) -> None:
        (self.dir / "tmp").mkdir(parents=True, exist_ok=True)
        conf = self.dir / "nginx.conf"
        conf.write_text(self.config())
        for log in (self.access_log, self.error_log):
            log.write_text("")
        proc = self.lab_host.spawn([nginx_program(), "-c", str(conf), "-p", str(self.dir)])
        self.lab_host.wait_listening(proc, self.port, what=f"nginx {self.name} on {self.lab_host.name}",
                                     error_tail=self.error_tail)
        self.pid = proc.pid


__all__ = ["NamespaceNginx"]
