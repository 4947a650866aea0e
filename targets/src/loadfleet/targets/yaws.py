"""Yaws, the Erlang web server (Debian `yaws`), run by the lab: its own `yaws.conf`, logs and
control directory under the state directory, one loopback address, stopped by PID (the
Erlang VM shuts down cleanly on SIGTERM). No Erlang distribution, so no epmd either."""

from __future__ import annotations

from pathlib import Path

from .daemon import LOCAL, LabServer, Launcher, find_program, log_tail

EBIN = Path("/usr/lib/yaws/ebin")
START_TIMEOUT_S = 20.0  # the VM boots in about a second when the machine is idle


class YawsServer(LabServer):
    """Yaws serving `docroot`."""

    kind = "yaws"

    def __init__(
        self,
        host: str,
        port: int,
        docroot: Path,
        state_dir: Path,
        name: str,
        *,
        also_listen: tuple[str, ...] = (),
        launcher: Launcher = LOCAL,
    ):
        super().__init__(host, port, state_dir, name, launcher=launcher)
        self.docroot = Path(docroot).resolve()
        self.also_listen = also_listen  # more addresses, at the same port (spec.py)

    @property
    def virtual_servers(self) -> list[tuple[str, str]]:
        """(name, address) of each `<server>` block: Yaws binds one address per block, so each
        address of also_listen is a block of its own, named apart so that each has its own log."""
        return [(self.name, self.host)] + [(f"{self.name}.{i}", host) for i, host in enumerate(self.also_listen, 1)]

    @property
    def access_log(self) -> Path:
        """Yaws names it after the virtual server: `<server name>:<port>.access`."""
        return self._log_of(self.name)

    @property
    def access_logs(self) -> list[Path]:
        """One per `<server>` block, so one per address."""
        return [self._log_of(server) for server, _ in self.virtual_servers]

    def _log_of(self, server: str) -> Path:
        return self.dir / "logs" / f"{server}:{self.port}.access"

    def config(self) -> str:
        # nodelay: Yaws writes headers and body separately; with Nagle on, the body waits for
        # the client's delayed ACK (measured: ~40 ms per request, 180 req/s with 8 clients).
        blocks = "".join(
            f"""<server {server}>
    port = {self.port}
    listen = {host}
    docroot = {self.docroot}
    access_log = true
    <listen_opts>
        nodelay = true
    </listen_opts>
</server>
"""
            for server, host in self.virtual_servers
        )
        return f"""logdir = {self.dir / "logs"}
keepalive_timeout = 65000
{blocks}"""

    def start(self) -> None:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        conf = self.dir / "yaws.conf"
        conf.write_text(self.config())
        for log in self.access_logs:
            log.write_text("")
        (self.dir / "stderr.log").write_text("")
        # What /usr/bin/yaws -i runs, without a shell; yaws keeps its control file under $HOME
        # (`env` execs the VM, so the PID is the server's).
        argv = [
            "env",
            f"HOME={self.dir}",
            find_program("erl", "yaws", extra_dirs=("/usr/bin",)),
            "-noshell",
            "-noinput",
            "-pa",
            str(EBIN),
            "-run",
            "yaws",
            "-conf",
            str(conf),
            "-yaws",
            "id",
            self.name,
        ]
        proc = self.start_listening(
            argv, what=f"yaws {self.name}", log=self.dir / "stderr.log", timeout_s=START_TIMEOUT_S
        )
        self.pid = proc.pid

    def error_tail(self) -> str:
        return log_tail(self.dir / "stderr.log", lines=6)


__all__ = ["YawsServer"]
