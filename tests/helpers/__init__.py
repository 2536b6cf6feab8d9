"""What the tests share, one concern per module; test modules import from here, never from each other.

- `paths`: where the repository, the tests and the pinned developer tools are.
- `waiting`: waiting for events with a hang guard (`within`, `until`, `eventually`).
- `servers`: a server started in-process (`RunningServer`) or as a `toolhost serve` child (`ServerProcess`).
- `calls`: CallTool in one line (`call`); `status`: the error details of a refused call.
- `catalogs`: catalog files written for a test; `gates`: a python tool that answers when the test says.
- `processes`: the processes a tool left behind, and zombies; `cli`: the `toolhost` command as a child.
- `auth`: bearer tokens and the auth file that grants them roles; `certificates`: a throwaway CA made by openssl.
- `http_servers`: an HTTP server on 127.0.0.1 in a thread, for the tools that call out.
- `otlp`: an OTLP trace receiver standing in for a collector; `sinks`: what a response, log or database holds,
  as text to search.
- `json_strategies`: Hypothesis strategies of odd JSON values and texts, for the fuzz suites (tests/fuzz).
- `todos`: the todo tool called over gRPC, two callers with tokens of their own, a server's store settings.

The tests directory is on sys.path (pytest puts it there; subprocess servers get it through PYTHONPATH, see
`servers.ServerProcess`), so this package is `helpers` and a catalog entrypoint may name `helpers.gates:...`.
"""
