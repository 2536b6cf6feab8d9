"""The CredentialResolver: the credentials one tool declares, from the configured sources in a fixed order.

Order: the environment, then the credentials directory, then the database. The first source that holds a name
supplies every key of that credential (keys are never mixed from two sources). A source that fails for a name
(an unreadable file, an unreachable database, a value too short to redact) ends the search for that name:
falling through to a later source could hand the tool another value than the operator meant. A source that
is not available (no credentials_dir, no store key) is skipped, and the reason is told when a name is missing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..config import Config
from ..errors import MissingCredentialsError
from .base import Availability, CredentialSource, CredentialSourceError
from .database import DatabaseCredentialSource
from .directory import DirectoryCredentialSource
from .environment import EnvironmentCredentialSource
from .names import InvalidCredentialError, check_credential_key, check_credential_name, check_credential_value
from .resolved import NO_CREDENTIALS, Credential, ResolvedCredentials

logger = logging.getLogger("toolhost.credentials")


class CredentialResolver:
    """Resolves declared credential names to values, or says which ones it cannot and why.

        resolver = CredentialResolver.from_config(config)     # StoreKeyError: a store key is set but unusable
        creds = await resolver.resolve(spec.credentials)      # MissingCredentialsError naming each missing one
        call_redactor = redactor.with_values(creds.values())
        ...
        resolver.close()
    """

    def __init__(self, sources: Sequence[CredentialSource]) -> None:
        self.sources = tuple(sources)

    @classmethod
    def from_config(cls, config: Config, environ: Mapping[str, str] | None = None) -> CredentialResolver:
        sources: list[CredentialSource] = [EnvironmentCredentialSource(environ)]
        if config.credentials_dir:
            sources.append(DirectoryCredentialSource(Path(config.credentials_dir)))
        sources.append(DatabaseCredentialSource.from_config(config, environ))
        return cls(sources)

    def describe(self) -> list[str]:
        """One line per source, in the order they are asked, for the start-up log."""
        lines = []
        for source in self.sources:
            availability = source.is_available()
            state = "" if availability else "unavailable: "
            lines.append(f"{source.describe()}: {state}{availability.reason}")
        return lines

    async def resolve(self, names: Iterable[str]) -> ResolvedCredentials:
        """Every credential in `names`; MissingCredentialsError naming each one that cannot be resolved."""
        wanted = list(dict.fromkeys(names))
        if not wanted:
            return NO_CREDENTIALS
        asked = [(source, source.is_available()) for source in self.sources]
        resolved: dict[str, Credential] = {}
        problems: dict[str, str] = {}
        for name in wanted:
            try:
                check_credential_name(name)
                credential = await self._resolve_one(name, asked)
            except (CredentialSourceError, InvalidCredentialError) as exc:
                problems[name] = str(exc)
                logger.warning("credential %r cannot be resolved: %s", name, exc)
                continue
            if credential is None:
                problems[name] = _not_found(asked)
            else:
                resolved[name] = credential
        if problems:
            raise MissingCredentialsError(problems)
        return ResolvedCredentials(resolved)

    async def configured_values(self) -> list[str]:
        """Every value every available source holds now, shadowed ones included (each is somebody's secret), and
        the store key: what the server's redactor learns at start, so that a value is hidden before a call first
        resolves it, in a log file or another replica's log rows for example. A source or credential that cannot
        be read is logged and skipped; a call that needs it reports why."""
        values: list[str] = []
        for source in self.sources:
            if isinstance(source, DatabaseCredentialSource):
                # The key that decrypts every stored value: hidden too, whether or not the database answers.
                values.extend(source.key_values())
            if not source.is_available():
                continue
            try:
                names = await asyncio.to_thread(source.names) if source.blocking else source.names()
            except CredentialSourceError as exc:
                logger.warning("the credentials of the %s source cannot be listed: %s", source.source, exc)
                continue
            for name in names:
                try:
                    check_credential_name(name)
                    found = await source.lookup_async(name) or {}
                    for key, value in found.items():
                        check_credential_key(key)
                        check_credential_value(name, key, value, source.describe())
                except (CredentialSourceError, InvalidCredentialError) as exc:
                    logger.warning("credential %r of the %s source cannot be used: %s", name, source.source, exc)
                    continue
                values.extend(found.values())
        return values

    def close(self) -> None:
        for source in self.sources:
            source.close()

    async def _resolve_one(self, name: str, asked: Sequence[tuple[CredentialSource, Availability]]) \
            -> Credential | None:
        for source, availability in asked:
            if not availability:
                continue
            try:
                values = await source.lookup_async(name)
            except CredentialSourceError as exc:
                raise CredentialSourceError(f"{source.source}: {exc}") from None
            if values:
                # Checked again whatever the source: every value must be safe for the redactor to hide.
                for key, value in values.items():
                    check_credential_key(key)
                    check_credential_value(name, key, value, source.describe())
                return Credential(name, source.source, values)
        return None


def _not_found(asked: Sequence[tuple[CredentialSource, Availability]]) -> str:
    looked = [source.describe() for source, availability in asked if availability]
    skipped = [f"{source.source} skipped: {availability.reason}" for source, availability in asked
               if not availability]
    return "; ".join([f"not found in {', '.join(looked) or 'any source'}", *skipped])
