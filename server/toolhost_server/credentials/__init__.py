"""Credentials the server resolves for tools: named bundles of key -> value strings, never sent to clients.

A tool declares the names it needs (`credentials: [winrm]`); before it runs, the resolver finds each name in
the environment (TOOLHOST_CRED_<NAME>_<KEY>), then the credentials directory (`<dir>/<name>.<key>`, e.g. a
Kubernetes Secret), then the database (encrypted, set with `toolhost credentials set`):

    resolver = CredentialResolver.from_config(config)
    creds = await resolver.resolve(spec.credentials)   # MissingCredentialsError (errors.py) names what is missing
    creds["winrm"]["password"]; creds.values(); creds.env()

Modules: `names` (what names, keys and values may be), `base` (the CredentialSource contract), `environment`,
`directory`, `database` (the sources), `resolved` (what a call gets), `resolver`.
"""

from __future__ import annotations

from .base import Availability, CredentialSource, CredentialSourceError
from .database import DatabaseCredentialSource
from .directory import DirectoryCredentialSource
from .environment import ENV_PREFIX, EnvironmentCredentialSource, environment_variable
from .names import (
    InvalidCredentialError,
    check_credential_key,
    check_credential_name,
    check_credential_value,
    is_credential_key,
    is_credential_name,
    process_env_name,
)
from .resolved import NO_CREDENTIALS, Credential, ResolvedCredentials
from .resolver import CredentialResolver

__all__ = [
    "ENV_PREFIX",
    "NO_CREDENTIALS",
    "Availability",
    "Credential",
    "CredentialResolver",
    "CredentialSource",
    "CredentialSourceError",
    "DatabaseCredentialSource",
    "DirectoryCredentialSource",
    "EnvironmentCredentialSource",
    "InvalidCredentialError",
    "ResolvedCredentials",
    "check_credential_key",
    "check_credential_name",
    "check_credential_value",
    "environment_variable",
    "is_credential_key",
    "is_credential_name",
    "process_env_name",
]
