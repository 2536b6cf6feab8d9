"""The redaction library: key rule, known values, patterns, structures, the log filter and streaming."""

from __future__ import annotations

import base64
import copy
import json
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from toolhost_server.sanitize import (
    MIN_KNOWN_VALUE_LENGTH,
    REDACTED,
    RedactingLogFilter,
    Redactor,
    Sanitizer,
    SanitizerSettings,
    SecretKeyRule,
    Span,
    StreamRedactor,
    check_known_value,
    split_words,
)
from toolhost_server.sanitize.assignments import AssignmentSanitizer
from toolhost_server.sanitize.discovery import sanitizer_classes
from toolhost_server.sanitize.known_values import KnownValueSanitizer
from toolhost_server.sanitize.patterns import CredentialPatternSanitizer

CANARY = "s3cr3t-canary-value"
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9\nq3m+Zx0aBcDeFgHiJ\n"
       "-----END RSA PRIVATE KEY-----")


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


def text_of(redactor: Redactor, text: str) -> str:
    return redactor.redact_text(text).value


# --- the key rule -------------------------------------------------------------------------------------

SECRET_NAMES = [
    "password", "PASSWORD", "Password", "DB_PASSWORD", "db-password", "db.password", "spring.datasource.password",
    "passwd", "passphrase", "secret", "client_secret", "clientSecret", "token", "githubToken", "GITHUB_TOKEN",
    "X-Auth-Token", "access_token", "refresh_token", "id_token", "password_reset_token", "api_key", "x-api-key",
    "X-API-KEY", "apiKey", "APIKey", "apikey", "APIKEY", "private_key", "privateKey", "auth_key", "authKey",
    "access_key", "secret_key", "AWS_SECRET_ACCESS_KEY", "signing_key", "encryption_key", "Authorization",
    "password2", "api_key_1", "password_hash",
]
SURVIVING_NAMES = [
    "max_tokens", "token_count", "primary_key", "keyboard", "tokenizer", "sort_key", "key_count", "key", "KEY",
    "monkey", "tokens", "page_token", "next_page_token", "nextPageToken", "eos_token", "pad_token",
    "max_token", "password_policy", "passwordless", "secret_name", "secretName", "access_key_id", "keys",
    "author", "", "___", "x" * 200 + "_password",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names_are_secret(redactor: Redactor, name: str) -> None:
    assert redactor.is_secret_key(name)


@pytest.mark.parametrize("name", SURVIVING_NAMES)
def test_ordinary_names_survive(redactor: Redactor, name: str) -> None:
    assert not redactor.is_secret_key(name)


def test_split_words_handles_every_naming_style() -> None:
    assert split_words("githubToken") == ["github", "token"]
    assert split_words("APIKey") == ["api", "key"]
    assert split_words("x-api-key") == ["x", "api", "key"]
    assert split_words("spring.datasource.password") == ["spring", "datasource", "password"]
    assert split_words("DB_Password_2") == ["db", "password"]


def test_extra_secret_keys_are_added_word_by_word() -> None:
    redactor = Redactor(extra_secret_keys=["pin", "session_id", "page_token"])
    for name in ("pin", "SIM_PIN", "simPin", "session_id", "userSessionId", "sessionid", "page_token"):
        assert redactor.is_secret_key(name), name
    for name in ("spin", "pin_count", "id", "session", "max_tokens"):
        assert not redactor.is_secret_key(name), name
    # The additions do not leak into other redactors.
    assert not Redactor().is_secret_key("sim_pin")


def test_extra_secret_key_without_letters_is_refused() -> None:
    with pytest.raises(ValueError, match="no letters"):
        SecretKeyRule(["__"])


# --- structures ---------------------------------------------------------------------------------------

def test_secret_keys_are_hidden_at_any_depth_whatever_the_value(redactor: Redactor) -> None:
    value = {
        "db": {"host": "db", "DB_PASSWORD": "hunter22", "port": 5432},
        "items": [{"githubToken": 12345, "name": "a"}, ({"x-api-key": ["k1", "k2"]}, "plain")],
        "client_secret": {"nested": "dict"},
        "private_key": None,
    }
    result = redactor.redact_value(value)
    assert result.redacted
    assert result.value == {
        "db": {"host": "db", "DB_PASSWORD": REDACTED, "port": 5432},
        "items": [{"githubToken": REDACTED, "name": "a"}, ({"x-api-key": REDACTED}, "plain")],
        "client_secret": REDACTED,
        "private_key": REDACTED,
    }
    assert isinstance(result.value["items"][1], tuple)


def test_ordinary_fields_survive_in_structures(redactor: Redactor) -> None:
    value = [{name: 512 for name in SURVIVING_NAMES} for _ in range(50)]
    result = redactor.redact_value(value)
    assert not result.redacted
    assert result.value is value


def test_input_is_never_mutated_and_untouched_parts_are_shared(redactor: Redactor) -> None:
    value: dict[str, Any] = {"safe": {"a": [1, 2, {"b": "c"}]}, "risky": [{"password": "hunter22"}], "n": 1}
    before = copy.deepcopy(value)
    result = redactor.redact_value(value)
    assert value == before
    assert result.value is not value
    assert result.value["safe"] is value["safe"]
    assert result.value["risky"][0] == {"password": REDACTED}


def test_nothing_to_hide_returns_the_input_itself(redactor: Redactor) -> None:
    for value in ({"a": "b", "max_tokens": 5}, ["x", 1, None, 2.5, True], (), "plain text", 42, None):
        result = redactor.redact_value(value)
        assert result.redacted is False
        assert result.value is value


def test_strings_inside_structures_are_redacted_as_text() -> None:
    redactor = Redactor(known_values=[CANARY])
    value = {"log": f"connect with {CANARY} now", "lines": [f"Authorization: Bearer {JWT}"],
             f"key-{CANARY}": 1}
    result = redactor.redact_value(value)
    assert result.value == {"log": f"connect with {REDACTED} now", "lines": [f"Authorization: Bearer {REDACTED}"],
                            f"key-{REDACTED}": 1}


def test_redaction_is_idempotent(redactor: Redactor) -> None:
    first = redactor.redact_value({"password": "hunter22", "log": "password=hunter22 " + JWT})
    assert first.redacted
    second = redactor.redact_value(first.value)
    assert second.redacted is False
    assert second.value is first.value
    # Also after a round trip through JSON, where the markers are new string objects.
    assert redactor.redact_value(json.loads(json.dumps(first.value))).redacted is False


def test_many_repeated_keys_do_not_hide_a_later_secret(redactor: Redactor) -> None:
    # Repeated keys are counted instead of visited one by one: the count must not swallow other strings.
    value: list[Any] = [{"max_tokens": i, "primary_key": i, "key": i} for i in range(300)]
    value.append({"note": "retry with token=abc123def456 later"})
    value.append({'api"key': "s3cr3tvalue"})  # in JSON `"api\"key"`: it ends with `"key"` too
    value += [{"max_tokens": 1}] * 10
    result = redactor.redact_value(value)
    assert result.value[300] == {"note": f"retry with token={REDACTED} later"}
    assert result.value[301] == {'api"key': REDACTED}
    assert result.value[0] is value[0]


def test_structures_json_cannot_encode_are_still_redacted(redactor: Redactor) -> None:
    opaque = object()
    value = {(1, 2): {"password": "hunter22"}, "obj": opaque, "s": {1, 2}}
    result = redactor.redact_value(value)
    assert result.redacted
    assert result.value[(1, 2)] == {"password": REDACTED}
    assert result.value["obj"] is opaque


class _Text(str):
    """A str subclass, as an enum or a library's string type may be."""


STRUCTURE_WORDS = [
    "ok", "max_tokens", "primary_key", "token_count", "password", "DB_PASSWORD", "apiKey", "note", "name", "key",
    f"connect with {CANARY} now", f"Authorization: Bearer {JWT}", "postgres://app:hunter22@db/app", "token=abc123def",
    "retry later", "ünïcödé ßtraße", "keyboard", "passwordless", f"key-{CANARY}", REDACTED, "", "tokenizer",
    "AKIAIOSFODNN7EXAMPLE", 'say "hi"\\n', "\t", PEM,
]


def _random_structure(rng: Any, depth: int, shared: list[Any]) -> Any:
    """Dicts, lists and tuples of words (some secret), numbers, None, and containers met twice."""
    roll = rng.random()
    if depth == 0 or roll < 0.3:
        choice = rng.random()
        if choice < 0.6:
            word = rng.choice(STRUCTURE_WORDS)
            return _Text(word) if rng.random() < 0.05 else word
        return rng.choice([0, 1, 2.5, True, None, 12345678])
    if shared and roll < 0.35:
        return rng.choice(shared)
    size = rng.randrange(5)
    if roll < 0.7:
        made: Any = {(rng.choice(STRUCTURE_WORDS) if rng.random() < 0.9 else rng.randrange(3)):
                     _random_structure(rng, depth - 1, shared) for _ in range(size)}
    else:
        items = [_random_structure(rng, depth - 1, shared) for _ in range(size)]
        made = items if rng.random() < 0.8 else tuple(items)
    shared.append(made)
    return made


def test_structures_are_redacted_as_the_json_scheme_redacts_them() -> None:
    # redact_value finds the strings to check by joining the distinct strings of the structure; the older
    # scheme (its fallback) by searching the structure's JSON text. Both must hide exactly the same things.
    import random

    redactor = Redactor(extra_secret_keys=["pin"]).with_values([CANARY])
    rng = random.Random(2024)
    for _ in range(400):
        value = _random_structure(rng, 4, [])
        if isinstance(value, str):
            continue
        before = copy.deepcopy(value)
        result = redactor.redact_value(value)
        expected = redactor._redact_value_as_json(value)
        assert result.value == expected.value and result.redacted == expected.redacted, value
        assert value == before
        if not result.redacted:
            assert result.value is value
        dumped = json.dumps(result.value, default=str)
        assert CANARY not in dumped and "hunter22" not in dumped and JWT not in dumped


def test_untouched_containers_are_shared_however_deep_the_secret() -> None:
    redactor = Redactor()
    shared = {"password": "hunter22"}
    value: list[Any] = [{"a": [{"b": "c"}], "d": {"e": [shared]}} for _ in range(3)] + [shared, ("x", {"y": "z"})]
    result = redactor.redact_value(value)
    assert result.value[0]["a"] is value[0]["a"]
    assert result.value[4] is value[4]
    assert result.value[0]["d"]["e"][0] == result.value[3] == {"password": REDACTED}
    assert result.value[1] is not value[1] and result.value[1]["a"] is value[1]["a"]


@pytest.mark.timeout(10)
def test_a_structure_that_contains_itself_or_shares_a_lot_is_walked_once_per_container() -> None:
    redactor = Redactor()
    loop: list[Any] = ["plain"]
    loop.append(loop)
    loop.append({"back": loop})
    value = {"loop": loop, "password": "hunter22", "note": "fine"}
    result = redactor.redact_value(value)
    assert result.value["password"] == REDACTED and result.value["loop"] is loop and result.value["note"] == "fine"
    assert redactor.redact_value(loop).value is loop
    # 2**60 paths through 60 distinct lists: each list is looked at once, and the secret in the deepest is found.
    shared: Any = {"token": "abc123def456"}
    for _ in range(60):
        shared = [shared, shared]
    result = redactor.redact_value(shared)
    deepest = result.value
    for _ in range(60):
        assert deepest[0] is deepest[1]
        deepest = deepest[0]
    assert deepest == {"token": REDACTED}


@pytest.mark.parametrize("odd", ["line\0with a NUL", "İstanbul"])
def test_strings_the_joined_text_cannot_hold_are_redacted_the_json_way(odd: str) -> None:
    # A NUL (the separator) or a letter whose lowercase is longer makes redact_value search the JSON text.
    redactor = Redactor(known_values=[CANARY])
    value = {"odd": odd, "log": f"token={CANARY}", "items": [{"password": "hunter22"}, {"ok": 1}], odd: "x"}
    result = redactor.redact_value(value)
    assert result.value == {"odd": odd, "log": f"token={REDACTED}", "items": [{"password": REDACTED}, {"ok": 1}],
                            odd: "x"}
    assert result.value["items"][1] is value["items"][1]


def test_str_subclasses_and_dict_subclasses_are_redacted() -> None:
    import collections

    redactor = Redactor(known_values=[CANARY])
    value = collections.OrderedDict(log=_Text(f"uses {CANARY}"), nested=[_Text("password=hunter22")])
    result = redactor.redact_value(value)
    assert result.value == {"log": f"uses {REDACTED}", "nested": [f"password={REDACTED}"]}


# --- known values -------------------------------------------------------------------------------------

def test_known_value_is_replaced_wherever_it_appears() -> None:
    redactor = Redactor(known_values=[CANARY])
    result = redactor.redact_text(f"a{CANARY}b {CANARY}")
    assert result.value == f"a{REDACTED}b {REDACTED}"
    assert result.redacted


@pytest.mark.parametrize("prefix", ["", "x", "xy"])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_known_value_is_found_base64_encoded_at_every_alignment(prefix: str, encode: Any) -> None:
    value = "s3cr3t>>>???~~~"  # encodes to text with `+` and `/`: the two alphabets differ
    assert base64.b64encode(value.encode()) != base64.urlsafe_b64encode(value.encode())
    encoded = encode(f"{prefix}{value} and more".encode()).decode()
    result = Redactor(known_values=[value]).redact_text(f"blob: {encoded}")
    # Exactly the characters that encode only bits of the value are gone; the ones shared with the
    # neighbouring bytes stay.
    first = -(-8 * len(prefix) // 6)
    last = 8 * (len(prefix) + len(value)) // 6
    assert result.value == f"blob: {encoded[:first]}{REDACTED}{encoded[last:]}"
    assert result.redacted


def test_known_value_is_found_url_and_json_encoded() -> None:
    value = 'p@ss word/"with"&chars'
    redactor = Redactor(known_values=[value])
    for form in (quote(value), quote(value, safe=""), quote_plus(value), quote(value, safe="").lower(),
                 json.dumps(value)[1:-1]):
        assert form != value
        assert text_of(redactor, f"?q={form}&x=1") == f"?q={REDACTED}&x=1", form
    assert redactor.redact_value({"args": [value]}).value == {"args": [REDACTED]}


@pytest.mark.parametrize("value", ["", "hunter", "1234567"])
def test_short_known_values_are_refused_without_echoing_them(value: str) -> None:
    with pytest.raises(ValueError, match="too short to match safely") as raised:
        Redactor(known_values=[value])
    assert f"minimum {MIN_KNOWN_VALUE_LENGTH}" in str(raised.value)
    if value:
        assert value not in str(raised.value)
    with pytest.raises(ValueError, match="too short"):
        Redactor().with_values([value])
    with pytest.raises(ValueError, match="too short"):
        check_known_value(value)
    check_known_value("x" * MIN_KNOWN_VALUE_LENGTH)


def test_with_values_derives_a_call_redactor_and_leaves_the_base_alone() -> None:
    base = Redactor(known_values=["server-wide-secret"])
    call = base.with_values([CANARY])
    assert text_of(call, f"{CANARY} server-wide-secret") == f"{REDACTED} {REDACTED}"
    assert text_of(base, f"{CANARY} server-wide-secret") == f"{CANARY} {REDACTED}"
    assert base.with_values([]) is base
    with pytest.raises(TypeError, match="not one string"):
        base.with_values(CANARY)
    assert text_of(call, "password=hunter22") == f"password={REDACTED}"


# --- JSON text stays JSON -----------------------------------------------------------------------------

# Secret keys holding every kind of JSON literal, at the top and nested in objects and arrays, next to fields
# that must survive. The numbers are distinctive, so that a digit run left behind would be seen.
JSON_SECRETS: dict[str, Any] = {
    "metrics_token": 8675309123, "api_key": -271.82818e-3, "password": True, "client_secret": False,
    "refresh_token": None, "secret": 0, "max_tokens": 512, "id": 7,
    "nested": {"items": [{"githubToken": 4242424242, "count": 3}, {"private_key": 1e300}], "ok": True},
}
JSON_REDACTED: dict[str, Any] = {
    "metrics_token": REDACTED, "api_key": REDACTED, "password": REDACTED, "client_secret": REDACTED,
    "refresh_token": REDACTED, "secret": REDACTED, "max_tokens": 512, "id": 7,
    "nested": {"items": [{"githubToken": REDACTED, "count": 3}, {"private_key": REDACTED}], "ok": True},
}
SECRET_DIGITS = ("8675309123", "271", "4242424242", "1e+300")
JSON_LAYOUTS = {
    "compact": {"separators": (",", ":")},
    "spaced": {},
    "pretty": {"indent": 2},
    "nan_allowed": {"allow_nan": True},
}


def assert_json_without_secrets(text: str, expected: Any) -> None:
    assert json.loads(text) == expected, text
    for digits in SECRET_DIGITS:
        assert digits not in text, (digits, text)


@pytest.mark.parametrize("layout", JSON_LAYOUTS)
def test_json_literals_under_secret_keys_become_json_strings(redactor: Redactor, layout: str) -> None:
    text = json.dumps(JSON_SECRETS, **JSON_LAYOUTS[layout])
    result = redactor.redact_text(text)
    assert result.redacted
    assert_json_without_secrets(result.value, JSON_REDACTED)


@pytest.mark.parametrize("layout", JSON_LAYOUTS)
def test_json_inside_a_json_string_stays_json_at_both_levels(redactor: Redactor, layout: str) -> None:
    # A response body quoted in a log record: the secret keys appear as \"metrics_token\": 8675309123.
    text = json.dumps({"body": json.dumps(JSON_SECRETS, **JSON_LAYOUTS[layout]), "status": 200})
    assert '\\"metrics_token\\":' in text
    redacted = redactor.redact_text(text).value
    outer = json.loads(redacted)
    assert outer["status"] == 200
    assert_json_without_secrets(outer["body"], JSON_REDACTED)
    assert_json_without_secrets(redacted, outer)


@pytest.mark.parametrize("text", [
    '{"token": NaN}', '{"token": -Infinity}', '{"token": 1}', '{"token":-0.5E-3}', '[{"token": null}]',
    '{"token": 123456789012345678901234567890}', '{"a": {"password": true}, "b": [1]}',
    '{"token": 1', '{"token": 5\n}',  # cut off at the end, and a newline after the value
])
def test_every_json_literal_form_is_quoted(redactor: Redactor, text: str) -> None:
    redacted = redactor.redact_text(text).value
    assert '"[REDACTED]"' in redacted, redacted
    if text.endswith(("}", "]")):
        json.loads(redacted, parse_constant=lambda name: pytest.fail(f"{name} survived"))


@pytest.mark.parametrize(("text", "expected"), [
    ("password=5", f"password={REDACTED}"),
    ("token: 5", f"token: {REDACTED}"),
    ("'token': 5,", f"'token': {REDACTED},"),  # a Python dict's repr: not JSON, as before
    ('"token" = 5 ', f'"token" = {REDACTED} '),  # `=` is no JSON separator
    ('"token" := true ', f'"token" := {REDACTED} '),
    ('{"token": 12abc}', f'{{"token": {REDACTED}'),  # no JSON literal: the bare value, as before
    ('{"token": 0x1F,', f'{{"token": {REDACTED},'),
    ('token": 5,', f'token": {REDACTED},'),  # a quote after the name but none before it
    ('{"token": True,', f'{{"token": {REDACTED},'),  # Python's True is no JSON literal
])
def test_other_forms_keep_a_bare_marker(redactor: Redactor, text: str, expected: str) -> None:
    assert redactor.redact_text(text).value == expected


def test_json_redaction_is_idempotent(redactor: Redactor) -> None:
    once = redactor.redact_text(json.dumps(JSON_SECRETS)).value
    again = redactor.redact_text(once)
    assert again.value is once and again.redacted is False


def test_a_known_value_inside_a_json_number_keeps_the_number_quoted() -> None:
    # The known value's span lies inside the assignment's: the two are joined and the replacement kept.
    redactor = Redactor(known_values=["86753091"])
    assert_json_without_secrets(redactor.redact_text(json.dumps(JSON_SECRETS)).value, JSON_REDACTED)


@pytest.mark.parametrize("layout", ["compact", "pretty"])
def test_streamed_json_is_redacted_as_the_whole_text_at_every_split(layout: str) -> None:
    redactor = Redactor()
    text = json.dumps(JSON_SECRETS, **JSON_LAYOUTS[layout]) + "\n"
    whole = redactor.redact_text(text).value
    assert_json_without_secrets(whole, JSON_REDACTED)
    for split in range(1, len(text)):
        out, stream = stream_all(redactor, [text[:split], text[split:]], hold=24)
        assert out == whole, split
        assert stream.redacted
    out, _ = stream_all(redactor, list(text), hold=24)
    assert out == whole


def test_structures_hide_every_kind_of_value_under_secret_keys_as_the_string(redactor: Redactor) -> None:
    assert redactor.redact_value(JSON_SECRETS).value == JSON_REDACTED
    # The older JSON scheme (a string with a NUL in it makes the structure take it) does the same.
    odd = {**JSON_SECRETS, "note": "a\0b"}
    assert redactor.redact_value(odd).value == {**JSON_REDACTED, "note": "a\0b"}


# --- patterns -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("id AKIAIOSFODNN7EXAMPLE,", f"id {REDACTED},"),
    ("ASIAY34FZKBOKMUTVV7A", REDACTED),
    (f"jwt={JWT}", f"jwt={REDACTED}"),
    (f"x {JWT} y", f"x {REDACTED} y"),
    (f"{PEM}\nafter", f"{REDACTED}\nafter"),
    ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq", REDACTED),  # truncated output: hidden to the end
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blb\n-----END OPENSSH PRIVATE KEY-----", REDACTED),
    ("Authorization: Bearer abc123def456ghi", f"Authorization: Bearer {REDACTED}"),
    ("curl -H 'bearer abc123.def-456_ghi'", f"curl -H 'bearer {REDACTED}'"),
    ("postgres://app:hunter22@db:5432/app", f"postgres://app:{REDACTED}@db:5432/app"),
    ("redis://:p@ss@cache:6379", f"redis://:{REDACTED}@cache:6379"),
    ("DB_PASSWORD=hunter22 next", f"DB_PASSWORD={REDACTED} next"),
    ("password: hunter22", f"password: {REDACTED}"),
    ('password = "two words"', f'password = "{REDACTED}"'),
    ('{"client_secret": "s3", "token_count": 5}', f'{{"client_secret": "{REDACTED}", "token_count": 5}}'),
    ('{\\"token\\": \\"s3\\"}', f'{{\\"token\\": \\"{REDACTED}\\"}}'),
    ("'auth_key' => 'abc'", f"'auth_key' => '{REDACTED}'"),
    ("/cb?access_token=abc&page=2", f"/cb?access_token={REDACTED}&page=2"),
    ("Authorization: Basic dXNlcjpwYXNz", f"Authorization: Basic {REDACTED}"),
    ("--api-key=abc123", f"--api-key={REDACTED}"),
    ("githubToken: ghp_abc", f"githubToken: {REDACTED}"),
])
def test_patterns_find_credentials(redactor: Redactor, text: str, expected: str) -> None:
    result = redactor.redact_text(text)
    assert result.value == expected
    assert result.redacted


