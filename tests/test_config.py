"""The `workspaces` setting (issue 18): the config file's list of mappings, TOOLHOST_WORKSPACES and the repeatable
--workspace flag, with their defaults and the mistakes they refuse. Other settings are tested in test_serve.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from toolhost_server.config import ConfigError, load_config
from toolhost_server.workspaces import DEFAULT_MAX_FILE_BYTES, Workspace


@pytest.fixture
def dirs(tmp_path):
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    return tmp_path


def test_no_workspace_by_default():
    assert load_config({}, {}).workspaces == ()


def test_config_file_takes_mappings_with_defaults(dirs):
    config_file = dirs / "toolhost.yaml"
    config_file.write_text(
        "workspaces:\n"
        f"  - {{name: one, path: {dirs / 'one'}/}}\n"
        f"  - {{name: two, path: {dirs / 'two'}, read_only: true, allow_bash: yes, max_file_bytes: 2048,"
        " owner: nobody}\n")
    assert load_config({}, {}, str(config_file)).workspaces == (
        Workspace("one", str(dirs / "one")),
        Workspace("two", str(dirs / "two"), read_only=True, allow_bash=True, max_file_bytes=2048, owner="nobody"),
    )
    assert Workspace("x", "/").max_file_bytes == DEFAULT_MAX_FILE_BYTES == 10 * 1024 * 1024


def test_environment_takes_colon_separated_name_equals_path(dirs, monkeypatch):
    monkeypatch.setenv("HOME", str(dirs))
    config = load_config({}, {"TOOLHOST_WORKSPACES": f"one={dirs / 'one'}:two=~/two"})
    assert config.workspaces == (Workspace("one", str(dirs / "one")), Workspace("two", str(dirs / "two")))
    assert config.workspaces[0].owner == ""  # the process user, resolved where files are made


def test_flags_win_over_the_environment_and_repeat(dirs):
    config = load_config({"workspaces": [f"two={dirs / 'two'}", f"one={dirs / 'one'}"]},
                         {"TOOLHOST_WORKSPACES": f"one={dirs / 'one'}"})
    assert [w.name for w in config.workspaces] == ["two", "one"]


@pytest.mark.parametrize(("value", "message"), [
    ("one", "entry 'one' must be name=path"),
    ("=/tmp", "name '' must be 1 to 64 letters"),
    ("bad name={one}", "name 'bad name' must be 1 to 64 letters"),
    ("{long}={one}", "must be 1 to 64 letters"),
    ("one={one}:one={two}", "two workspaces named 'one'"),
    ("one=relative/dir", "path 'relative/dir' must be absolute"),
    ("one={missing}", "is not an existing directory; create it first"),
    ("one={file}", "is not an existing directory"),
])
def test_environment_mistakes_name_the_variable_and_the_fix(dirs, value, message):
    (dirs / "file").write_text("")
    value = value.format(one=dirs / "one", two=dirs / "two", missing=dirs / "missing", file=dirs / "file",
                         long="w" * 65)
    with pytest.raises(ConfigError) as caught:
        load_config({}, {"TOOLHOST_WORKSPACES": value})
    assert str(caught.value).startswith("TOOLHOST_WORKSPACES=") and message in str(caught.value)


@pytest.mark.parametrize(("entry", "message"), [
    ("{name: one}", "needs a name and a path"),
    ("{name: one, path: ONE, colour: red}", "unknown keys colour"),
    ("{name: one, path: ONE, owner: no-such-user-here}", "names no user of this system"),
    ("{name: one, path: ONE, read_only: maybe}", "'one': must be true or false"),
    ("{name: one, path: ONE, max_file_bytes: 0}", "'one': must be greater than 0"),
    ("[one]", "must be a mapping with name and path"),
])
def test_config_file_mistakes_name_the_file_and_the_fix(dirs, entry, message):
    config_file = dirs / "toolhost.yaml"
    config_file.write_text(f"workspaces:\n  - {entry.replace('ONE', str(dirs / 'one'))}\n")
    with pytest.raises(ConfigError) as caught:
        load_config({}, {}, str(config_file))
    assert str(caught.value).startswith(f"{config_file}: workspaces=") and message in str(caught.value)


def test_serve_takes_a_repeatable_workspace_flag_and_refuses_a_missing_directory(dirs):
    result = subprocess.run(
        [sys.executable, "-m", "toolhost_server.cli", "serve", "--workspace", f"one={dirs / 'one'}",
         "--workspace", f"gone={dirs / 'gone'}"], env=os.environ, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "flag --workspaces=" in result.stderr and "'gone': path" in result.stderr, result.stderr
