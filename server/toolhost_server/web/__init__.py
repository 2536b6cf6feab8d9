"""The HTTP side of toolhost: one ASGI app (Starlette) served by uvicorn in the gRPC server's event loop.

Today it serves `/metrics` (Prometheus) and its own health endpoints, over TLS when the server has a certificate
(tls), `/metrics` behind the bearer token of `metrics_token_file` when one is set (metrics_token); the
REST-compatible endpoints and the MCP bridge will join the same app.
"""
