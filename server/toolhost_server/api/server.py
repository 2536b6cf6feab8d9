"""Builds the grpc.aio server: ToolService, LogService, UserToolService, health (overall and per service) and
reflection; TLS on TCP when configured (the unix socket stays plaintext: its file permissions guard it)."""

from __future__ import annotations

import logging

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from toolhost.v1 import log_service_pb2_grpc, tool_service_pb2_grpc, user_tool_service_pb2_grpc

from ..app import Toolhost
from ..config import Config
from .log_service import LOG_SERVICE_NAME, LogService
from .remote_client import GrpcRemoteCaller
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


def create_toolhost(config: Config) -> Toolhost:
    """A Toolhost whose remote runner forwards over gRPC."""
    return Toolhost(config, remote_caller=GrpcRemoteCaller())


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
        observed = ObservedRegistration(self.server, RpcObserver(tracer, toolhost.metrics))
        observed.add(tool_service_pb2_grpc.add_ToolServiceServicer_to_server, ToolService(toolhost))
        observed.add(log_service_pb2_grpc.add_LogServiceServicer_to_server, LogService(toolhost))
        observed.add(user_tool_service_pb2_grpc.add_UserToolServiceServicer_to_server, UserToolService(toolhost))
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable_server_reflection(
            (SERVICE_NAME, LOG_SERVICE_NAME, USER_TOOL_SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME),
            self.server)
        self.port = 0

    async def start(self) -> int:
        config = self.toolhost.config
        self.port = _bind(self.server, config.grpc_address, "grpc_address", server_credentials(config))
        caller = self.toolhost.runner_settings.remote_caller
        if isinstance(caller, GrpcRemoteCaller):
            caller.serve_self_at(own_target(config.grpc_address, self.port))
        if config.unix_socket:
            _bind(self.server, f"unix:{config.unix_socket}", "unix_socket")
        await self.server.start()
        for service in ("", SERVICE_NAME, LOG_SERVICE_NAME, USER_TOOL_SERVICE_NAME):
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
