"""What this server serves, recorded as it binds and registers it: its addresses, its gRPC methods with the right
each requires, and its HTTP routes. api/server.py and web/ fill it; the introspection tools read it.

    surface = ServingSurface()
    surface.add_address("grpc", "127.0.0.1:50051", tls=False)      # the bound port, not the configured 0
    surface.add_grpc_method("toolhost.v1.ToolService", "Reload", False, False, "admin")
    surface.set_http_routes([HttpRoute("/metrics", ("GET", "HEAD"), "none")])
    surface.addresses(), surface.grpc_methods(), surface.http_routes()

Nothing here is typed by hand: the method names and streaming kinds are the handlers the gRPC server was given,
the request and response types come from the protobuf descriptor pool, and the routes from the ASGI app.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from google.protobuf import descriptor_pool

from ..auth.rights import Right

AddressKind = Literal["grpc", "unix", "http"]
Streaming = Literal["unary", "server", "client", "bidi"]

# The rights a method or route may require, weakest first (auth.rights says what each one means).
RIGHTS = tuple(right.value for right in Right)


@dataclass(frozen=True, slots=True)
class ServedAddress:
    """A listener: `address` is what a client dials ("host:port" for grpc and http, "unix:PATH" for the
    socket)."""

    kind: AddressKind
    address: str
    tls: bool


@dataclass(frozen=True, slots=True)
class GrpcMethod:
    """One registered RPC. The types are full protobuf names; "" when the descriptor pool does not know the
    service (a service registered without its generated descriptors)."""

    service: str
    method: str
    full_name: str
    request_type: str
    response_type: str
    streaming: Streaming
    required_right: str


@dataclass(frozen=True, slots=True)
class HttpRoute:
    """One route of the HTTP app: its path (with the prefixes of the mounts above it) and methods, sorted."""

    path: str
    methods: tuple[str, ...]
    required_right: str


def streaming_kind(request_streaming: bool, response_streaming: bool) -> Streaming:
    if request_streaming:
        return "bidi" if response_streaming else "client"
    return "server" if response_streaming else "unary"


class ServingSurface:
    """The live record of one server's listeners, RPCs and routes. Written from the event loop as the server
    starts, read by tools in worker threads: a lock keeps each read whole."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._addresses: dict[tuple[str, str], ServedAddress] = {}
        self._methods: dict[str, GrpcMethod] = {}
        self._routes: tuple[HttpRoute, ...] = ()
        self._http_app = False
        # Whether callers must present credentials; without, every caller has every right.
        self.authentication_required = False

    def add_address(self, kind: AddressKind, address: str, tls: bool) -> None:
        with self._lock:
            self._addresses[(kind, address)] = ServedAddress(kind, address, tls)

    def add_grpc_method(self, service: str, method: str, request_streaming: bool, response_streaming: bool,
                        required_right: str) -> GrpcMethod:
        """Record a handler as it is handed to the gRPC server; a service registered again replaces its
        methods' entries."""
        if required_right not in RIGHTS:
            raise ValueError(f"{service}/{method}: required right {required_right!r} is not one of {RIGHTS}")
        request_type, response_type = _message_types(service, method)
        entry = GrpcMethod(service=service, method=method, full_name=f"{service}/{method}",
                           request_type=request_type, response_type=response_type,
                           streaming=streaming_kind(request_streaming, response_streaming),
                           required_right=required_right)
        with self._lock:
            self._methods[entry.full_name] = entry
        return entry

    def set_http_routes(self, routes: Iterable[HttpRoute]) -> None:
        """The route table of the HTTP app this server serves (read from the app when it is created)."""
        with self._lock:
            self._routes = tuple(sorted(routes, key=lambda route: route.path))
            self._http_app = True

    @property
    def serves_http(self) -> bool:
        """Whether an HTTP app was recorded (http_address set)."""
        return self._http_app

    def addresses(self) -> list[ServedAddress]:
        with self._lock:
            return sorted(self._addresses.values(), key=lambda a: (a.kind, a.address))

    def grpc_methods(self) -> list[GrpcMethod]:
        with self._lock:
            return sorted(self._methods.values(), key=lambda m: (m.service, m.method))

    def http_routes(self) -> list[HttpRoute]:
        with self._lock:
            return list(self._routes)


def _message_types(service: str, method: str) -> tuple[str, str]:
    try:
        found = descriptor_pool.Default().FindServiceByName(service).FindMethodByName(method)
    except KeyError:
        return "", ""
    if found is None:
        return "", ""
    return found.input_type.full_name, found.output_type.full_name
