"""The `toolhost` command: run the server, talk to a running one, and check catalog files offline.

    toolhost serve                           run the server (flags, TOOLHOST_* and --config)
    toolhost tools list [--category C ...]   the tools, as a table or JSON
    toolhost tools get NAME                  one tool: description, parameters, annotations, examples
    toolhost call NAME key=value ...         run a tool; values are typed by the tool's parameters
    toolhost reload                          make the server read its catalog directories again
    toolhost logs [-f] [--level L ...]       the server's log records, newest last; -f follows them
    toolhost catalog validate DIR...         check catalog YAML files with the server's loader, no server needed
    toolhost check [--catalog-dir DIR ...]   run every tool's examples: at --target, or offline; a table
    toolhost credentials set|list|delete     credentials in the store's database (values from stdin), offline
    toolhost credentials generate-key        a new store key, printed or written to a 0600 file

Exit status: 0 success; 1 the tool failed, the reload failed, a catalog file is bad or the server refused for a
reason that is not the caller's; 2 bad usage (flags, arguments the tool rejects, an unknown tool); 3 the server
cannot be reached.
"""

from ._arguments import coerce_argument
from ._errors import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, UsageError
from ._main import main
from ._output import format_reload
from ._parser import build_parser

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "UsageError",
    "build_parser",
    "coerce_argument",
    "format_reload",
    "main",
]
