"""Per-client statistics of the lab's NFS server, like the web servers' access logs.

nfs-ganesha 4.3 publishes its statistics only over D-Bus, on the system bus. The lab gives
each ganesha a bus of its own instead — a dbus-daemon on a Unix socket in ganesha's state
directory (`PrivateBus`) — so nothing depends on the machine's bus or its policy, and two
labs never see each other's server.

`client_stats(address)` asks ganesha (through `busctl`, whose JSON output needs no parsing of
our own) for its clients (`ShowClients`) and each one's NFSv4.0 reads and writes
(`GetNFSv40IO`). ganesha keys clients by IP address, so every mount from one address adds up
in one entry. Counters run from the client's first call; subtract two reads for the traffic
in between. The queries are the monitor agent's (loadfleet.agent.servercounters), which
reads the same counters into runs (`loadfleet-agent --monitor --ganesha-stats ADDRESS`).
"""

from __future__ import annotations

from pathlib import Path

from loadfleet.agent.servercounters import ClientIO, CounterError, ganesha_clients

from .daemon import LabError, Launcher, find_program, log_tail, spawn, stop_pid, wait_for_path

SOCKET_PATH_MAX = 107  # sun_path
QUERY_TIMEOUT_S = 5

# Anyone who can reach the socket (it lies in the lab's state directory) may own names and talk.
_BUS_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"""


# One NFS client's NFSv4.0 I/O as ganesha counted it (cumulative).
ClientStats = ClientIO


class PrivateBus:
    """A dbus-daemon of ganesha's own, listening on `<directory>/bus.sock`; stopped by PID.

    `launcher` (e.g. a `netns.Host`) runs it beside a ganesha started elsewhere, so whatever
    stops that ganesha's processes stops its bus too; the socket is a path in the file system,
    which every network namespace sees."""

    def __init__(self, directory: Path, *, launcher: Launcher | None = None):
        self.dir = Path(directory).resolve()
        self.launcher = launcher
        self.pid: int | None = None

    @property
    def socket(self) -> Path:
        return self.dir / "bus.sock"

    @property
    def address(self) -> str:
        return f"unix:path={self.socket}"

    def start(self) -> None:
        if len(str(self.socket)) > SOCKET_PATH_MAX:
            raise LabError(
                f"the D-Bus socket path {self.socket} is longer than {SOCKET_PATH_MAX} bytes; "
                "use a shorter state directory"
            )
        self.dir.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        conf = self.dir / "bus.conf"
        conf.write_text(_BUS_CONF.format(socket=self.socket))
        log = self.dir / "bus.log"
        proc = (self.launcher.spawn if self.launcher else spawn)(
            [
                find_program("dbus-daemon", "dbus-daemon", extra_dirs=("/usr/bin",)),
                f"--config-file={conf}",
                "--nofork",
                "--nopidfile",
            ],
            log=log,
        )
        self.pid = proc.pid
        wait_for_path(proc, self.socket, what="dbus-daemon", error_tail=lambda: log_tail(log))

    def stop(self) -> None:
        if self.pid is not None:
            stop_pid(self.pid)
            self.pid = None


def client_stats(address: str) -> dict[str, ClientStats]:
    """{client address: its stats} from the ganesha on the bus at `address`."""
    try:
        return ganesha_clients(address, QUERY_TIMEOUT_S)
    except CounterError as exc:
        raise LabError(f"{exc} (bus {address})") from exc


__all__ = ["ClientStats", "PrivateBus", "client_stats"]
