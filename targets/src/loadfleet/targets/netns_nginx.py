"""nginx on a lab network host (`netns.Host`): `NginxServer` with the host as its launcher,
which allows the host's own address (inside a namespace a running `LabNetwork` created, behind
its guard route) and starts nginx inside that namespace. Every lab server kind takes a host
this way (`launcher=host`); this class keeps the short form tests use.
"""

from __future__ import annotations

from pathlib import Path

from .daemon import LabError
from .netns import Host
from .nginx import NginxServer


class NamespaceNginx(NginxServer):
    """nginx serving `docroot` on `host.address:port`, inside `host`'s network namespace."""

    def __init__(
        self,
        host: Host,
        port: int,
        docroot: Path,
        state_dir: Path,
        name: str,
        *,
        workers: int = 1,
        extra_conf: str = "",
    ):
        if not host.netns_path.exists():
            raise LabError(f"nginx {name}: lab host {host.name} has no namespace {host.netns} (network closed?)")
        super().__init__(
            host.address, port, docroot, state_dir, name, workers=workers, extra_conf=extra_conf, launcher=host
        )
        self.lab_host = host


__all__ = ["NamespaceNginx"]
