"""Runs a toolhost process: start, serve, and on SIGTERM/SIGINT drain and exit 0.

This module is the one owner of signal handling. The drain order matters to load balancers and clients:
health turns NOT_SERVING at once; the server keeps serving for `shutdown_delay_seconds` so that probes and
endpoints notice; then watch streams end, new calls are refused and in-flight calls get
`shutdown_grace_seconds` to finish before they are cancelled, and the process exits only once the cancelled
calls have stopped their processes.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging
import os
import signal
import sys

from .api.server import GrpcServer, create_toolhost
from .app import Toolhost
from .auth import AuthFileError, UnsafeExposureError, check_exposure
from .catalog.entrypoints import EntrypointSettingError
from .config import Config, ConfigSources
from .event_waits import wait_set
from .logs.buffered_stream import BufferedStreamHandler
from .logs.captured_output import OutputCapture
from .logs.formatting import make_formatter
from .logs.memory import MemoryRingHandler
from .mcp.http_endpoint import McpHttpEndpoint
from .sanitize import LearningRedactor, RedactingLogFilter, Redactor
from .store.errors import StoreSchemaError
from .telemetry import TracingConfigError
from .web.rest import RestApi
from .web.server import HttpServer, create_http_server

logger = logging.getLogger("toolhost")

_PR_SET_DUMPABLE = 4


def configure_logging(
    level: str, redactor: Redactor | LearningRedactor | None = None, log_format: str = ""
) -> None:
    """Log to stderr as JSON lines or text (`log_format`; "" picks by whether stderr is a terminal); every
    record passes the redactor first, so a secret that reaches a log line (a tool's own logger, an exception
    message) is replaced before it is formatted."""
    root = logging.getLogger()
    # Every handler but the log inspector's ring is replaced (closing a stderr handler writes what it holds).
    for old in [handler for handler in root.handlers if not isinstance(handler, MemoryRingHandler)]:
        root.removeHandler(old)
        old.close()
    root.setLevel(level)
    handler = BufferedStreamHandler(sys.stderr)
    handler.addFilter(RedactingLogFilter(redactor or Redactor()))
    handler.setFormatter(make_formatter(log_format))
    root.addHandler(handler)


def harden_process() -> None:
    """Keep tools from reading the server's memory and environment through /proc/<server pid>/.

    Child processes run as the server's user; a non-dumpable process's /proc files belong to root, so a
    tool running as the same (non-root) user cannot read the server's secrets there. Tools running as root
    still can; only another user or a container separates those.
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        logger.warning("prctl(PR_SET_DUMPABLE, 0) failed: %s", os.strerror(ctypes.get_errno()))


async def serve(config: Config, config_sources: ConfigSources | None = None) -> int:
    """Serve until a signal asks to stop; return the exit status. `config_sources` says where each setting came
    from (load_config_with_sources), for config_access."""
    harden_process()
    try:
        # Before anything listens: a server must never be reachable, even briefly, without the protection
        # its address needs.
        check_exposure(config)
        toolhost = create_toolhost(config, config_sources)
    except (UnsafeExposureError, AuthFileError, TracingConfigError, EntrypointSettingError) as exc:
        logger.error("cannot start: %s", exc)
        return 1
    configure_logging(config.log_level, toolhost.redactor, config.log_format)
    # From here on, what code in the process prints, warns or raises in a thread is logged (so redacted), not
    # written raw to stdout or stderr.
    capture = OutputCapture.install()
    try:
        return await _serve_configured(config, toolhost)
    finally:
        capture.uninstall()


