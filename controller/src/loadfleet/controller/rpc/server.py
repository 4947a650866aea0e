"""The controller's gRPC server: both services on one port, behind the authorization
interceptor (rpc/auth.py), over TLS unless it serves loopback only (security.py), pinging
its clients and accepting their pings (`SERVER_KEEPALIVE_OPTIONS`)."""

from __future__ import annotations

import gc

import grpc

from loadfleet.v1 import agent_pb2_grpc, run_pb2_grpc
from loadfleet.wire.aiowake import drain_wakeups
from loadfleet.wire.dial import KEEPALIVE_TIME_MS, KEEPALIVE_TIMEOUT_MS

from ..core import Controller
from ..security import ServerSecurity, check_listen
from .agent_service import AgentServicer
from .auth import AuthInterceptor
from .run_service import RunServicer

# Seconds that in-flight RPCs get to finish when the server stops.
SHUTDOWN_GRACE_S = 2.0
# Allocations between collections of the youngest generation (Python's default is 700). A
# controller allocates a few objects per message, thousands of messages a second, and makes
# hardly any reference cycles: at the default, the cyclic collector took ~8 % of its CPU at
# 1,000 agents (bench/fleet).
GC_YOUNG_THRESHOLD = 50_000

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
)


class ControllerServer:
    """Serves a Controller on `listen` ("host:port"; port 0 picks a free one). Raises
    UsageError when `security` does not allow serving on that address."""

    def __init__(self, controller: Controller, listen: str, security: ServerSecurity = ServerSecurity()):
        check_listen(listen, security)
        self.controller = controller
        self.security = security
        self._server = grpc.aio.server(interceptors=[AuthInterceptor(security)], options=SERVER_KEEPALIVE_OPTIONS)
        self._agents = AgentServicer(controller)
        agent_pb2_grpc.add_AgentServiceServicer_to_server(self._agents, self._server)
        run_pb2_grpc.add_RunServiceServicer_to_server(RunServicer(controller), self._server)
        host = listen.rsplit(":", 1)[0]
        credentials = security.server_credentials()
        self.port = (
            self._server.add_secure_port(listen, credentials) if credentials else self._server.add_insecure_port(listen)
        )
        if self.port == 0:
            raise OSError(f"cannot listen on {listen}")
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
