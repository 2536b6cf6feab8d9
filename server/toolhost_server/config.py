"""Server configuration: defaults, then an optional YAML file, then TOOLHOST_* variables, then flags.

Each setting is declared once in SETTINGS with its type, environment variable and help; the CLI builds its
flags from the same table, so a setting cannot exist in one place and be missing in another.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pwd
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .store.keys import STORE_KEY_ENV
from .workspaces.workspace import DEFAULT_MAX_FILE_BYTES, WORKSPACE_NAME_PATTERN, Workspace

logger = logging.getLogger("toolhost.config")

BUNDLED_CATALOG = Path(__file__).parent / "catalog" / "examples"
# Never indexed nor walked by the search index: version control, dependencies, and files that hold secrets.
DEFAULT_SEARCH_EXCLUDE = (".git", "node_modules", ".env*", "*.pem", "*.key", "id_*", ".ssh/", ".aws/", ".netrc",
                          "*.kdbx")


# The tools seed 004 says every registry must hold; Reload names those missing.
SEED_REQUIRED_TOOLS = ("asset_count", "asset_search", "windows_list_directory")


class ConfigError(Exception):
    """A setting is invalid; the message names where it came from and what is allowed."""


@dataclass(frozen=True)
class Config:
    grpc_address: str = "127.0.0.1:50051"
    # Prometheus /metrics and HTTP health; seed 004's port. Empty: no HTTP listener.
    http_address: str = "127.0.0.1:8010"
    # Host headers the HTTP routes except health and /metrics answer (web/guard_rules.py). Empty: the bound address,
    # localhost, 127.0.0.1 and [::1], each with the bound port.
    http_allowed_hosts: tuple[str, ...] = ()
    # Origin headers the HTTP routes answer (exact scheme://host[:port]). Empty: none, so no web page.
    http_allowed_origins: tuple[str, ...] = ()
    unix_socket: str = ""
    catalog_dirs: tuple[str, ...] = ()
    required_tools: tuple[str, ...] = SEED_REQUIRED_TOOLS
    watch_catalog: bool = True
    watch_debounce_ms: int = 300
    max_call_seconds: float = 300.0
    max_in_flight_calls: int = 256
    sync_tool_threads: int = 32
    kill_grace_seconds: float = 2.0
    # Empty: "nobody" when the server runs as root, else the server's own user (which cannot switch).
    process_user: str = ""
    # Serve user tools even where they would run as the server's own user (a non-root server, or process_user
    # root): they could then read the server's credentials and database (user_tools/identity.py).
    user_tools_as_server_user: bool = False
    # Empty: the server's own cgroup when it may make cgroups there; "off": none (see runners.process_cgroup).
    process_cgroup_parent: str = ""
    max_output_bytes: int = 1024 * 1024
    max_message_bytes: int = 16 * 1024 * 1024
    pipeline_target: str = ""
    max_hops: int = 8
    shutdown_delay_seconds: float = 0.0
    shutdown_grace_seconds: float = 10.0
    # 0: connections live as long as clients keep them. Set it behind a headless Service so that round_robin
    # clients reconnect now and then and spread over replicas added since.
    max_connection_age_seconds: float = 0.0
    log_level: str = "INFO"
    # Empty: text when stderr is a terminal, else json (see logs.formatting.default_log_format).
    log_format: str = ""
    log_memory_records: int = 10_000
    # The ring's second bound: records are small, but a record may carry up to its fields' limits.
    log_memory_bytes: int = 64 * 1024 * 1024
    log_files: tuple[str, ...] = ()
    # Empty: the server's own text format (logs.line_parser.DEFAULT_LINE_PATTERN).
    log_file_pattern: str = ""
    log_database: bool = False
    redact_keys: tuple[str, ...] = ()
    # Empty: $XDG_DATA_HOME/toolhost, or ~/.local/share/toolhost (see effective_data_dir).
    data_dir: str = ""
    # Empty: the SQLite file toolhost.db in the data dir.
    database_url: str = ""
    credentials_dir: str = ""
    store_key_file: str = ""
    audit_database: bool = True
    # Per table (audit_records, logs): the records kept in memory while the database is down (batching.py).
    store_buffer_bytes: int = 32 * 1024 * 1024
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_client_ca_file: str = ""
    auth_file: str = ""
    # Empty: no token; /metrics is then open to whoever reaches the HTTP listener.
    metrics_token_file: str = ""
    # Empty: toolhost_server.tools and the modules of the installed tool packs (see catalog.entrypoints).
    python_entrypoint_modules: tuple[str, ...] = ()
    trusted_unix_socket: bool = False
    # Serve a non-loopback address without TLS and authentication (a proxy or mesh in front provides them).
    insecure: bool = False
    # Empty: the file tools are not served. The first is the tools' default workspace.
    workspaces: tuple[Workspace, ...] = ()
    # Empty: the file search tools are not served.
    search_roots: tuple[str, ...] = ()
    search_exclude: tuple[str, ...] = DEFAULT_SEARCH_EXCLUDE
    search_index_max_text_bytes: int = 1024 * 1024
    search_rescan_seconds: float = 300.0
    # Databases the introspection tools read (database_schema), as (name, URL) pairs sorted by name. "store" is
    # reserved: it names toolhost's own store (database_url).
    databases: tuple[tuple[str, str], ...] = ()
    # Where windows_list_directory may send each credential: (credential name, CIDR networks and host globs)
    # pairs sorted by name (windows/credential_hosts.py). A credential with no entry is sent nowhere.
    winrm_credential_hosts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # PEM CA certificates that WinRM over HTTPS trusts; empty: the system's trust store.
    winrm_ca_file: str = ""

    def process_identity(self) -> tuple[int, int] | None:
        """The (uid, gid) process tools run as, or None for the server's own user.

        Only root can switch users, and a root server should not hand root to every tool: it drops to
        `process_user` (nobody by default). Tools marked `run_as_server_user: true` by the operator keep root.
        """
        if os.geteuid() != 0:
            return None
        name = self.process_user or "nobody"
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
        return None if entry.pw_uid == 0 else (entry.pw_uid, entry.pw_gid)

    def effective_catalog_dirs(self) -> tuple[Path, ...]:
        if self.catalog_dirs:
            return tuple(Path(d) for d in self.catalog_dirs)
        return (BUNDLED_CATALOG,)

    def effective_data_dir(self) -> Path:
        """Where the server keeps its own data; created (0700) by what first writes there, not here."""
        if self.data_dir:
            return Path(self.data_dir)
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        return Path(base) / "toolhost"


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    help: str
    parse: Callable[[Any], Any]
    env: str = ""
    # The value may hold a secret (a password in a URL): never echoed in an error, shown redacted.
    secret: bool = False
    # An empty environment variable sets the empty value instead of leaving the default: for a list whose default
    # is not empty, so that an operator can ask for none.
    empty_is_a_value: bool = False

    @property
    def env_var(self) -> str:
        return self.env or f"TOOLHOST_{self.name.upper()}"

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def is_switch(self) -> bool:
        """A true/false setting, whose flag alone means true (`--insecure`)."""
        return self.parse is _bool


def _address(value: Any) -> str:
    text = str(value).strip()
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("must be host:port, for example 127.0.0.1:50051 (port 0 picks a free port)")
    return text


def _optional_address(value: Any) -> str:
    return "" if not str(value).strip() else _address(value)


def _positive(kind: Callable[[Any], float]) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        number = kind(value)
        if number <= 0:
            raise ValueError("must be greater than 0")
        return number
    return parse


def _non_negative_float(value: Any) -> float:
    number = float(value)
    if number < 0:
        raise ValueError("must not be negative")
    return number


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def _list(separator: str) -> Callable[[Any], tuple[str, ...]]:
    def parse(value: Any) -> tuple[str, ...]:
        if value is None:  # a key with nothing after it in the config file (YAML null): no items
            return ()
        items = value if isinstance(value, (list, tuple)) else str(value).split(separator)
        return tuple(str(item).strip() for item in items if str(item).strip())
    return parse


def _user(value: Any) -> str:
    name = str(value).strip()
    if name:
        try:
            pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
        except KeyError:
            raise ValueError(f"names no user of this system ({name!r})") from None
    return name


def _path(value: Any) -> str:
    text = str(value).strip()
    return os.path.expanduser(text) if text else ""


def _log_format(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in ("", "json", "text"):
        raise ValueError("must be json or text")
    return text


def _line_pattern(value: Any) -> str:
    text = str(value)
    if text:
        # Imported here: the log package is only needed when a pattern is set.
        from .logs.line_parser import compile_line_pattern

        compile_line_pattern(text)
    return text


_WORKSPACE_KEYS = ("name", "path", "read_only", "allow_bash", "max_file_bytes", "owner", "bash_as_server_user")


def _workspaces(value: Any) -> tuple[Workspace, ...]:
    """A list of mappings (config file), or `name=path` entries: colon-separated (environment) or one per
    flag. Each directory must exist now: a typo should stop the server, not confine the tools to a new empty
    directory."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(":")
    workspaces: list[Workspace] = []
    for item in items:
        if isinstance(item, str) and not item.strip():
            continue
        workspace = _workspace(item)
        if any(w.name == workspace.name for w in workspaces):
            raise ValueError(f"has two workspaces named {workspace.name!r}; names must be unique")
        workspaces.append(workspace)
    return tuple(workspaces)


