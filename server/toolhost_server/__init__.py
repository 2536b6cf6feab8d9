"""toolhost server: hosts tools for AI agents behind a gRPC API.

The core (registry, call pipeline, runners, catalog) is plain Python; only `toolhost_server.api` speaks gRPC.
"""

import os

# gRPC's fork handlers crash a child that fork() (rather than vfork) creates while gRPC threads run: about one
# tool in three died of SIGSEGV before exec when the process runner switched users, which forces fork(). The
# server forks only to exec tools, which need nothing of gRPC in the child. gRPC reads this when it loads, so it
# is set here, before any module of the server imports grpc; a program embedding the server must import it
# before grpc, or set the variable itself.
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"

__version__ = "0.1.0"
