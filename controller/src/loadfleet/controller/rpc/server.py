"""The controller's gRPC server: both services on one port, behind the authorization
interceptor (rpc/auth.py), over TLS unless it serves loopback only (security.py)."""
from __future__ import annotations

import gc

import grpc

from loadfleet.v1 import agent_pb2_grpc, run_pb2_grpc

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


class ControllerServer:
    """Serves a Controller on `listen` ("host:port"; port 0 picks a free one). Raises
    UsageError when `security` does not allow serving on that address."""

    def __init__(self, controller: Controller, listen: str, security: ServerSecurity = ServerSecurity()):
        check_listen(listen, security)
        self.controller = controller
        self.security = security
        self._server = grpc.aio.server(interceptors=[AuthInterceptor(security)])
        agent_pb2_grpc.add_AgentServiceServicer_to_server(AgentServicer(controller), self._server)
        run_pb2_grpc.add_RunServiceServicer_to_server(RunServicer(controller), self._server)
        host = listen.rsplit(":", 1)[0]
        credentials = security.server_credentials()
        self.port = (self._server.add_secure_port(listen, credentials) if credentials
                     else self._server.add_insecure_port(listen))
        if self.port == 0:
            raise OSError(f"cannot listen on {listen}")
        self.address = f"{host}:{self.port}"
        self._stopped = False

    async def start(self) -> None:
        await self.controller.start()
        await self._server.start()
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