@pytest.mark.parametrize("text", [
    "AKIAIOSFODNN7EXAMPL is too short",  # 15 characters after AKIA
    "XAKIAIOSFODNN7EXAMPLE",  # part of a longer token
    "AKIAIOSFODNN7EXAMPLEX",
    "eyJhbGciOiJIUzI1NiJ9 alone",  # one segment
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0",  # two segments
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBg\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    "the bearer of bad news",
    "uses the Bearer authentication scheme",
    "https://example.com:8443/path?q=1",
    "ssh://git@github.com/org/repo",
    "max_tokens=512, token_count: 7, primary_key=5, sort_key: name",
    "the password is hunter22",  # no `=` or `:`
    "keyboard: qwerty, tokenizer=bpe",
    f"password: {REDACTED}",
])
def test_near_misses_survive(redactor: Redactor, text: str) -> None:
    result = redactor.redact_text(text)
    assert result.value is text
    assert result.redacted is False


def test_many_secrets_in_a_long_text(redactor: Redactor) -> None:
    line = "INFO request ok max_tokens=5 user=bob\n"
    text = line * 2000 + f"token={CANARY}\n" + line * 2000 + "AKIAIOSFODNN7EXAMPLE\n"
    result = Redactor(known_values=[CANARY]).redact_text(text)
    assert result.value == line * 2000 + f"token={REDACTED}\n" + line * 2000 + f"{REDACTED}\n"


