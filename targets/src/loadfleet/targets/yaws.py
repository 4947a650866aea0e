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

    def __init__(self, host: str, port: int, docroot: Path, state_dir: Path, name: str, *, launcher: Launcher = LOCAL):
        super().__init__(host, port, state_dir, name, launcher=launcher)
        self.docroot = Path(docroot).resolve()

    @property
    def access_log(self) -> Path:
        """Yaws names it after the virtual server: `<server name>:<port>.access`."""
        return self.dir / "logs" / f"{self.name}:{self.port}.access"

    def config(self) -> str:
        # nodelay: Yaws writes headers and body separately; with Nagle on, the body waits for
        # the client's delayed ACK (measured: ~40 ms per request, 180 req/s with 8 clients).
        return f"""logdir = {self.dir / "logs"}
keepalive_timeout = 65000
<server {self.name}>
    port = {self.port}
    listen = {self.host}
    docroot = {self.docroot}
    access_log = true
    <listen_opts>
        nodelay = true
    </listen_opts>
</server>
"""

    def start(self) -> None:
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        conf = self.dir / "yaws.conf"
        conf.write_text(self.config())
        self.access_log.write_text("")
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
