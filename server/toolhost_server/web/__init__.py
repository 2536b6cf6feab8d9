"""The HTTP side of toolhost: one ASGI app (Starlette) served by uvicorn in the gRPC server's event loop.

Today it serves `/metrics` (Prometheus) and its own health endpoints; the REST-compatible endpoints and the MCP
bridge will join the same app.
"""
