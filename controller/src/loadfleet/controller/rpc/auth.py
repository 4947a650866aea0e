"""Authorization of every call, in one place: who the caller is (`security.Principal`) and
whether its role may call the method.

`METHOD_ROLES` is the whole policy. A method missing from it is refused to everyone (deny
by default: a new RPC is callable once it is added here). An agent may only open its
session, and only under its own name (the Hello's agent_id must be its certificate's
common name or its token's name); an operator may start, stop, watch and list. A LOCAL
controller (loopback or --insecure, no authentication) lets every caller do everything.

The interceptor also turns a controller error escaping a servicer into its status
(rpc/status.py), so that e.g. a second session for a live agent id (`AgentIdInUse`) ends
as ALREADY_EXISTS rather than as an unknown error.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from loadfleet.controller.model.errors import AccessDenied, LoadfleetError, Unauthenticated
from loadfleet.controller.rpc.status import abort
from loadfleet.controller.service.security import (
    LOCAL_CALLER,
    ROLE_URI_PREFIX,
    AuthMode,
    Principal,
    Role,
    ServerSecurity,
)
from loadfleet.v1 import agent_pb2

log = logging.getLogger(__name__)

CONNECT = "/loadfleet.v1.AgentService/Connect"
_RUN = "/loadfleet.v1.RunService/"
METHOD_ROLES: dict[str, Role] = {
    CONNECT: Role.AGENT,
    _RUN + "StartRun": Role.OPERATOR,
    _RUN + "StopRun": Role.OPERATOR,
    _RUN + "WatchRun": Role.OPERATOR,
    _RUN + "ListRuns": Role.OPERATOR,
    _RUN + "ListAgents": Role.OPERATOR,
}
# Calls that change something are logged with who made them.
_AUDITED = {_RUN + "StartRun", _RUN + "StopRun"}


def authenticate(context: grpc.aio.ServicerContext, security: ServerSecurity) -> Principal:
    """The caller, from its verified certificate or its token; raises Unauthenticated/AccessDenied."""
    if security.mode is AuthMode.LOCAL:
        return LOCAL_CALLER
    if security.mode is AuthMode.CERTIFICATES:
        return _certificate_holder(context.auth_context())
    header = dict(context.invocation_metadata() or ()).get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("this controller needs a token: give --token-file (or $LOADFLEET_TOKEN_FILE)")
    principal = security.tokens.lookup(token.strip()) if security.tokens else None
    if principal is None:
        raise Unauthenticated("the token is not one of this controller's")
    return principal


def _certificate_holder(auth: dict[str, Any]) -> Principal:
    """grpc has verified the chain against --tls-ca; the name is the common name, the role
    the one `loadfleet:role:` URI among the subject alternative names."""
    names = auth.get("x509_common_name") or []
    uris = [u.decode(errors="replace") for u in auth.get("peer_uri") or []]
    roles = [u.removeprefix(ROLE_URI_PREFIX) for u in uris if u.startswith(ROLE_URI_PREFIX)]
    if len(names) != 1 or not names[0]:
        raise Unauthenticated("the client certificate has no common name (its holder's name)")
    name = names[0].decode(errors="replace")
    known = {r.value for r in Role}
    if len(roles) != 1 or roles[0] not in known:
        raise AccessDenied(
            f"the certificate of {name!r} carries no loadfleet role (a URI SAN "
            f"{ROLE_URI_PREFIX}agent or {ROLE_URI_PREFIX}operator; `loadfleet certs` makes such)"
        )
    return Principal(Role(roles[0]), name)


def authorize(principal: Principal, method: str) -> None:
    needed = METHOD_ROLES.get(method)
    if needed is None:
        raise AccessDenied(f"{method} is not open to anyone")
    if principal.role is not None and principal.role is not needed:
        raise AccessDenied(
            f"{principal.describe()} may not call {method.rsplit('/', 1)[-1]} (it is for {needed.value}s)"
        )


# A method's behaviour (a request, or the stream of them, and its context): one answer, or a stream.
UnaryBehaviour = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
StreamingBehaviour = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc has no type information here
    def __init__(self, security: ServerSecurity):
        self._security = security

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None:
            return None
        return _Guard(self._security, details.method).wrap(handler)


class _Guard:
    """Wraps one method's handler: admit the caller first, map our errors to statuses after."""

    def __init__(self, security: ServerSecurity, method: str):
        self._security = security
        self._method = method

    def wrap(self, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        codec = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(self._unary(handler.unary_unary), **codec)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(self._streaming(handler.unary_stream), **codec)
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(self._unary(handler.stream_unary), **codec)
        return grpc.stream_stream_rpc_method_handler(self._streaming(handler.stream_stream), **codec)

    async def _admit(self, context: grpc.aio.ServicerContext) -> Principal:
        try:
            principal = authenticate(context, self._security)
            authorize(principal, self._method)
        except LoadfleetError as exc:
            log.warning("refused %s from %s: %s", self._method, context.peer(), exc)
            await abort(context, exc)
        if self._method in _AUDITED:
            log.info("%s (%s) calls %s", principal.describe(), context.peer(), self._method)
        return principal

    async def _refuse(self, context: grpc.aio.ServicerContext, principal: Principal, error: LoadfleetError) -> None:
        log.warning("%s from %s (%s): %s", self._method, principal.describe(), context.peer(), error)
        await abort(context, error)

    def _unary(self, behaviour: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]) -> UnaryBehaviour:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            principal = await self._admit(context)
            try:
                return await behaviour(self._requests(request, principal), context)
            except LoadfleetError as exc:
                await self._refuse(context, principal, exc)

        return call

    def _streaming(
        self, behaviour: Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]
    ) -> StreamingBehaviour:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            principal = await self._admit(context)
            try:
                async for response in behaviour(self._requests(request, principal), context):
                    yield response
            except LoadfleetError as exc:
                await self._refuse(context, principal, exc)

        return call

    def _requests(self, request: Any, principal: Principal) -> Any:
        """The agent session's messages, its Hello checked against the caller's name."""
        if self._method != CONNECT or principal.role is None:
            return request
        return _own_name_only(request, principal)


async def _own_name_only(
    requests: AsyncIterator[agent_pb2.AgentMessage], principal: Principal
) -> AsyncIterator[agent_pb2.AgentMessage]:
    first = True
    async for message in requests:
        if first:
            first = False
            agent_id = message.hello.agent_id if message.HasField("hello") else ""
            if agent_id != principal.name:
                raise AccessDenied(
                    f"{principal.describe()} may open an agent session only as {principal.name!r}, "
                    f"not as {agent_id!r} (start it with --id {principal.name}, or without --id)"
                )
        yield message
