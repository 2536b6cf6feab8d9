"""Runs a toolhost process: start, serve, and on SIGTERM/SIGINT drain and exit 0.

This module is the one owner of signal handling. The drain order matters to load balancers and clients:
health turns NOT_SERVING at once; the server keeps serving for `shutdown_delay_seconds` so that probes and
endpoints notice; then watch streams end, new calls are refused and in-flight calls get
`shutdown_grace_seconds` to finish before they are cancelled, and the process exits only once the cancelled
calls have stopped their processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

from .api.server import GrpcServer, create_toolhost
from .config import Config

logger = logging.getLogger("toolhost")


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)


async def serve(config: Config) -> int:
    """Serve until a signal asks to stop; return the exit status."""
    toolhost = create_toolhost(config)
    await toolhost.start()
    server = GrpcServer(toolhost)
    port = await server.start()
    host = config.grpc_address.rpartition(":")[0]
    logger.info("toolhost serving gRPC on %s:%d%s", host, port,
                f" and unix:{config.unix_socket}" if config.unix_socket else "")

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
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(force_stop.wait(), config.shutdown_delay_seconds)
    toolhost.pipeline.stop_accepting()
    toolhost.registry.close()
    grace = 0.0 if force_stop.is_set() else config.shutdown_grace_seconds
    logger.info("refusing new calls; waiting up to %.1fs for calls in flight", grace)
    await server.stop(grace)
    # Calls cancelled at the end of the grace are still stopping their processes; let them finish.
    if not await toolhost.pipeline.wait_idle(config.kill_grace_seconds + 5):
        logger.warning("%d calls were still stopping when the server exited", toolhost.pipeline.in_flight)
    await toolhost.close()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(signum)
    logger.info("stopped")
    return 0
