"""The controller's gRPC server: both services on one port, behind the authorization
interceptor (rpc/auth.py), over TLS unless it serves loopback only (security.py), pinging
its clients and accepting their pings (`SERVER_KEEPALIVE_OPTIONS`), taking no message over
MAX_MESSAGE_BYTES, and refusing a port another process listens on (no SO_REUSEPORT)."""

from __future__ import annotations

import errno
import gc
import socket

import grpc

from loadfleet.controller.model.errors import UsageError
from loadfleet.controller.rpc.agent_service import AgentServicer
from loadfleet.controller.rpc.auth import AuthInterceptor
from loadfleet.controller.rpc.run_service import RunServicer
from loadfleet.controller.service.controller import Controller
from loadfleet.controller.service.security import ServerSecurity, check_listen
from loadfleet.v1 import agent_pb2_grpc, run_pb2_grpc
from loadfleet.wire.aiowake import drain_wakeups
from loadfleet.wire.dial import KEEPALIVE_TIME_MS, KEEPALIVE_TIMEOUT_MS

# Seconds that in-flight RPCs get to finish when the server stops.
SHUTDOWN_GRACE_S = 2.0
# Allocations between collections of the youngest generation (Python's default is 700). A
# controller allocates a few objects per message, thousands of messages a second, and makes
# hardly any reference cycles: at the default, the cyclic collector took ~8 % of its CPU at
# 1,000 agents (bench/fleet).
GC_YOUNG_THRESHOLD = 50_000

# Pings a client sends in a keepalive timeout (one a KEEPALIVE_TIME_MS), and one more.
MAX_PING_STRIKES = KEEPALIVE_TIMEOUT_MS // KEEPALIVE_TIME_MS + 2
# The server pings every client as often as clients ping it (loadfleet.wire.dial): an agent
# or CLI whose host vanished without a FIN or RST has its connection closed within 13 s, so a
# half-open connection holds no session, stream or socket for long.
SERVER_KEEPALIVE_OPTIONS = (
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),  # see loadfleet.wire.dial
    # grpc-core judges the pings it receives (chttp2 ping_abuse_policy.cc): one that comes
    # sooner than this after the previous one, while the server has sent no data, is a
    # strike, and the third strike is answered with GOAWAY "too_many_pings" (default 5 min;
    # 2 hours on a transport without calls unless pings without calls are permitted). A CLI
    # waiting for a run's first interval hears nothing for up to `agents.wait_s`: allow its
    # pings, with half a period of slack for timers and the network.
    ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_TIME_MS // 2),
    ("grpc.keepalive_permit_without_calls", 1),
    # A controller that stalls (a GC pause, a stopped process, a VM migrated) reads the pings its
    # clients sent meanwhile all at once, each a strike: with grpc-core's default of 2 strikes a
    # 6 s stall cut the CLI's watch and every agent's session ("Connection reset by peer").
    # Enough strikes for the pings of a whole keepalive timeout, the longest stall ridden out.
    ("grpc.http2.max_ping_strikes", MAX_PING_STRIKES),
)
# The largest message a client may send, as encoded: gRPC refuses a larger one from its
# length prefix, before it is read whole or decoded, and ends that call (RESOURCE_EXHAUSTED).
# gRPC's default is the same 4 MiB; said here because the agents' messages are sized to it:
# an artifact chunk is 1 MiB of data and a few hundred bytes of names (agent/artifacts.py);
# an interval report is ~2.2 KB a row with its histograms (a thousand-agent fleet's 10-row
# reports are ~22 KB, rpc/inbox.py), and a Gatling simulation's report has at most 1,000 rows
# (run.MAX_UNNAMED_ROWS), ~2.2 MB; a heartbeat is ~200 bytes, a monitor's up to ~60 KB; a
# plan at most 1 MiB (yamlsafe.MAX_DOCUMENT_BYTES).
MAX_MESSAGE_BYTES = 4 * 2**20
SERVER_OPTIONS = (
    *SERVER_KEEPALIVE_OPTIONS,
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # gRPC sets SO_REUSEPORT by default: a second controller on a port in use would start
    # without a word and take a share of the new connections (agents and CLIs).
    ("grpc.so_reuseport", 0),
)
_BIND_TROUBLE = {
    errno.EADDRINUSE: "another process listens on that port",
    errno.EADDRNOTAVAIL: "that address is not one of this host's",
}


class ControllerServer:
    """Serves a Controller on `listen` ("host:port"; port 0 picks a free one). Raises
    UsageError when `security` does not allow serving on that address, or it cannot be
    bound (another process listens on it)."""

    def __init__(self, controller: Controller, listen: str, security: ServerSecurity = ServerSecurity()):
        check_listen(listen, security)
        refuse_taken(listen)
        self.controller = controller
        self.security = security
        self._server = grpc.aio.server(interceptors=[AuthInterceptor(security)], options=SERVER_OPTIONS)
        self._agents = AgentServicer(controller)
        agent_pb2_grpc.add_AgentServiceServicer_to_server(self._agents, self._server)
        run_pb2_grpc.add_RunServiceServicer_to_server(RunServicer(controller), self._server)
        host = listen.rsplit(":", 1)[0]
        credentials = security.server_credentials()
        try:
            self.port = (
                self._server.add_secure_port(listen, credentials)
                if credentials
                else self._server.add_insecure_port(listen)
            )
        except RuntimeError:  # taken since refuse_taken looked (gRPC logs its own line too)
            self.port = 0
        if self.port == 0:
            raise UsageError(f"cannot listen on {listen}: gRPC could not bind it (is another process listening?)")
        self.address = f"{host}:{self.port}"
        self._stopped = False

    async def start(self) -> None:
        await self.controller.start()
        await self._server.start()
        drain_wakeups()  # completions reach Python as fast as the loop turns (wire/aiowake.py)
        gc.freeze()  # what exists now lives as long as the server: never scan it again
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])

    async def wait(self) -> None:
        await self._server.wait_for_termination()

    async def stop(self) -> None:
        """Stops runs, then the server; safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        await self.controller.close()
        await self._server.stop(SHUTDOWN_GRACE_S)
        await self._agents.inbox.close()


def refuse_taken(listen: str) -> None:
    """Raises UsageError, in one line, when another process listens on `listen` ("host:port")
    or its host is not this host's: found by binding a socket as gRPC would (SO_REUSEADDR, no
    SO_REUSEPORT), before gRPC tries (it would log lines of its own). Port 0 is always free;
    other trouble (a name that does not resolve) is left to gRPC to say."""
    host, _, port = listen.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return
    try:
        infos = socket.getaddrinfo(
            host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError:
        return
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno in _BIND_TROUBLE:
                    raise UsageError(f"cannot listen on {listen}: {_BIND_TROUBLE[exc.errno]}") from None
