"""The `workspaces` setting (issue 18): the config file's list of mappings, TOOLHOST_WORKSPACES and the repeatable
--workspace flag, with their defaults and the mistakes they refuse; the `databases` setting (issue 21), merged per
name from the file, TOOLHOST_DATABASE_<NAME>_URL and --database; and where each value came from
(load_config_with_sources). Other settings are tested in test_serve.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from toolhost_server.config import Config, ConfigError, ConfigSources, load_config, load_config_with_sources
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


# --- databases ---------------------------------------------------------------------------------------------------

PASSWORD = "pw-never-shown-4242"


def test_no_database_by_default():
    assert load_config({}, {}).databases == ()


def test_databases_merge_per_name_file_then_environment_then_flags(tmp_path):
    config_file = tmp_path / "toolhost.yaml"
    config_file.write_text("databases:\n"
                           "  analytics: postgresql://reader:old@db-a:5432/analytics\n"
                           f"  local: sqlite:///{tmp_path}/local.db\n"
                           "  billing: postgresql+psycopg://reader@db-b/billing\n")
    config, sources = load_config_with_sources(
        {"databases": ["extra=sqlite:///extra.db", "billing=postgres://flagged@db-c/billing"]},
        {"TOOLHOST_DATABASE_ANALYTICS_URL": "postgresql://reader:new@db-a:5432/analytics",
         "TOOLHOST_DATABASE_URL": "postgresql://store@db/toolhost"}, str(config_file))
    assert config.databases == (
        ("analytics", "postgresql://reader:new@db-a:5432/analytics"),
        ("billing", "postgres://flagged@db-c/billing"),
        ("extra", "sqlite:///extra.db"),
        ("local", f"sqlite:///{tmp_path}/local.db"),
    )
    # TOOLHOST_DATABASE_URL is the store's own database_url, not a database named "url" nor "".
    assert config.database_url == "postgresql://store@db/toolhost"
    assert sources.of("databases.analytics") == "environment TOOLHOST_DATABASE_ANALYTICS_URL"
    assert sources.of("databases.billing") == "flag --database"
    assert sources.of("databases.local") == f"config file {config_file}"
    assert sources.of("databases") == (f"config file {config_file}; environment TOOLHOST_DATABASE_ANALYTICS_URL; "
                                       "flag --database")


def test_a_database_variable_name_is_lowercased():
    config = load_config({}, {"TOOLHOST_DATABASE_SALES_EU_URL": "sqlite:///sales.db"})
    assert config.databases == (("sales_eu", "sqlite:///sales.db"),)


@pytest.mark.parametrize(("variable", "url", "message"), [
    ("TOOLHOST_DATABASE_X_URL", f"mysql://u:{PASSWORD}@h/db", "mysql databases are not supported; write sqlite"),
    ("TOOLHOST_DATABASE_X_URL", f"postgresql+psycopg2://u:{PASSWORD}@h/db", "the driver 'psycopg2' is not installed"),
    ("TOOLHOST_DATABASE_X_URL", f"not a url {PASSWORD}", "not a database URL; write sqlite:///PATH or postgresql://"),
    ("TOOLHOST_DATABASE_X_URL", f"postgresql://u:{PASSWORD}@h:port/db", "not a database URL"),
    ("TOOLHOST_DATABASE_STORE_URL", f"postgresql://u:{PASSWORD}@h/db", "'store' is reserved for toolhost's own"),
    ("TOOLHOST_DATABASE_9LIVES_URL", f"postgresql://u:{PASSWORD}@h/db", "must be a lowercase letter then"),
])
def test_database_mistakes_name_the_variable_and_the_fix_but_never_the_url(variable, url, message):
    with pytest.raises(ConfigError) as caught:
        load_config({}, {variable: url})
    assert str(caught.value).startswith(f"{variable}: databases ") and message in str(caught.value)
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize(("flags", "message"), [
    ([f"analytics postgresql://u:{PASSWORD}@h/db"], "entries must be NAME=URL"),
    (["a=sqlite:///a.db", f"a=postgresql://u:{PASSWORD}@h/db"], "names the database 'a' twice"),
    ([f"Analytics=postgresql://u:{PASSWORD}@h/db"], "name 'Analytics' must be a lowercase letter"),
    (["a="], "'a': the URL is empty"),
])
def test_database_flag_mistakes(flags, message):
    with pytest.raises(ConfigError) as caught:
        load_config({"databases": flags}, {})
    assert str(caught.value).startswith("flag --database: databases ") and message in str(caught.value)
    assert PASSWORD not in str(caught.value)


def test_database_config_file_must_map_names_to_url_strings(tmp_path):
    config_file = tmp_path / "toolhost.yaml"
    config_file.write_text(f"databases: {{analytics: [postgresql://u:{PASSWORD}@h/db]}}\n")
    with pytest.raises(ConfigError) as caught:
        load_config({}, {}, str(config_file))
    assert "'analytics': the URL is empty" in str(caught.value) and PASSWORD not in str(caught.value)


def test_serve_takes_a_repeatable_database_flag(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "toolhost_server.cli", "serve", "--database", "good=sqlite:///a.db",
         "--database", f"bad=mysql://u:{PASSWORD}@h/db"], env=os.environ, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "flag --database: databases 'bad': mysql databases are not supported" in result.stderr, result.stderr
    assert PASSWORD not in result.stderr


# --- sources -----------------------------------------------------------------------------------------------------

def test_sources_name_the_flag_the_variable_the_file_or_the_default(tmp_path):
    config_file = tmp_path / "toolhost.yaml"
    config_file.write_text("log_level: DEBUG\nmax_hops: 3\n")
    config, sources = load_config_with_sources(
        {"max_hops": "5"}, {"TOOLHOST_LOG_LEVEL": "WARNING", "TOOLHOST_STORE_KEY": "a-key-value",
                            "AI_TOOL_CATALOG_DIRS": str(tmp_path)}, str(config_file))
    assert (config.log_level, config.max_hops) == ("WARNING", 5)
    assert sources.of("log_level") == "environment TOOLHOST_LOG_LEVEL"
    assert sources.of("max_hops") == "flag --max-hops"
    assert sources.of("catalog_dirs") == "environment AI_TOOL_CATALOG_DIRS"
    assert sources.of("grpc_address") == "default"
    # Whether the store key is set, never its value.
    assert sources.of("store_key") == "environment TOOLHOST_STORE_KEY"
    assert "a-key-value" not in repr(sources)
    config_file.write_text("grpc_address: 127.0.0.1:7\n")
    assert load_config_with_sources({}, {}, str(config_file))[1].of("grpc_address") == f"config file {config_file}"


def test_a_config_built_by_a_program_says_so_for_what_it_changed():
    sources = ConfigSources.of_program(Config(log_level="DEBUG", databases=(("a", "sqlite:///a.db"),)))
    assert sources.of("log_level") == "program" and sources.of("databases.a") == "program"
    assert sources.of("grpc_address") == "default"


def test_an_empty_http_address_turns_the_http_listener_off_from_any_source(tmp_path):
    # As its help text says: an empty variable is a value here, not "unset" (it was ignored, and the default
    # listener on 8010 kept serving).
    assert load_config({}, {}).http_address == "127.0.0.1:8010"
    assert load_config({}, {"TOOLHOST_HTTP_ADDRESS": ""}).http_address == ""
    assert load_config({"http_address": ""}, {}).http_address == ""
    config_file = tmp_path / "toolhost.yaml"
    config_file.write_text("http_address: ''\n")
    assert load_config({}, {}, str(config_file)).http_address == ""
