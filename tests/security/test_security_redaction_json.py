"""The assignment rule's JSON form (`"token": 5` -> `"token": "[REDACTED]"`) as an attacker's lever: a value
that only starts like a JSON number, or hides behind brackets, escapes or a scheme word, must not get any of its
characters back; and a quoted value never lets a second pass or a stream split uncover what the first hid."""

from __future__ import annotations

import json

import pytest

from toolhost_server.sanitize import REDACTED, Redactor, StreamRedactor

SECRET = "Zq9xW2vLkP"


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


@pytest.mark.parametrize("text", [
    f'{{"token": 123{SECRET}}}',      # digits, then the secret: no JSON literal, hidden whole
    f'{{"token": 123}}{SECRET}}}',    # a bracket, then more: not only brackets follow
    f'{{"token": 123]{SECRET}',
    f'{{"token": 1e5{SECRET}}}',
    f'{{"token": 123\\{SECRET}}}',    # a backslash that is no \\n, \\r or \\t escape
    f'{{"token": 123\\n{SECRET}}}',   # an escape, then more
    f'{{"token": true{SECRET}}}',
    f'{{"token": nullx{SECRET}}}',
    f'{{"token": -{SECRET}}}',
    f'{{"token": 0{SECRET}}}',
    f'{{\\"token\\": 42{SECRET}}}',
    f'{{"token": Bearer 42{SECRET}}}',
    f'{{"token": token 42{SECRET}}}',
])
def test_a_value_that_only_starts_like_a_json_literal_is_hidden_whole(redactor: Redactor, text: str) -> None:
    redacted = redactor.redact_text(text).value
    assert SECRET not in redacted and "42" not in redacted.replace(REDACTED, ""), redacted
    assert '"[REDACTED]"' not in redacted  # no JSON string: the rule does not apply, the old one does


@pytest.mark.parametrize(("text", "expected"), [
    ('{"token": 12]]}}', '{"token": "[REDACTED]"]]}}'),  # only closing brackets are given back
    ('{\\"token\\": 12\\n}', '{\\"token\\": \\"[REDACTED]\\"\\n}'),  # and the escapes of JSON in a string
    ('{\\"token\\": 12\\r\\n\\t}', '{\\"token\\": \\"[REDACTED]\\"\\r\\n\\t}'),
])
def test_only_brackets_and_layout_escapes_follow_a_quoted_literal(redactor: Redactor, text: str,
                                                                   expected: str) -> None:
    assert redactor.redact_text(text).value == expected


@pytest.mark.parametrize("text", [
    '{"token": "[REDACTED]", "password": 5}',  # a marker already there does not shield the next key
    '{"token": [REDACTED], "password": 5}',
    '{"token": 5, "token": 6, "api_key": 7}',  # the same key twice, and another
])
def test_a_marker_or_a_repeated_key_shields_no_later_secret(redactor: Redactor, text: str) -> None:
    redacted = redactor.redact_text(text).value
    assert not any(digit in redacted for digit in "567"), redacted


@pytest.mark.parametrize(("text", "expected"), [
    ("{'token': 5}", f"{{'token': {REDACTED}}}"),              # a Python repr
    ("{token: 5}", f"{{token: {REDACTED}}}"),                  # a YAML flow map
    ("[{token: true}, {password: null}]", f"[{{token: {REDACTED}}}, {{password: {REDACTED}}}]"),
    ("{'api_key': -1.5e3, 'b': 2}", f"{{'api_key': {REDACTED}, 'b': 2}}"),
])
def test_a_literal_under_another_key_form_keeps_the_brackets_after_it(redactor: Redactor, text: str,
                                                                      expected: str) -> None:
    # Only the literal is replaced (no JSON string: the key is not a double-quoted JSON key), so that the mapping
    # still closes; it lost its closing bracket before.
    assert redactor.redact_text(text).value == expected


@pytest.mark.parametrize("text", [f"{{'token': 42{SECRET}}}", f"{{token: 42{SECRET}}}", f"{{token: 42}}{SECRET}"])
def test_a_value_under_another_key_form_that_only_starts_like_a_literal_is_hidden_whole(redactor: Redactor,
                                                                                        text: str) -> None:
    redacted = redactor.redact_text(text).value
    assert SECRET not in redacted and "42" not in redacted.replace(REDACTED, ""), redacted


def test_a_quote_that_does_not_open_the_key_gives_no_json_string(redactor: Redactor) -> None:
    # `x"token": 5` reads as a key to a person, not to the rule: the quote before the name must be the key's own.
    assert redactor.redact_text('x token": 5,').value == f'x token": {REDACTED},'
    assert redactor.redact_text("'token\": 5,").value == f"'token\": {REDACTED},"


def test_json_a_tool_floods_with_secret_keys_stays_linear_and_json(redactor: Redactor) -> None:
    document = {f"token_{i}": i for i in range(20_000)}
    redacted = redactor.redact_text(json.dumps(document)).value
    assert json.loads(redacted) == dict.fromkeys(document, REDACTED)


def test_a_stream_that_splits_inside_the_number_leaks_no_digit(redactor: Redactor) -> None:
    text = '{"token": 8675309123}\n'
    for split in range(1, len(text)):
        stream = StreamRedactor(redactor, hold=1)
        out = stream.feed(text[:split]) + stream.flush() + stream.feed(text[split:]) + stream.flush()
        out += stream.finish()
        assert not any(part in out for part in ("867", "309", "123")), (split, out)
        assert json.loads(out) == {"token": REDACTED}, (split, out)