def _workspace(item: Any) -> Workspace:
    if isinstance(item, str):
        name, sep, path = item.strip().partition("=")
        if not sep:
            raise ValueError(f"entry {item!r} must be name=path, for example project=/srv/project")
        fields: dict[str, Any] = {"name": name.strip(), "path": path}
    elif isinstance(item, dict):
        unknown = sorted(str(key) for key in item if key not in _WORKSPACE_KEYS)
        if unknown:
            raise ValueError(f"entry {item!r} has unknown keys {', '.join(unknown)}; known: "
                             f"{', '.join(_WORKSPACE_KEYS)}")
        if "name" not in item or "path" not in item:
            raise ValueError(f"entry {item!r} needs a name and a path")
        fields = dict(item)
    else:
        raise ValueError(f"entry {item!r} must be a mapping with name and path (or a name=path string)")
    name = str(fields["name"])
    if not WORKSPACE_NAME_PATTERN.fullmatch(name):
        raise ValueError(f"name {name!r} must be 1 to 64 letters, digits, '_' or '-'")
    path = _path(fields["path"])
    if not os.path.isabs(path):
        raise ValueError(f"{name!r}: path {path!r} must be absolute (or start with ~)")
    if not os.path.isdir(path):
        raise ValueError(f"{name!r}: path {path!r} is not an existing directory; create it first")
    try:
        owner = _user(fields.get("owner", ""))
        return Workspace(
            name=name, path=os.path.normpath(path),
            read_only=_bool(fields.get("read_only", False)),
            allow_bash=_bool(fields.get("allow_bash", False)),
            max_file_bytes=_positive(int)(fields.get("max_file_bytes", DEFAULT_MAX_FILE_BYTES)),
            owner=owner,
            bash_as_server_user=_bool(fields.get("bash_as_server_user", False)),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name!r}: {exc}") from None


