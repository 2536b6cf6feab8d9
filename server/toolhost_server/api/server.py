"""Builds the grpc.aio server: ToolService, LogService, UserToolService, AssetService, health (overall and per
service) and reflection; TLS on TCP when configured (the unix socket stays plaintext: its file permissions guard
it)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from toolhost.v1 import (
    asset_service_pb2_grpc,
    log_service_pb2_grpc,
    tool_service_pb2_grpc,
    user_tool_service_pb2_grpc,
)

from ..app import Toolhost
from ..auth.rights import Right
from ..config import Config, ConfigSources
from ..introspection.surface import ServingSurface
from .asset_service import ASSET_SERVICE_NAME, AssetService
from .log_service import LOG_SERVICE_NAME, LogService
from .remote_client import GrpcRemoteCaller
from .rights import declared_right
from .rpc_observer import ObservedRegistration, RpcObserver
from .tls import server_credentials
from .tool_service import SERVICE_NAME, ToolService
from .user_tool_service import USER_TOOL_SERVICE_NAME, UserToolService

logger = logging.getLogger("toolhost.api")


def _bind(
    server: grpc.aio.Server, address: str, setting: str, credentials: grpc.ServerCredentials | None = None
) -> int:
    """Listen on `address` (over TLS with `credentials`); OSError naming the setting when that is impossible
    (grpc raises RuntimeError)."""
    try:
        if credentials is not None:
            port = int(server.add_secure_port(address, credentials))
        else:
            port = int(server.add_insecure_port(address))
    except RuntimeError:
        port = 0
    if port == 0 and not address.endswith(":0"):
        raise OSError(f"cannot listen on {address} (in use, or not an address of this host); change {setting}")
    return port


def own_target(address: str, port: int) -> str:
    """Where this server reaches its own listener on `address`, bound to `port`: a wildcard host (every
    interface) is reached on loopback."""
    host = address.rpartition(":")[0]
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "[::]": "[::1]"}.get(host, host)
    return f"{host}:{port}"


class _RecordingServer:
    """Stands in for the server (or an ObservedRegistration) in a generated `add_XServicer_to_server`: records
    each method handler on the surface, with the right `right_of(method)` gives, as it passes it on. Recorded
    from the handlers themselves, so the surface lists what is served, not what was meant to be."""

    def __init__(self, target: Any, surface: ServingSurface, right_of: Callable[[str], Right]) -> None:
        self._target = target
        self._surface = surface
        self._right_of = right_of

    def add_generic_rpc_handlers(self, generic_handlers: Any) -> None:
        self._target.add_generic_rpc_handlers(generic_handlers)

    def add_registered_method_handlers(self, service: str, handlers: Mapping[str, grpc.RpcMethodHandler]) -> None:
        # Every right first: a method without a declaration stops the start before anything is registered.
        rights = {name: self._right_of(name) for name in handlers}
        for name, handler in handlers.items():
            self._surface.add_grpc_method(service, name, bool(handler.request_streaming),
                                          bool(handler.response_streaming), rights[name].value)
        self._target.add_registered_method_handlers(service, handlers)


def _recorded(add_to_server: Callable[[Any, Any], None], surface: ServingSurface,
              right_of: Callable[[str], Right]) -> Callable[[Any, Any], None]:
    """`add_to_server`, registering through a _RecordingServer in front of the server it is given."""
    @functools.wraps(add_to_server)
    def add(servicer: Any, server: Any) -> None:
        add_to_server(servicer, _RecordingServer(server, surface, right_of))
    return add


def create_toolhost(config: Config, config_sources: ConfigSources | None = None) -> Toolhost:
    """A Toolhost whose remote runner forwards over gRPC."""
    return Toolhost(config, remote_caller=GrpcRemoteCaller(), config_sources=config_sources)


class GrpcServer:
    """The gRPC listener(s) of one Toolhost. `start()` returns the bound TCP port (useful with port 0)."""

    def __init__(self, toolhost: Toolhost) -> None:
        self.toolhost = toolhost
        config = toolhost.config
        options = [
            ("grpc.max_receive_message_length", config.max_message_bytes),
            ("grpc.max_send_message_length", config.max_message_bytes),
            ("grpc.so_reuseport", 0),
        ]
        if config.max_connection_age_seconds > 0:
            # GOAWAY after this age; clients reconnect and their round_robin picks up replicas added since.
            options += [
                ("grpc.max_connection_age_ms", int(config.max_connection_age_seconds * 1000)),
                ("grpc.max_connection_age_grace_ms", int(config.shutdown_grace_seconds * 1000)),
            ]
        # Metrics for every RPC; a span too when tracing is on.
        tracer = toolhost.tracing.tracer if toolhost.tracing.enabled else None
        self.server = grpc.aio.server(options=options)
        surface = toolhost.surface
        surface.authentication_required = toolhost.authenticator.required
        observed = ObservedRegistration(self.server, RpcObserver(tracer, toolhost.metrics))
        for add_to_server, servicer in (
            (tool_service_pb2_grpc.add_ToolServiceServicer_to_server, ToolService(toolhost)),
            (log_service_pb2_grpc.add_LogServiceServicer_to_server, LogService(toolhost)),
            (user_tool_service_pb2_grpc.add_UserToolServiceServicer_to_server, UserToolService(toolhost)),
            (asset_service_pb2_grpc.add_AssetServiceServicer_to_server, AssetService(toolhost)),
        ):
            observed.add(_recorded(add_to_server, surface, functools.partial(declared_right, servicer)), servicer)
        # grpc's own services read no credentials: open to anyone who reaches the listener.
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(
            self.health, _RecordingServer(self.server, surface, lambda method: Right.NONE))
        # What reflection.enable_server_reflection does for a grpc.aio.Server, which it tells by the server's
        # type: the recording stand-in would get it the synchronous servicer.
        reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
            reflection.aio.ReflectionServicer(
                (SERVICE_NAME, LOG_SERVICE_NAME, USER_TOOL_SERVICE_NAME, ASSET_SERVICE_NAME, health.SERVICE_NAME,
                 reflection.SERVICE_NAME)),
            _RecordingServer(self.server, surface, lambda method: Right.NONE))
        self.port = 0

    async def start(self) -> int:
        config = self.toolhost.config
        credentials = server_credentials(config)
        self.port = _bind(self.server, config.grpc_address, "grpc_address", credentials)
        surface = self.toolhost.surface
        surface.add_address("grpc", f"{config.grpc_address.rpartition(':')[0]}:{self.port}", credentials is not None)
        caller = self.toolhost.runner_settings.remote_caller
        if isinstance(caller, GrpcRemoteCaller):
            caller.serve_self_at(own_target(config.grpc_address, self.port))
        if config.unix_socket:
            _bind(self.server, f"unix:{config.unix_socket}", "unix_socket")
            surface.add_address("unix", f"unix:{config.unix_socket}", False)
        await self.server.start()
        for service in ("", SERVICE_NAME, LOG_SERVICE_NAME, USER_TOOL_SERVICE_NAME, ASSET_SERVICE_NAME):
            await self.health.set(service, health_pb2.HealthCheckResponse.SERVING)
        return self.port

    async def set_not_serving(self) -> None:
        """Tell health checkers to route away; the server keeps answering meanwhile."""
        await self.health.enter_graceful_shutdown()

    async def stop(self, grace: float) -> None:
        await self.server.stop(grace)
        caller = self.toolhost.runner_settings.remote_caller
        if isinstance(caller, GrpcRemoteCaller):
            await caller.close()