# --- discovery and the Sanitizer contract -------------------------------------------------------------

class _OutsideSanitizer(Sanitizer):
    def __init__(self, settings: SanitizerSettings) -> None:
        pass

    def find(self, text: str, folded: str) -> list[Span]:
        return [(0, len(text))]


def test_sanitizers_are_found_not_registered() -> None:
    found = set(sanitizer_classes())
    assert {AssignmentSanitizer, CredentialPatternSanitizer, KnownValueSanitizer} <= found
    # Only the package's own: a subclass defined elsewhere does not join every server's redactor.
    assert _OutsideSanitizer not in found
    assert text_of(Redactor(), "hello") == "hello"


# --- the log filter -----------------------------------------------------------------------------------

class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(message)s | %(api_key)s | %(note)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, _Capture]]:
    logger = logging.getLogger("toolhost.test_sanitize")
    handler = _Capture()
    handler.addFilter(RedactingLogFilter(Redactor(known_values=[CANARY])))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield logger, handler
    finally:
        logger.removeHandler(handler)


def test_log_filter_redacts_message_args_and_extras(captured: tuple[logging.Logger, _Capture]) -> None:
    logger, handler = captured
    logger.info("connecting with %s to %s", CANARY, "postgres://app:hunter22@db/app",
                extra={"api_key": "k-123456789", "note": {"password": "hunter22", "max_tokens": 5}})
    record = handler.records[0]
    assert record.getMessage() == f"connecting with {REDACTED} to postgres://app:{REDACTED}@db/app"
    assert getattr(record, "api_key") == REDACTED  # noqa: B009  -  set by `extra=`, unknown to mypy
    assert getattr(record, "note") == {"password": REDACTED, "max_tokens": 5}  # noqa: B009
    assert CANARY not in handler.lines[0] and "hunter22" not in handler.lines[0]
    assert handler.lines[0].startswith(f"connecting with {REDACTED}")


