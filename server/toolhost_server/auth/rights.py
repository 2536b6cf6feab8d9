"""The rights an RPC or an HTTP route requires, as each servicer method and route declares it (api/rights.py,
web/app.py) and route_inspector reports it.

- none: anyone who reaches the listener (health, reflection, /healthz, /readyz; /metrics without a token).
- authenticated: any caller the server accepts; which tools it then sees and calls follows its roles' grants.
- metrics_token: the bearer token of metrics_token_file (HTTP /metrics only).
- manage_tools: the admin role or a role with `manage_tools: true` (user tools, tool conflicts).
- manage_assets: the admin role or a role with `manage_assets: true` (the asset inventory).
- admin: the admin role.

Without an auth file every caller is accepted with every right: the declarations then say what the server would
require with one.
"""

from __future__ import annotations

from enum import StrEnum


class Right(StrEnum):
    NONE = "none"
    AUTHENTICATED = "authenticated"
    METRICS_TOKEN = "metrics_token"
    MANAGE_TOOLS = "manage_tools"
    MANAGE_ASSETS = "manage_assets"
    ADMIN = "admin"
