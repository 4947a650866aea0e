"""An NFS server for the lab: nfs-ganesha (user space, FSAL_VFS) exporting one directory
read-only over NFSv4 on one loopback address, with its config, pid file, log and recovery
directory under a state directory, and stopped by PID.

No rpcbind, no NLM, no RQUOTA, no UDP: NFSv4 needs only its one TCP port. Clients reach the
export under the pseudo path `/export` (`nfs://HOST/export?version=4.0&nfsport=PORT`).

Each ganesha gets a private D-Bus (`nfsstats.PrivateBus`) for its per-client statistics:
`GaneshaServer.client_stats()`.
"""

from __future__ import annotations

from pathlib import Path

from .daemon import LOCAL, LabError, Launcher, find_program, free_port, host_port, log_tail, stop_pid
from .nfsstats import ClientStats, PrivateBus, client_stats

PSEUDO_PATH = "/export"
START_TIMEOUT_S = 20.0  # ganesha takes a few seconds to bring its NFSv4 side up


def ganesha_program() -> str:
    return find_program("ganesha.nfsd", "nfs-ganesha nfs-ganesha-vfs", extra_dirs=("/usr/bin", "/usr/sbin"))


class GaneshaServer:
    """ganesha.nfsd exporting `export_dir` read-only (NFSv4, TCP, AUTH_SYS, no root squash).

    `host` must be loopback, or with a `launcher` (e.g. a lab network host, `netns.Host`) an
    address that launcher allows; the launcher starts the server and checks that it listens
    (a namespace address is unreachable from the root namespace). `name`: the lab's name for it.
    """

    kind = "nfs"

    def __init__(
        self,
        export_dir: Path,
        state_dir: Path,
        host: str = "127.0.0.1",
        port: int | None = None,
        *,
        launcher: Launcher | None = None,
        name: str = "nfs-server",
    ):
        if launcher is not None and not port:
            raise ValueError("a port is needed to start ganesha through a launcher")
        launcher = launcher or LOCAL
        launcher.check_address(host)  # before anything binds: refused addresses stay untouched
        port = port or free_port(host)
        self.export_dir = Path(export_dir).resolve()
        self.dir = Path(state_dir).resolve()
        self.host, self.port, self.launcher, self.name = host, port, launcher, name
        self.bus = PrivateBus(self.dir, launcher=launcher)
        self.pid: int | None = None

    @property
    def url(self) -> str:
        """The export as nfs-rs (and libnfs) spell it; NFSv4.0 (4.1 showed spurious replay errors)."""
        return f"nfs://{host_port(self.host, self.port)}{PSEUDO_PATH}?version=4.0&nfsport={self.port}"

    @property
    def pids(self) -> list[int]:
        """The bus first: stopping goes in reverse, ganesha first."""
        return [p for p in (self.bus.pid, self.pid) if p]

    @property
    def log(self) -> Path:
        return self.dir / "ganesha.log"

    def config(self) -> str:
        return f"""NFS_CORE_PARAM {{
    Protocols = 4;
    NFS_Port = {self.port};
    Bind_addr = {self.host};
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
}}
NFSV4 {{
    Graceless = true;
    RecoveryBackend = fs;
    RecoveryRoot = {self.dir / "recov"};
    Only_Numeric_Owners = true;
}}
EXPORT {{
    Export_Id = 1;
    Path = {self.export_dir};
    Pseudo = {PSEUDO_PATH};
    Protocols = 4;
    Transports = TCP;
    Access_Type = RO;
    Squash = No_Root_Squash;
    SecType = sys;
    FSAL {{ Name = VFS; }}
}}
LOG {{ Default_Log_Level = EVENT; }}
"""

    def start(self) -> None:
        if not self.export_dir.is_dir():
            raise LabError(f"ganesha: export directory {self.export_dir} does not exist")
        (self.dir / "recov").mkdir(parents=True, exist_ok=True)
        conf = self.dir / "ganesha.conf"
        conf.write_text(self.config())
        self.log.write_text("")
        self.bus.start()
        # ganesha finds its bus as the system bus; `env` execs it, so the PID is ganesha's.
        argv = [
            "env",
            f"DBUS_SYSTEM_BUS_ADDRESS={self.bus.address}",
            ganesha_program(),
            "-F",
            "-f",
            str(conf),
            "-L",
            str(self.log),
            "-p",
            str(self.dir / "ganesha.pid"),
        ]
        what = f"ganesha on {host_port(self.host, self.port)}"
        try:
            proc = self.launcher.start_listening(
                argv,
                self.host,
                self.port,
                what=what,
                error_tail=self.error_tail,
                log=self.dir / "stderr.log",
                timeout_s=START_TIMEOUT_S,
            )
        except BaseException:
            self.bus.stop()
            raise
        self.pid = proc.pid

    def stop(self) -> None:
        """SIGTERM (ganesha shuts down cleanly on it), then its bus; idempotent."""
        if self.pid is not None:
            stop_pid(self.pid)
            self.pid = None
        self.bus.stop()

    def client_stats(self) -> dict[str, ClientStats]:
        """Per-client NFSv4.0 reads and writes, keyed by client address (see nfsstats.py)."""
        return client_stats(self.bus.address)

    def error_tail(self) -> str:
        return log_tail(self.log)

    def __enter__(self) -> GaneshaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["PSEUDO_PATH", "ClientStats", "GaneshaServer", "LabError", "ganesha_program"]
