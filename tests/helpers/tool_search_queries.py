"""The labelled queries SearchTools is measured on (tests/test_tool_search_labelled.py, and the comparison of
ranking candidates in bench/tool_search.py): the AI Tool Catalog's nine chat phrases with variations, each with
the tool and arguments its intent must give, and needs written in words, each with the tools that answer it.

Written from what a user of the seed would type, before the ranking was tuned; a need that two tools answer
alike (read and its alias load) names both. The server they are asked of serves the built-in tools, the
bundled catalog, a workspace and a search root (labelled_config).
"""

from __future__ import annotations

from typing import Any

# (query, tool, arguments): the intent's match must be the first hit, with exactly these arguments.
PATTERN_QUERIES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("ping", "echo", {"text": "pong"}),
    ("Ping", "echo", {"text": "pong"}),
    ("PING!", "echo", {"text": "pong"}),
    ("  ping.  ", "echo", {"text": "pong"}),
    ("please echo this back exactly: hello world", "echo", {"text": "hello world"}),
    ("Please echo this back exactly:   Two\nLines, KEPT", "echo", {"text": "Two\nLines, KEPT"}),
    # Echo's intent comes first in catalog order, so the words after the colon are not another phrase.
    ("please echo this back exactly: check port 22 on db", "echo", {"text": "check port 22 on db"}),
    ("how many windows os assets do we have?", "asset_count", {"os": "windows"}),
    ("How many Ubuntu 22.04 os assets do we have", "asset_count", {"os": "Ubuntu 22.04"}),
    ("show directory of the c drive on ws-042", "windows_list_directory", {"host": "ws-042"}),
    ("Show me the directory listing of the C: drive on ws-042.corp.example.com?", "windows_list_directory",
     {"host": "ws-042.corp.example.com"}),
    ("dns lookup example.com", "dns_lookup", {"domain": "example.com"}),
    ("DNS lookup for example.org?", "dns_lookup", {"domain": "example.org"}),
    ("dns lookup of mail.example.com", "dns_lookup", {"domain": "mail.example.com"}),
    ("check port 5432 on db.example.com", "tcp_port_check", {"port": 5432, "host": "db.example.com"}),
    ("Check port 22 on 10.0.0.5?", "tcp_port_check", {"port": 22, "host": "10.0.0.5"}),
    ("check port 443 on example.com", "tcp_port_check", {"port": 443, "host": "example.com"}),
    ("http check https://example.com", "http_check", {"url": "https://example.com"}),
    ("HTTP check http://127.0.0.1:8080/health?", "http_check", {"url": "http://127.0.0.1:8080/health"}),
    ("http check https://example.com/search?q=x", "http_check", {"url": "https://example.com/search?q=x"}),
    ("traceroute example.com", "traceroute", {"host": "example.com"}),
    ("traceroute to 10.0.0.1", "traceroute", {"host": "10.0.0.1"}),
    ("Traceroute 2001:db8::1", "traceroute", {"host": "2001:db8::1"}),
    ("ping example.com", "shell_ping", {"host": "example.com"}),
    ("ping 10.0.0.1?", "shell_ping", {"host": "10.0.0.1"}),
    ("PING host-1", "shell_ping", {"host": "host-1"}),
)

# (query, tools): no intent matches; one of the tools must be in the first three ranked hits.
FREE_TEXT_QUERIES: tuple[tuple[str, frozenset[str]], ...] = tuple((query, frozenset(tools)) for query, tools in (
    ("is the database port open", {"tcp_port_check"}),
    ("what is the ip of a domain", {"dns_lookup"}),
    ("list files on a windows machine", {"windows_list_directory"}),
    ("is my website up", {"http_check"}),
    ("find where the network path to a server breaks", {"traceroute"}),
    ("is the host reachable", {"shell_ping"}),
    ("resolve a hostname to an address", {"dns_lookup"}),
    ("find the mail servers of a domain", {"dns_lookup"}),
    ("check whether ssh is listening on a server", {"tcp_port_check"}),
    ("get the status code of a url", {"http_check"}),
    ("how much disk space is left", {"disk_free"}),
    ("count the words in a text", {"word_count"}),
    ("say hello to someone by name", {"greet"}),
    ("return my text unchanged", {"echo", "remote_echo"}),
    ("how many machines are in the inventory", {"asset_count"}),
    ("find the assets at the berlin site", {"asset_search"}),
    ("read a file", {"read", "load"}),
    ("write content to a file", {"write"}),
    ("replace a string in a file", {"edit", "search_and_replace"}),
    ("search file contents for a regular expression", {"grep", "search_content"}),
    ("find files by name pattern", {"glob"}),
    ("list a directory in the workspace", {"ls"}),
    ("show the server's recent error logs", {"log_inspector"}),
    ("what version of the server is running", {"application_info"}),
    ("show the effective configuration settings", {"config_access"}),
    ("which tables does the database have", {"database_schema"}),
    ("keep a task list", {"todo"}),
    ("tell the user the task is done", {"attempt_completion"}),
    ("store a record in memory", {"memory_create"}),
    ("run a sql query over memory", {"memory_query"}),
    ("create a new user tool from a bash script", {"tool_create"}),
    ("delete a user tool", {"tool_delete"}),
    ("which grpc methods does this server serve", {"route_inspector"}),
    ("what state are the server's components in", {"component_inspector"}),
    ("which workspaces can the file tools use", {"list_workspaces"}),
    ("trace the route to a host", {"traceroute"}),
    ("measure the round trip time to a host", {"shell_ping"}),
    ("send icmp echo requests", {"shell_ping"}),
    ("look up the TXT records of a domain", {"dns_lookup"}),
    ("is postgres accepting connections on port 5432", {"tcp_port_check"}),
    ("fetch a web page and show its headers", {"http_check"}),
    ("which files changed recently", {"recent_files"}),
    ("find images and documents by kind", {"search_by_kind"}),
    ("get the size and dates of a file", {"get_metadata"}),
    ("show a windows directory listing over winrm", {"windows_list_directory"}),
    ("check port 70000 on db.example.com", {"tcp_port_check"}),  # the intent's match fails the schema
    ("http check example.com", {"http_check"}),  # no scheme: the intent does not match
    ("ping -c 1000 example.com", {"shell_ping"}),  # an option is no host
))

# The share of FREE_TEXT_QUERIES whose tool must be in the top three.
TOP3_TARGET = 0.85