def _search_roots(value: Any) -> tuple[str, ...]:
    """Existing absolute directories (colon-separated in the environment), none inside another: a typo should
    stop the server, and a file must belong to one root."""
    roots: list[str] = []
    for item in _list(":")(value):
        path = _path(item)
        if not os.path.isabs(path):
            raise ValueError(f"{path!r} must be an absolute directory (or start with ~)")
        if not os.path.isdir(path):
            raise ValueError(f"{path!r} is not an existing directory; create it first")
        path = os.path.normpath(path)
        for other in roots:
            if _inside(path, other) or _inside(other, path):
                raise ValueError(f"{path!r} and {other!r} overlap; give only the outer directory")
        roots.append(path)
    return tuple(roots)


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


DATABASE_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
# "store" names toolhost's own store (database_url) wherever databases are listed.
RESERVED_DATABASE_NAMES = ("store",)
DATABASE_VARIABLE = "TOOLHOST_DATABASE_<NAME>_URL"
_DATABASE_VARIABLE_PATTERN = re.compile(r"TOOLHOST_DATABASE_(?P<name>.+)_URL")
_DATABASE_URL_FORMS = "sqlite:///PATH or postgresql://USER:PASSWORD@HOST:PORT/DATABASE"


def _databases(value: Any) -> tuple[tuple[str, str], ...]:
    """A mapping of name to URL (config file), or `name=URL` entries (one per flag), as (name, URL) pairs sorted
    by name. Each URL is checked now: a typo should stop the server, not show up later as a failed connection.
    Messages never hold a URL: it may hold a password."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        entries = [(str(name), url) for name, url in value.items()]
    else:
        items = value if isinstance(value, (list, tuple)) else [value]
        entries = [_database_entry(item) for item in items]
    databases: dict[str, str] = {}
    for name, url in entries:
        if not DATABASE_NAME_PATTERN.fullmatch(name):
            raise ValueError(f"name {name!r} must be a lowercase letter then up to 63 lowercase letters, digits "
                             "or '_'")
        if name in RESERVED_DATABASE_NAMES:
            raise ValueError(f"name {name!r} is reserved for toolhost's own store (database_url); pick another")
        if name in databases:
            raise ValueError(f"names the database {name!r} twice; names must be unique")
        databases[name] = _database_url(name, url)
    return tuple(sorted(databases.items()))


def _database_entry(item: Any) -> tuple[str, Any]:
    name, sep, url = str(item).partition("=")
    if not sep:
        raise ValueError("entries must be NAME=URL, for example analytics=postgresql://USER@HOST/DB")
    return name.strip(), url


def _database_url(name: str, raw: Any) -> str:
    """`raw` if it is a SQLAlchemy URL of SQLite or of PostgreSQL through psycopg 3 (the drivers toolhost
    ships), as database_url."""
    text = raw.strip() if isinstance(raw, str) else ""
    if not text:
        raise ValueError(f"{name!r}: the URL is empty; write {_DATABASE_URL_FORMS}")
    # Imported here: SQLAlchemy takes a while to import, and most servers name no database.
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(text)
    except (ArgumentError, ValueError):
        raise ValueError(f"{name!r}: not a database URL; write {_DATABASE_URL_FORMS}") from None
    backend, _, driver = url.drivername.partition("+")
    if backend not in ("sqlite", "postgresql", "postgres"):
        raise ValueError(f"{name!r}: {backend} databases are not supported; write {_DATABASE_URL_FORMS}")
    if driver not in ("", "pysqlite" if backend == "sqlite" else "psycopg"):
        raise ValueError(f"{name!r}: the driver {driver!r} is not installed; toolhost ships psycopg 3 and "
                         f"sqlite3: write {backend}://... without a driver")
    return text


def _winrm_credential_hosts(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    # Imported here: the windows package is only needed when the setting is given.
    from .windows.credential_hosts import parse_setting

    return parse_setting(value)


def _allowed_hosts(value: Any) -> tuple[str, ...]:
    # Imported here: web.guard_rules reads Config's defaults.
    from .web.guard_rules import parse_allowed_hosts

    return parse_allowed_hosts(_list(",")(value))


def _allowed_origins(value: Any) -> tuple[str, ...]:
    from .web.guard_rules import parse_allowed_origins

    return parse_allowed_origins(_list(",")(value))


def _existing_file(value: Any) -> str:
    path = _path(value)
    if path and not os.path.isfile(path):
        raise ValueError(f"{path!r} is not an existing file")
    return path


def _log_level(value: Any) -> str:
    level = str(value).upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
    return level


SETTINGS: tuple[Setting, ...] = (
    Setting("grpc_address", "TCP address of the gRPC server (host:port)", _address),
    Setting("http_address", "HTTP address of /metrics, /healthz and /readyz (host:port; empty: no HTTP listener)",
            _optional_address, empty_is_a_value=True),
    Setting("http_allowed_hosts", "Host headers the HTTP routes other than /healthz, /readyz and /metrics (when "
            "it needs a metrics token or client certificate) answer "
            "(comma-separated; others get 403, against DNS rebinding): host:port exactly, host alone for the "
            "scheme's default port, host:* for any port, or '*' alone for any Host (no protection); default: the "
            "bound address, localhost, 127.0.0.1 and [::1] with the bound port", _allowed_hosts),
    Setting("http_allowed_origins", "Origin headers the HTTP routes other than /healthz, /readyz and /metrics "
            "(when it needs a metrics token or client certificate) answer, as scheme://host[:port] "
            "(comma-separated; 'null' is never allowed); default none: a request from a web page gets 403",
            _allowed_origins),
    Setting("unix_socket", "also listen on this unix socket path", str),
    Setting("catalog_dirs", "catalog directory (repeatable; colon-separated in the environment); the bundled "
            "example catalog is used when none is given", _list(":")),
    Setting("required_tools", "tools that must exist (comma-separated; default: seed 004's asset_count, "
            "asset_search, windows_list_directory; empty: none); Reload reports missing ones and they are logged at "
            "ERROR", _list(","), empty_is_a_value=True),
    Setting("watch_catalog", "reload when catalog files change", _bool),
    Setting("watch_debounce_ms", "wait this long for file changes to settle before reloading", _positive(int)),
    Setting("max_call_seconds", "upper bound of any call, whatever the tool's timeout", _positive(float)),
    Setting("max_in_flight_calls", "calls that may run at once; one more is refused with RESOURCE_EXHAUSTED",
            _positive(int)),
    Setting("sync_tool_threads", "threads for blocking Python tools; a call finding none free is RESOURCE_EXHAUSTED",
            _positive(int)),
    Setting("kill_grace_seconds", "time between SIGTERM and SIGKILL for a process tool that must stop",
            _non_negative_float),
    Setting("process_user", "user that process and script tools run as when the server runs as root "
            "(default nobody; 'root' keeps root)", _user),
    Setting("user_tools_as_server_user", "serve user tools even where their scripts would run as the server's own "
            "user (a server not running as root, or process_user root), which lets anyone with manage_tools read "
            "the server's credentials and database", _bool),
    Setting("process_cgroup_parent", "cgroup2 directory in which each process call gets a cgroup of its own, "
            "killed whole when the call ends; empty: the server's own cgroup when the server may make cgroups "
            "there; off: none (a call's processes are then found through /proc)", str),
    Setting("max_output_bytes", "bytes of stdout and of stderr kept per call", _positive(int)),
    Setting("max_message_bytes", "largest gRPC message received or sent, and largest HTTP request body",
            _positive(int)),
    Setting("pipeline_target", "toolhost address that runs `source: pipeline` tools", str),
    Setting("max_hops", "how many toolhosts a call may be forwarded through", _positive(int)),
    Setting("shutdown_delay_seconds", "on SIGTERM, keep serving this long with health NOT_SERVING",
            _non_negative_float),
    Setting("shutdown_grace_seconds", "then give in-flight calls this long to finish", _non_negative_float),
    Setting("max_connection_age_seconds", "close client connections after this long (0: never), so that "
            "round_robin clients rebalance over new replicas; calls in flight get the shutdown grace to finish",
            _non_negative_float),
    Setting("log_level", "DEBUG, INFO, WARNING or ERROR", _log_level),
    Setting("log_format", "json (one object per line, for collectors) or text (for a person); default text when "
            "stderr is a terminal, else json", _log_format),
    Setting("log_memory_records", "how many of its own recent log records the server keeps in memory for the log "
            "inspector", _positive(int)),
    Setting("log_memory_bytes", "upper bound, in bytes, of the records the server keeps in memory (the oldest go "
            "first when either bound is reached)", _positive(int)),
    Setting("log_files", "log files the inspector reads, paths or globs (repeatable; colon-separated in the "
            "environment)", _list(":")),
    Setting("log_file_pattern", "regular expression for text lines of log_files, with named groups time and "
            "message (and level, logger, trace_id, span_id; others become fields); default: the server's text "
            "format. JSON lines need none", _line_pattern),
    Setting("log_database", "also write the server's log records to the store's logs table (batched, off the "
            "logging thread), and let the inspector read that table", _bool),
    Setting("redact_keys", "more field names whose values are secrets (comma-separated), besides the built-in "
            "password/secret/token/api_key... rule", _list(",")),
    Setting("data_dir", "directory of the server's own data, such as the SQLite database (default "
            "$XDG_DATA_HOME/toolhost or ~/.local/share/toolhost; created 0700 when first needed)", _path),
    Setting("database_url", "the store's database: empty for the SQLite file toolhost.db in data_dir, or "
            "postgresql://USER:PASSWORD@HOST:PORT/DB (set it in the environment or config file: flags show in ps)",
            str, secret=True),
    Setting("databases", "databases the introspection tools read, as NAME=URL (repeatable; in the config file a "
            "mapping of name to URL; in the environment one TOOLHOST_DATABASE_<NAME>_URL per database): "
            f"{_DATABASE_URL_FORMS}; names are lowercase letters, digits and '_', 'store' is toolhost's own. A "
            "URL with a password belongs in the environment or config file: flags show in ps",
            _databases, env=DATABASE_VARIABLE, secret=True),
    Setting("winrm_credential_hosts", "where windows_list_directory may send each credential: CIDR networks "
            "(any address in them) and host globs (the addresses DNS gives for a matching hostname; '*' within one "
            "label), as NAME=ENTRY,ENTRY;NAME=ENTRY (in the config file a mapping of credential name to a list); "
            "a credential with no entry is sent nowhere", _winrm_credential_hosts),
    Setting("winrm_ca_file", "PEM CA certificates WinRM over HTTPS trusts (default: the system's)", _existing_file),
    Setting("credentials_dir", "directory of <name>.<key> credential files, such as a mounted Kubernetes Secret",
            _path),
    Setting("store_key_file", "file holding the base64 key that encrypts values in the database (or give the key "
            "itself in TOOLHOST_STORE_KEY)", _path),
    Setting("audit_database", "also write each call's audit record to the store's database (batched, off the call "
            "path); the log gets it either way", _bool),
    Setting("store_buffer_bytes", "upper bound, in bytes, of the records waiting for each of the store's tables "
            "(audit_records, logs) while the database is slow or down; they are written once it is back, and "
            "beyond the bound the oldest are dropped, logged and counted in toolhost_store_records_dropped_total",
            _positive(int)),
    Setting("tls_cert_file", "PEM certificate chain to serve gRPC over TLS (read again when it changes)", str),
    Setting("tls_key_file", "PEM private key of tls_cert_file", str),
    Setting("tls_client_ca_file", "PEM CA certificates; TCP clients must then present a certificate they signed "
            "(mTLS)", str),
    Setting("auth_file", "YAML file of roles, token hashes and certificate entries (read again when it changes)",
            str),
    Setting("metrics_token_file", "file holding the bearer token /metrics requires (read again when it changes); "
            "empty: /metrics needs no token", _path),
    Setting("python_entrypoint_modules", "module prefixes whose functions and Tool classes catalog files may name as "
            "Python entrypoints (comma-separated); default toolhost_server.tools and the installed tool packs",
            _list(",")),
    Setting("trusted_unix_socket", "callers on unix_socket are admin without credentials (sidecar mode)", _bool),
    Setting("insecure", "allow a non-loopback grpc_address or http_address without TLS and authentication", _bool),
    Setting("workspaces", "directories the file tools may use, as name=path (repeatable; colon-separated in the "
            "environment; in the config file a list of {name, path, read_only, allow_bash, max_file_bytes, "
            "owner, bash_as_server_user}); the first is the default; none: no file tools", _workspaces),
    Setting("search_roots", "directories the file search tools (search, get_metadata, search_by_kind, "
            "recent_files) index and answer about (colon-separated; a list in the config file); each an "
            "existing absolute directory, none inside another; none: no file search tools", _search_roots),
    Setting("search_exclude", "names the search index never walks nor holds, as fnmatch patterns on one name "
            "(comma-separated; a trailing / matches directories only); default .git, node_modules, .env*, *.pem, "
            "*.key, id_*, .ssh/, .aws/, .netrc, *.kdbx", _list(",")),
    Setting("search_index_max_text_bytes", "bytes of each text file's content the search index holds (redacted); "
            "the rest of a larger file is not searchable", _positive(int)),
    Setting("search_rescan_seconds", "walk every search root again this often, besides following changes with "
            "inotify (what the watcher missed, or everything when inotify's watches ran out)", _positive(float)),
)
_BY_NAME = {s.name: s for s in SETTINGS}


DEFAULT_SOURCE = "default"
# A Config a program built itself (tests, an embedding): no flag, variable or file to name.
PROGRAM_SOURCE = "program"
STORE_KEY_SOURCE_KEY = "store_key"

# (key, parsed value, source): the key is a setting's name, or databases.NAME for one database.
_Entry = tuple[str, Any, str]


@dataclass(frozen=True)
class ConfigSources:
    """Where each setting's value came from: "flag --NAME", "environment VARIABLE", "config file PATH",
    "program" or "default". A database's source is under "databases.NAME"; "store_key" says whether
    TOOLHOST_STORE_KEY was set (its value is kept nowhere here)."""

    by_key: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def of(self, key: str) -> str:
        if key == "databases" and key not in self.by_key:
            found = sorted({source for name, source in self.by_key.items() if name.startswith("databases.")})
            return "; ".join(found) or DEFAULT_SOURCE
        return self.by_key.get(key, DEFAULT_SOURCE)

    @classmethod
    def of_program(cls, config: Config) -> ConfigSources:
        """For a Config built by a program rather than loaded: "program" for each setting it changed."""
        default = Config()
        by_key = {s.name: PROGRAM_SOURCE for s in SETTINGS
                  if s.name != "databases" and getattr(config, s.name) != getattr(default, s.name)}
        by_key.update({f"databases.{name}": PROGRAM_SOURCE for name, _ in config.databases})
        return cls(by_key)


def load_config(
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_file: str | None = None,
) -> Config:
    """The Config from every source, validated. `flags` holds only the flags the user gave."""
    return load_config_with_sources(flags, environ, config_file)[0]


def load_config_with_sources(
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_file: str | None = None,
) -> tuple[Config, ConfigSources]:
    """load_config, and where each value came from. Later sources win: the file, the environment, the flags;
    the databases per name, so that one variable overrides one database of the file and keeps the others."""
    environ = os.environ if environ is None else environ
    entries: list[_Entry] = []
    config_file = config_file or environ.get("TOOLHOST_CONFIG") or None
    if config_file:
        entries += _from_file(Path(config_file))
    entries += _from_environment(environ)
    for name, raw in (flags or {}).items():
        setting = _BY_NAME[name]
        flag = "--database" if name == "databases" else setting.flag
        entries += _entries(setting, _parse(setting, raw, f"flag {flag}"), f"flag {flag}")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    databases: dict[str, str] = {}
    for key, value, source in entries:
        setting_name, _, database = key.partition(".")
        if database:
            databases[database] = value
        else:
            values[setting_name] = value
        sources[key] = source
    if databases:
        values["databases"] = tuple(sorted(databases.items()))
    if environ.get(STORE_KEY_ENV):
        sources[STORE_KEY_SOURCE_KEY] = f"environment {STORE_KEY_ENV}"
    return dataclasses.replace(Config(), **values), ConfigSources(sources)


def _entries(setting: Setting, value: Any, source: str) -> list[_Entry]:
    if setting.name == "databases":
        return [(f"databases.{name}", url, source) for name, url in value]
    return [(setting.name, value, source)]


def _from_file(path: Path) -> list[_Entry]:
    try:
        data = yaml.safe_load(path.read_text("utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must be a mapping of setting names to values")
    entries = []
    for key, raw in data.items():
        setting = _BY_NAME.get(str(key))
        if setting is None:
            raise ConfigError(f"config file {path}: unknown setting {key!r}; known: {', '.join(sorted(_BY_NAME))}")
        entries += _entries(setting, _parse(setting, raw, f"{path}: {key}"), f"config file {path}")
    return entries


def _from_environment(environ: Mapping[str, str]) -> list[_Entry]:
    entries: list[_Entry] = []
    for setting in SETTINGS:
        if setting.name == "databases":  # one variable per database, below
            continue
        raw = environ.get(setting.env_var)
        if raw is not None and (raw != "" or setting.empty_is_a_value):
            entries += _entries(setting, _parse(setting, raw, setting.env_var), f"environment {setting.env_var}")
    seed_dirs = environ.get("AI_TOOL_CATALOG_DIRS")
    if seed_dirs:
        if any(key == "catalog_dirs" for key, _, _ in entries):
            logger.warning("both TOOLHOST_CATALOG_DIRS and AI_TOOL_CATALOG_DIRS are set; using TOOLHOST_CATALOG_DIRS")
        else:
            entries += _entries(_BY_NAME["catalog_dirs"], _parse(_BY_NAME["catalog_dirs"], seed_dirs,
                                                                 "AI_TOOL_CATALOG_DIRS"),
                                "environment AI_TOOL_CATALOG_DIRS")
    for variable in sorted(environ):
        # TOOLHOST_DATABASE_URL itself is database_url: the pattern needs a name between the two parts.
        found = _DATABASE_VARIABLE_PATTERN.fullmatch(variable)
        if found and environ[variable] != "":
            value = {found["name"].lower(): environ[variable]}
            entries += _entries(_BY_NAME["databases"], _parse(_BY_NAME["databases"], value, variable),
                                f"environment {variable}")
    return entries


def _parse(setting: Setting, raw: Any, where: str) -> Any:
    try:
        return setting.parse(raw)
    except (TypeError, ValueError) as exc:
        shown = "" if setting.secret else f"={raw!r}"
        raise ConfigError(f"{where}{shown}: {setting.name} {exc}") from None