def test_log_filter_redacts_tracebacks(captured: tuple[logging.Logger, _Capture]) -> None:
    logger, handler = captured
    try:
        raise RuntimeError(f"login failed for token={CANARY}")
    except RuntimeError:
        logger.exception("call failed", extra={"api_key": None, "note": "n"})
    assert CANARY not in handler.lines[0]
    assert f"RuntimeError: login failed for token={REDACTED}" in handler.lines[0]


def test_log_filter_leaves_clean_records_alone(captured: tuple[logging.Logger, _Capture]) -> None:
    logger, handler = captured
    logger.info("took %d ms", 12, extra={"api_key": "x", "note": "max_tokens=5"})
    record = handler.records[0]
    assert record.msg == "took %d ms" and record.args == (12,)
    assert getattr(record, "note") == "max_tokens=5"  # noqa: B009
    assert handler.lines[0] == f"took 12 ms | {REDACTED} | max_tokens=5"


def test_log_filter_survives_bad_format_arguments(captured: tuple[logging.Logger, _Capture]) -> None:
    logger, handler = captured
    logger.info("%d items", CANARY, extra={"api_key": 1, "note": 2})
    logger.info("%d items", "many", extra={"api_key": 1, "note": 2})
    assert handler.records[0].getMessage() == f"%d items (unformattable arguments: ('{REDACTED}',))"
    assert handler.lines[1] == f"%d items (unformattable arguments: ('many',)) | {REDACTED} | 2"


