"""Which names (dict keys, `name=value` names, log extras) hold a secret, decided word by word.

A name is split into lowercase words at `_`, `-`, `.`, spaces and other punctuation, and at camelCase
boundaries (`githubToken` -> github, token; `APIKey` -> api, key); trailing all-digit words are dropped
(`password2`, `api_key_1`). The name is secret when its words END with one of these entries:

  - one word: password, passwd, passphrase, secret, token, authorization, and the run-together forms of
    the compounds below (apikey, privatekey, accesstoken, clientsecret...);
  - a compound: api key, private key, auth key, access key, secret key, signing key, encryption key,
    client secret, access token, refresh token, password hash, password digest;
  - every name the operator adds (`extra_secret_keys`), split the same way: `pin` makes `sim_pin` and
    `PIN` secret; `session_id` makes `user_session_id` and `sessionId` secret.

Names longer than MAX_NAME_LENGTH characters are texts, not names, and never secret.

Only the last word counts, so a name that merely mentions a secret word survives:

    secret:  password  DB_PASSWORD  githubToken  x-api-key  X-Auth-Token  apiKey  APIKEY  client_secret
             AWS_SECRET_ACCESS_KEY  id_token  password_reset_token  Authorization  spring.datasource.password
    kept:    key  primary_key  sort_key  key_count  keyboard  monkey  tokenizer  token_count  max_tokens
             password_policy  secret_name  access_key_id  tokens  passwordless

Two deliberate choices:
  - Bare `key` is NOT secret, although seed 000 redacts it: `{"key": ..., "value": ...}` pairs, S3 object
    keys and sort keys are ordinary data. `key` is secret only after api/private/auth/access/secret/
    signing/encryption.
  - `token` as the last word is secret unless the word before it says it is a count, a limit, a
    pagination cursor or a tokenizer's special token (max_token, page_token, next_token, eos_token...,
    see NOT_SECRET_BEFORE_TOKEN): an AI tool server's outputs are full of these, and none grants access.
    Plural `tokens` is never secret (`max_tokens`, `tokens`), `token_count` ends in `count`.
An operator entry wins over that exception: adding `page_token` makes `page_token` secret again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "token", "authorization")
SECRET_COMPOUNDS = (
    ("api", "key"), ("private", "key"), ("auth", "key"), ("access", "key"), ("secret", "key"),
    ("signing", "key"), ("encryption", "key"), ("client", "secret"), ("access", "token"),
    ("refresh", "token"), ("password", "hash"), ("password", "digest"),
)
NOT_SECRET_BEFORE_TOKEN = frozenset({
    # counts and limits
    "max", "min", "total", "num", "count", "input", "output", "prompt", "completion", "reasoning",
    # pagination cursors
    "page", "next", "prev", "previous", "continuation", "cursor", "sync", "resume", "start", "end",
    # tokenizers' special tokens
    "bos", "eos", "pad", "unk", "sep", "cls", "mask", "special", "stop",
})
# Substrings that every built-in secret name contains (case-folded): the Redactor's cheap pre-check.
BASE_TRIGGERS = ("pass", "secret", "token", "auth", "key")

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
MAX_NAME_LENGTH = 128
"""Longer strings are not names (they are texts, blobs, hashes) and are never secret names."""
# Enough for the names of any realistic output; a structure keyed by ids must not grow it forever.
_CACHE_LIMIT = 4096


def split_words(name: str) -> list[str]:
    """The lowercase words of `name`, trailing all-digit words dropped: `DB_Password2` -> [db, password]."""
    words = [word.lower() for word in _WORD.findall(name)]
    while words and words[-1].isdigit():
        words.pop()
    return words


class SecretKeyRule:
    """Decides whether a name holds a secret (the rule is in this module's docstring). Thread-safe."""

    def __init__(self, extra_secret_keys: Iterable[str] = ()) -> None:
        builtin = [(word,) for word in SECRET_WORDS] + list(SECRET_COMPOUNDS)
        extras: list[tuple[str, ...]] = []
        for name in extra_secret_keys:
            words = tuple(split_words(name))
            if not words:
                raise ValueError(f"secret key {name!r} has no letters to match names on; give a word such as 'pin'")
            extras.append(words)
        self._by_last: dict[str, list[tuple[str, ...]]] = {}
        for compound in builtin + extras:
            for entry in {compound, ("".join(compound),)}:
                self._by_last.setdefault(entry[-1], []).append(entry)
        triggers = list(BASE_TRIGGERS)
        for compound in extras:
            if not any(trigger in word for trigger in triggers for word in compound):
                triggers.append(max(compound, key=len))
        self.trigger_words: tuple[str, ...] = tuple(triggers)
        """Case-folded substrings one of which every secret name contains."""
        self._cache: dict[str, bool] = {}

    def is_secret(self, name: str) -> bool:
        """Whether a value stored under `name` is a secret."""
        if len(name) > MAX_NAME_LENGTH:
            return False
        known = self._cache.get(name)
        if known is None:
            known = self._decide(split_words(name))
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[name] = known
        return known

    def _decide(self, words: list[str]) -> bool:
        if not words:
            return False
        for entry in self._by_last.get(words[-1], ()):
            if len(entry) > len(words) or tuple(words[-len(entry):]) != entry:
                continue
            # A longer entry (an operator's `page_token`) is still checked by the loop.
            if entry == ("token",) and len(words) > 1 and words[-2] in NOT_SECRET_BEFORE_TOKEN:
                continue
            return True
        return False
