"""toolhost server: hosts tools for AI agents behind a gRPC API.

The core (registry, call pipeline, runners, catalog) is plain Python; only `toolhost_server.api` speaks gRPC.
"""

__version__ = "0.1.0"