# --- streaming ----------------------------------------------------------------------------------------

STREAMED_SECRETS = [
    CANARY,
    base64.b64encode(f"x{CANARY}".encode()).decode(),
    JWT,
    f"Authorization: Bearer {JWT[:40]}",
    "postgres://app:hunter22hunter22@db:5432/app",
    "DB_PASSWORD=hunter22hunter22",
    PEM,
    "AKIAIOSFODNN7EXAMPLE",
]


def stream_all(redactor: Redactor, chunks: list[str], hold: int | None = None) -> tuple[str, StreamRedactor]:
    stream = StreamRedactor(redactor, hold=hold)
    out = "".join(stream.feed(chunk) for chunk in chunks) + stream.finish()
    return out, stream


@pytest.mark.parametrize("secret", STREAMED_SECRETS)
def test_a_secret_split_across_two_chunks_is_caught_at_every_split(secret: str) -> None:
    redactor = Redactor(known_values=[CANARY])
    text = "lorem ipsum dolor " * 3 + secret + " sit amet\nconsectetur " * 3
    whole = redactor.redact_text(text).value
    assert whole != text
    for split in range(1, len(text)):
        out, stream = stream_all(redactor, [text[:split], text[split:]], hold=24)
        assert out == whole, split
        assert stream.redacted