async def _serve_configured(config: Config, toolhost: Toolhost) -> int:
    """serve() once logging is set up: load the catalog, listen, and drain when a signal asks to stop."""
    try:
        report = await toolhost.start()
    except StoreSchemaError as exc:
        logger.error("cannot start: %s", exc)
        await toolhost.close()
        return 1
    if not report.success:
        # Without a catalog there is nothing sensible to serve; failing fast shows the reason in the
        # orchestrator (a missing ConfigMap mount, a typo in TOOLHOST_CATALOG_DIRS).
        for problem in report.problems:
            logger.error("cannot start: %s: %s", problem.file, problem.reason)
        await toolhost.close()
        return 1
    # The imports and the catalog's first generation stay until the process ends or a reload replaces them,
    # and a replaced generation is freed by reference counting alone (tests/test_catalog_files.py). Frozen,
    # they are left out of every later full collection, which otherwise walks all of them with the GIL held:
    # ~250 ms for a 10,000-tool catalog, landing on about one reload in ten (bench/findings/catalog_scale.md).
    gc.freeze()
    server = GrpcServer(toolhost)
    try:
        port = await server.start()
    except OSError as exc:
        logger.error("cannot start: %s", exc)
        await toolhost.close()
        return 1
    host = config.grpc_address.rpartition(":")[0]
    logger.info("toolhost serving gRPC on %s:%d%s", host, port,
                f" and unix:{config.unix_socket}" if config.unix_socket else "")
    http = None
    mcp = None
    rest = RestApi(toolhost)
    if config.http_address:
        try:
            mcp = McpHttpEndpoint(toolhost)
            http = create_http_server(config, toolhost.metrics, lambda: toolhost.pipeline.accepting,
                                      toolhost.surface, routes=[mcp.route, *rest.routes], services=[mcp.running()])
            http_port = await http.start()
        except OSError as exc:
            logger.error("cannot start: %s", exc)
            await server.stop(0)
            await toolhost.close()
            return 1
        logger.info("toolhost serving HTTP (/mcp, /ai/tools, /openapi.json, /metrics, /healthz, /readyz) on %s:%d%s",
                    config.http_address.rpartition(":")[0], http_port, http.protection)

    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    force_stop = asyncio.Event()

    def on_signal(signum: int) -> None:
        if stop_requested.is_set():
            logger.warning("second %s: stopping now", signal.Signals(signum).name)
            force_stop.set()
        stop_requested.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)

    await stop_requested.wait()
    logger.info("shutting down: health is NOT_SERVING; serving %.1fs more before draining",
                config.shutdown_delay_seconds)
    await server.set_not_serving()
    await wait_set(force_stop, config.shutdown_delay_seconds)
    toolhost.pipeline.stop_accepting()
    toolhost.registry.close()
    toolhost.logs.stop_following()
    grace = 0.0 if force_stop.is_set() else config.shutdown_grace_seconds
    logger.info("refusing new calls; waiting up to %.1fs for calls in flight", grace)
    await _drain(server, toolhost, grace, force_stop)
    if mcp is not None:
        mcp.calls.stop_all()  # MCP calls still running after the grace are cancelled, as gRPC's just were
    rest.stop_calls()  # and REST's
    # Calls cancelled at the end of the grace are still stopping their processes; let them finish.
    if not await toolhost.pipeline.wait_idle(config.kill_grace_seconds + 5):
        logger.warning("%d calls were still stopping when the server exited", toolhost.pipeline.in_flight)
    if http is not None:
        await _stop_http(http, force_stop)
    await toolhost.close()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(signum)
    logger.info("stopped")
    return 0


async def _drain(server: GrpcServer, toolhost: Toolhost, grace: float, force_stop: asyncio.Event) -> None:
    """Give the calls in flight on every surface up to `grace` seconds to finish, then cancel gRPC's (the
    caller cancels the others'). A second signal (`force_stop`) ends the grace at once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    stopping = asyncio.ensure_future(server.stop(grace))
    forced = asyncio.ensure_future(force_stop.wait())
    try:
        await asyncio.wait({stopping, forced}, return_when=asyncio.FIRST_COMPLETED)
        if not stopping.done():
            await server.stop(0)  # a second signal during the grace: cancel the calls still running now
        await stopping
        if force_stop.is_set():
            return
        # gRPC's stop returns once no RPC is left, at once when only /mcp or REST calls run: the pipeline
        # counts the calls of every surface, and they get what is left of the same grace.
        left = max(0.0, deadline - loop.time())
        if toolhost.pipeline.in_flight:
            logger.info("gRPC drained; waiting up to %.1fs more for %d calls over HTTP (/mcp, REST)", left,
                        toolhost.pipeline.in_flight)
        idle = asyncio.ensure_future(toolhost.pipeline.wait_idle(left))
        await asyncio.wait({idle, forced}, return_when=asyncio.FIRST_COMPLETED)
        idle.cancel()
    finally:
        forced.cancel()


async def _stop_http(http: HttpServer, force_stop: asyncio.Event) -> None:
    """Stop the HTTP listener, which waits a while for open requests; a second signal stops it at once."""
    stopping = asyncio.ensure_future(http.stop())
    forced = asyncio.ensure_future(force_stop.wait())
    await asyncio.wait({stopping, forced}, return_when=asyncio.FIRST_COMPLETED)
    forced.cancel()
    if not stopping.done():
        http.exit_now()
    await stopping
