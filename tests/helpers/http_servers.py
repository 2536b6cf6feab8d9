"""An HTTP server on 127.0.0.1 (a free port) answering from a thread, for the tools that call out over HTTP."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving_http(handler: type[BaseHTTPRequestHandler],
                 tls: ssl.SSLContext | None = None) -> Iterator[ThreadingHTTPServer]:
    """A server answering with `handler` (over TLS with `tls`) until the block ends; its port is
    `server.server_address[1]`."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