@pytest.mark.parametrize("secret", STREAMED_SECRETS)
def test_a_secret_streamed_one_character_at_a_time_is_caught(secret: str) -> None:
    redactor = Redactor(known_values=[CANARY])
    text = ("filler text here\n" * 4 + secret + "\n") * 2
    out, stream = stream_all(redactor, list(text), hold=24)
    assert out == redactor.redact_text(text).value
    assert stream.redacted


@pytest.mark.parametrize("secret", STREAMED_SECRETS)
def test_a_secret_is_caught_when_every_chunk_is_flushed_at_once(secret: str) -> None:
    # Live output: each chunk is released as far as possible right away (feed + flush), yet a secret split
    # anywhere, including inside the known value's spaces and the PEM block's lines, never leaks a part.
    # Released early, a chunk may be redacted a little more than the whole text would be ("Authorization:
    # [REDACTED] [REDACTED]"), or keep a harmless header ("-----BEGIN [REDACTED]"); no piece of a secret passes.
    redactor = Redactor(known_values=[CANARY, "correct horse battery staple"])
    text = "lorem ipsum dolor " * 3 + secret + " sit amet\nconsectetur correct horse battery staple\n"
    cores = [base64.b64encode(f"x{CANARY}".encode()).decode()[4:], CANARY, JWT[:40], "hunter22hunter22",
             "MIIEowIBAAKCAQEA7bq9", "q3m+Zx0aBcDeFgHiJ", "AKIAIOSFODNN7EXAMPLE"]
    pieces = {core[i:i + 6] for core in cores if core in secret for i in range(len(core) - 5)}
    assert pieces
    for split in range(1, len(text)):
        stream = StreamRedactor(redactor)
        first = stream.feed(text[:split]) + stream.flush()
        out = first + stream.feed(text[split:]) + stream.flush() + stream.finish()
        assert not [piece for piece in pieces if piece in out], (split, out)
        assert "horse" not in out and out.endswith(" sit amet\nconsectetur [REDACTED]\n") and stream.redacted


def test_flush_releases_whole_lines_at_once_and_holds_a_trailing_token() -> None:
    stream = StreamRedactor(Redactor())
    assert stream.feed("first line\n") + stream.flush() == "first line\n"
    assert stream.feed("value: abc") + stream.flush() == "value: "
    assert stream.finish() == "abc"


def test_safe_end_cuts_before_a_token_or_the_start_of_a_known_value() -> None:
    redactor = Redactor(known_values=["correct horse battery staple"])
    assert redactor.safe_end("keep this AKIAIOSFOD") == len("keep this ")
    assert redactor.safe_end("whole lines only\n") == len("whole lines only\n")
    assert redactor.safe_end("the pass is correct hor") == len("the pass is ")
    assert redactor.safe_end("é" * 10) == 10


def test_finish_of_a_cut_stream_drops_what_may_be_half_a_secret() -> None:
    stream = StreamRedactor(Redactor())
    released = stream.feed("x " * 3000) + stream.flush()
    assert released + stream.finish("key AKIAIOSF", cut=True) == "x " * 3000 + "key "


def test_a_stream_releases_text_before_it_ends() -> None:
    stream = StreamRedactor(Redactor())
    released = stream.feed("clean line of output\n" * 1000)
    assert len(released) > 10_000
    assert released + stream.finish() == "clean line of output\n" * 1000
    assert not stream.redacted


def test_a_stream_without_blanks_is_bounded() -> None:
    stream = StreamRedactor(Redactor(), hold=64, max_pending=4096)
    released = sum(len(stream.feed("x" * 1000)) for _ in range(100))
    assert released >= 100_000 - 4096 - 1000
    assert len(stream.finish()) + released == 100_000
