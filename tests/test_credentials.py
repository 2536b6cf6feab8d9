"""Credentials: each source, the resolver's order, what is refused, what a call gets, and the CLI."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolhost.v1 import tool_service_pb2
from toolhost_server.config import Config
from toolhost_server.credentials import (
    CredentialResolver,
    CredentialSourceError,
    DatabaseCredentialSource,
    DirectoryCredentialSource,
    EnvironmentCredentialSource,
    InvalidCredentialError,
    ResolvedCredentials,
    check_credential_name,
    environment_variable,
)
from toolhost_server.errors import MissingCredentialsError
from toolhost_server.sanitize import Redactor
from toolhost_server.store.keys import STORE_KEY_ENV, generate_store_key_text

import helpers.cli
from helpers.paths import REPO_ROOT
from postgres_cluster import DATABASES

PASSWORD = "correct-horse-battery-staple"
USERNAME = "svc-automation"
DOMAIN = "corp.example.com"


def env_source(**values: str) -> EnvironmentCredentialSource:
    return EnvironmentCredentialSource(dict(values))


def write_files(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (directory / name).write_text(content)
    return directory


# --- names ---------------------------------------------------------------------------------------------


def test_credential_names_cannot_make_environment_variables_ambiguous():
    for good in ("winrm", "vcenter2", "a"):
        check_credential_name(good)
    # '_' and '-' would make TOOLHOST_CRED_AWS_PROD_SECRET both aws/prod_secret and aws-prod/secret.
    for bad in ("aws_prod", "aws-prod", "WinRM", "2fa", "", "x" * 33):
        with pytest.raises(InvalidCredentialError, match="not a credential name"):
            check_credential_name(bad)
    assert environment_variable("winrm", "api_key") == "TOOLHOST_CRED_WINRM_API_KEY"


# --- the environment -----------------------------------------------------------------------------------


def test_the_environment_source_reads_upper_case_variables_of_one_name():
    source = env_source(
        TOOLHOST_CRED_WINRM_USERNAME=USERNAME, TOOLHOST_CRED_WINRM_PASSWORD=PASSWORD,
        TOOLHOST_CRED_WINRM_API_KEY="winrm-api-key-123",
        TOOLHOST_CRED_WINRM2_PASSWORD="another-credential",     # another name that starts the same
        TOOLHOST_CRED_WINRM_lower="lower-case-is-not-a-key",    # not upper case: ignored
        TOOLHOST_CRED_WINRM_="no-key-at-all",                   # empty key: ignored
        WINRM_PASSWORD="not-a-toolhost-variable")
    assert source.is_available()
    assert source.lookup("winrm") == {"username": USERNAME, "password": PASSWORD, "api_key": "winrm-api-key-123"}
    assert source.lookup("winrm2") == {"password": "another-credential"}
    assert source.lookup("vcenter") is None


def test_the_environment_source_refuses_a_value_too_short_naming_the_variable_not_the_value():
    source = env_source(TOOLHOST_CRED_WINRM_PASSWORD=PASSWORD, TOOLHOST_CRED_WINRM_DOMAIN="CORP")
    with pytest.raises(CredentialSourceError) as caught:
        source.lookup("winrm")
    message = str(caught.value)
    assert "'winrm' key 'domain'" in message and "TOOLHOST_CRED_WINRM_DOMAIN" in message and "too short" in message
    assert "CORP" not in message


# --- the directory -------------------------------------------------------------------------------------


def test_the_directory_source_reads_name_dot_key_files(tmp_path: Path):
    directory = write_files(tmp_path / "secrets", {
        "winrm.password": PASSWORD + "\n",            # one trailing newline is dropped...
        "winrm.username": USERNAME + "\n\n",          # ... only one
        "winrm.domain": DOMAIN + "\r\n",
        "vcenter.api_key": "vcenter-api-key-1",
        "README": "not a credential", "WINRM.TOKEN": "upper-case-file-name", "winrm": "no key",
        "winrm.bad.key": "dotted key", ".winrm.hidden": "hidden file",
    })
    (directory / "winrm.subdir").mkdir()
    source = DirectoryCredentialSource(directory)
    assert source.is_available()
    assert source.lookup("winrm") == {"password": PASSWORD, "username": USERNAME + "\n", "domain": DOMAIN}
    assert source.lookup("vcenter") == {"api_key": "vcenter-api-key-1"}
    assert source.lookup("snmp") is None


def test_a_missing_directory_makes_the_source_unavailable(tmp_path: Path):
    availability = DirectoryCredentialSource(tmp_path / "absent").is_available()
    assert not availability and "does not exist" in availability.reason


def test_the_directory_source_refuses_short_values_naming_the_file(tmp_path: Path):
    directory = write_files(tmp_path / "secrets", {"winrm.password": PASSWORD, "winrm.domain": "CORP\n"})
    with pytest.raises(CredentialSourceError) as caught:
        DirectoryCredentialSource(directory).lookup("winrm")
    assert "winrm.domain" in str(caught.value) and "too short" in str(caught.value)
    assert "CORP" not in str(caught.value)


def kubernetes_secret_version(directory: Path, version: str, files: dict[str, str]) -> None:
    """Update a Secret volume the way the kubelet does: a new hidden directory, then an atomic swap of ..data."""
    write_files(directory / version, files)
    (directory / "..data_tmp").symlink_to(version)
    os.replace(directory / "..data_tmp", directory / "..data")
    for name in files:
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(Path("..data") / name)


def test_a_kubernetes_secret_update_applies_without_a_restart(tmp_path: Path):
    directory = tmp_path / "secret"
    directory.mkdir()
    kubernetes_secret_version(directory, "..2024_01_01_00_00_00.1", {
        "winrm.username": USERNAME, "winrm.password": "old-password-value"})
    source = DirectoryCredentialSource(directory)
    assert source.lookup("winrm") == {"username": USERNAME, "password": "old-password-value"}

    kubernetes_secret_version(directory, "..2024_01_02_00_00_00.2", {
        "winrm.username": USERNAME, "winrm.password": PASSWORD})
    assert source.lookup("winrm") == {"username": USERNAME, "password": PASSWORD}
    # The kubelet then removes the old version; nothing of it is read any more.
    for path in (directory / "..2024_01_01_00_00_00.1").iterdir():
        path.unlink()
    (directory / "..2024_01_01_00_00_00.1").rmdir()
    assert source.lookup("winrm") == {"username": USERNAME, "password": PASSWORD}


def test_a_lookup_reads_one_version_of_a_secret_even_when_the_visible_links_lag(tmp_path: Path):
    directory = tmp_path / "secret"
    directory.mkdir()
    kubernetes_secret_version(directory, "..v1", {"winrm.username": "first-user-name", "winrm.password": PASSWORD})
    # Mid-update: ..data already points at v2, which dropped `username` and added `domain`; the top-level links
    # still list v1's files. A lookup sees exactly v2.
    write_files(directory / "..v2", {"winrm.password": "second-password", "winrm.domain": DOMAIN})
    (directory / "..data_tmp").symlink_to("..v2")
    os.replace(directory / "..data_tmp", directory / "..data")
    assert DirectoryCredentialSource(directory).lookup("winrm") == {"password": "second-password", "domain": DOMAIN}


# --- the database --------------------------------------------------------------------------------------


@pytest.fixture(params=DATABASES)
def database_config(request: pytest.FixtureRequest, tmp_path: Path) -> Config:
    url = "" if request.param == "sqlite" else \
        request.getfixturevalue("postgres_url").render_as_string(hide_password=False)
    key_file = tmp_path / "store.key"
    key_file.write_text(generate_store_key_text())
    return dataclasses.replace(Config(), data_dir=str(tmp_path / "data"), database_url=url,
                               store_key_file=str(key_file))


def put_in_database(config: Config, name: str, values: dict[str, str]) -> None:
    from toolhost_server.store.cipher import ValueCipher
    from toolhost_server.store.credential_table import CredentialTable
    from toolhost_server.store.database import Store
    from toolhost_server.store.keys import require_store_key

    store = Store.from_config(config)
    table = CredentialTable(store, ValueCipher(require_store_key(config.store_key_file, {})))
    for key, value in values.items():
        table.put(name, key, value)
    store.close()


async def test_the_database_source_decrypts_stored_credentials(database_config: Config):
    put_in_database(database_config, "winrm", {"username": USERNAME, "password": PASSWORD})
    source = DatabaseCredentialSource.from_config(database_config, {})
    try:
        assert source.is_available()
        assert await source.lookup_async("winrm") == {"username": USERNAME, "password": PASSWORD}
        assert await source.lookup_async("vcenter") is None
    finally:
        source.close()


async def test_the_database_source_reports_a_wrong_key(database_config: Config):
    put_in_database(database_config, "winrm", {"password": PASSWORD})
    source = DatabaseCredentialSource.from_config(
        dataclasses.replace(database_config, store_key_file=""), {STORE_KEY_ENV: generate_store_key_text()})
    try:
        with pytest.raises(CredentialSourceError, match="does not match the key the value was written with"):
            await source.lookup_async("winrm")
    finally:
        source.close()


def test_without_a_store_key_the_database_is_neither_imported_nor_opened(tmp_path: Path):
    # A server whose tools need no database credentials starts without SQLAlchemy and creates no files.
    script = (
        "import asyncio, dataclasses, sys\n"
        "from toolhost_server.config import Config\n"
        "from toolhost_server.credentials import CredentialResolver\n"
        f"config = dataclasses.replace(Config(), data_dir={str(tmp_path / 'data')!r})\n"
        "resolver = CredentialResolver.from_config(config, {'TOOLHOST_CRED_WINRM_PASSWORD': 'from-the-environment'})\n"
        "creds = asyncio.run(resolver.resolve(['winrm']))\n"
        "print(creds['winrm']['password'], resolver.describe()[-1])\n"
        "store = ('sqlalchemy', 'toolhost_server.store.cipher', 'toolhost_server.store.database')\n"
        "assert not any(m.startswith(store) for m in sys.modules), 'the store was imported'\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                            env=helpers.cli.cli_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("from-the-environment database: unavailable: no store key")
    assert not (tmp_path / "data").exists()


# --- the resolver --------------------------------------------------------------------------------------


async def test_the_first_source_holding_a_name_supplies_all_its_keys(tmp_path: Path):
    database_config = dataclasses.replace(Config(), data_dir=str(tmp_path / "data"),
                                          store_key_file=str(write_key(tmp_path)))
    put_in_database(database_config, "winrm", {"password": "database-password", "username": "database-user"})
    put_in_database(database_config, "vcenter", {"password": "database-vcenter-pw"})
    put_in_database(database_config, "snmp", {"community": "database-community"})
    directory = write_files(tmp_path / "secrets", {"vcenter.password": "directory-vcenter-pw",
                                                   "snmp.community": "directory-community"})
    config = dataclasses.replace(database_config, credentials_dir=str(directory))
    resolver = CredentialResolver.from_config(config, {"TOOLHOST_CRED_SNMP_COMMUNITY": "environment-community"})
    try:
        assert [source.source for source in resolver.sources] == ["environment", "directory", "database"]
        creds = await resolver.resolve(["snmp", "vcenter", "winrm"])
        assert creds["snmp"]["community"] == "environment-community" and creds["snmp"].source == "environment"
        assert creds["vcenter"]["password"] == "directory-vcenter-pw" and creds.vcenter.source == "directory"
        assert creds.winrm.password == "database-password" and creds["winrm"].source == "database"
        # A credential comes whole from one source: the environment's winrm (password only) hides the database's.
        partial = CredentialResolver.from_config(config, {"TOOLHOST_CRED_WINRM_PASSWORD": "environment-password"})
        assert (await partial.resolve(["winrm"]))["winrm"].keys() == ("password",)
        partial.close()
    finally:
        resolver.close()


def write_key(tmp_path: Path) -> Path:
    key_file = tmp_path / "store.key"
    key_file.write_text(generate_store_key_text())
    return key_file


async def test_missing_credentials_are_all_named_with_why_and_no_value(tmp_path: Path):
    config = dataclasses.replace(Config(), data_dir=str(tmp_path / "data"), credentials_dir=str(tmp_path / "none"))
    resolver = CredentialResolver.from_config(config, {"TOOLHOST_CRED_WINRM_PASSWORD": PASSWORD})
    with pytest.raises(MissingCredentialsError) as caught:
        await resolver.resolve(["winrm", "vcenter", "snmp", "bad_name"])
    error = caught.value
    assert error.code == "MISSING_CREDENTIALS"
    assert error.names == ("vcenter", "snmp", "bad_name")
    assert "not found in environment" in error.problems["vcenter"]
    assert "directory skipped: credentials_dir" in error.problems["vcenter"]
    assert "database skipped: no store key" in error.problems["snmp"]
    assert "not a credential name" in error.problems["bad_name"]
    assert PASSWORD not in str(error) and "vcenter" in str(error)


async def test_a_failing_source_ends_the_search_for_that_name(tmp_path: Path):
    # The directory's winrm is unusable; the database's must not be used in its place.
    config = dataclasses.replace(Config(), data_dir=str(tmp_path / "data"), store_key_file=str(write_key(tmp_path)),
                                 credentials_dir=str(write_files(tmp_path / "secrets", {"winrm.password": "short"})))
    put_in_database(config, "winrm", {"password": PASSWORD})
    resolver = CredentialResolver.from_config(config, {})
    try:
        with pytest.raises(MissingCredentialsError) as caught:
            await resolver.resolve(["winrm"])
        assert caught.value.problems["winrm"].startswith("directory: credential 'winrm' key 'password'")
        assert "too short" in str(caught.value)
    finally:
        resolver.close()


async def test_no_declared_credentials_resolve_to_none():
    creds = await CredentialResolver([env_source()]).resolve([])
    assert not creds and creds.values() == () and creds.env() == {}


# --- what a call gets ----------------------------------------------------------------------------------


async def test_resolved_credentials_give_values_by_name_and_key_but_never_show_them():
    source = env_source(TOOLHOST_CRED_WINRM_USERNAME=USERNAME, TOOLHOST_CRED_WINRM_PASSWORD=PASSWORD,
                        TOOLHOST_CRED_VCENTER_API_KEY="vcenter-api-key-1")
    creds = await CredentialResolver([source]).resolve(["winrm", "vcenter", "winrm"])
    assert isinstance(creds, ResolvedCredentials) and creds.names() == ("winrm", "vcenter")
    assert creds["winrm"]["password"] == creds.winrm.password == PASSWORD
    assert creds["winrm"].get("domain") is None and "username" in creds["winrm"]
    assert sorted(creds.values()) == sorted([USERNAME, PASSWORD, "vcenter-api-key-1"])
    assert creds.env() == {"TOOL_CRED_WINRM_PASSWORD": PASSWORD, "TOOL_CRED_WINRM_USERNAME": USERNAME,
                           "TOOL_CRED_VCENTER_API_KEY": "vcenter-api-key-1"}
    shown = [repr(creds), str(creds), repr(creds["winrm"]), str(creds.winrm), f"{creds}", f"{creds.vcenter!r}"]
    for text in shown:
        assert PASSWORD not in text and USERNAME not in text and "vcenter-api-key-1" not in text
    assert "Credential('winrm' from environment, keys: password, username)" in repr(creds)
    with pytest.raises(KeyError) as missing_key:
        creds["winrm"]["domain"]
    with pytest.raises(AttributeError) as missing_name:
        _ = creds.snmp
    for error in (missing_key, missing_name):
        assert PASSWORD not in str(error.value)


async def test_the_redactor_hides_every_resolved_value():
    source = env_source(TOOLHOST_CRED_WINRM_USERNAME=USERNAME, TOOLHOST_CRED_WINRM_PASSWORD=PASSWORD)
    creds = await CredentialResolver([source]).resolve(["winrm"])
    redacted = Redactor().with_values(creds.values()).redact_text(f"connected as {USERNAME} with {PASSWORD}")
    assert redacted.redacted and USERNAME not in redacted.value and PASSWORD not in redacted.value


# --- the CLI -------------------------------------------------------------------------------------------


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return helpers.cli.cli_env(TOOLHOST_DATA_DIR=str(tmp_path / "data"), **extra)


def toolhost(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolhost_server.cli", "credentials", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, env=env, cwd=REPO_ROOT)


@pytest.mark.slow
def test_the_cli_sets_lists_and_deletes_credentials_never_showing_values(tmp_path: Path):
    key_file = tmp_path / "keys" / "store.key"
    key_file.parent.mkdir()
    generated = toolhost("generate-key", "--output", str(key_file), env=cli_env(tmp_path))
    assert generated.returncode == 0, generated.stderr
    assert key_file.stat().st_mode & 0o777 == 0o600
    env = cli_env(tmp_path, TOOLHOST_STORE_KEY_FILE=str(key_file))

    # The value goes in on stdin: the command line (what `ps` shows) never holds it.
    process = subprocess.Popen(
        [sys.executable, "-m", "toolhost_server.cli", "credentials", "set", "winrm", "password"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    command_line = _command_line_while_running(process.pid)
    out, err = process.communicate(PASSWORD + "\n", timeout=60)
    assert process.returncode == 0, err
    assert command_line and "winrm" in command_line and PASSWORD not in command_line
    assert "set winrm.password" in out and PASSWORD not in out + err
    assert toolhost("set", "winrm", "username", env=env, stdin=USERNAME).returncode == 0

    listed = toolhost("list", "--check", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[:2] for line in listed.stdout.splitlines()[1:]] == [["winrm", "password"],
                                                                             ["winrm", "username"]]
    assert PASSWORD not in listed.stdout and USERNAME not in listed.stdout and " ok" in listed.stdout

    short = toolhost("set", "winrm", "domain", env=env, stdin="CORP\n")
    assert short.returncode == 2 and "too short" in short.stderr and "CORP" not in short.stderr
    assert toolhost("set", "win_rm", "password", env=env, stdin=PASSWORD).returncode == 2

    # What the CLI stored is what the server resolves.
    config = dataclasses.replace(Config(), data_dir=str(tmp_path / "data"), store_key_file=str(key_file))
    source = DatabaseCredentialSource.from_config(config, {})
    assert source.lookup("winrm") == {"password": PASSWORD, "username": USERNAME}
    source.close()

    assert toolhost("delete", "winrm", "username", env=env).returncode == 0
    assert [line.split()[1] for line in toolhost("list", env=env).stdout.splitlines()[1:]] == ["password"]
    assert toolhost("delete", "winrm", env=env).returncode == 0
    assert toolhost("delete", "winrm", env=env).returncode == 1
    assert "no credentials in" in toolhost("list", env=env).stdout


def test_the_cli_says_how_to_fix_a_missing_or_wrong_key(tmp_path: Path):
    no_key = toolhost("set", "winrm", "password", env=cli_env(tmp_path), stdin=PASSWORD)
    assert no_key.returncode == 1 and "no store key" in no_key.stderr and "generate-key" in no_key.stderr
    env = cli_env(tmp_path, **{STORE_KEY_ENV: generate_store_key_text()})
    assert toolhost("set", "winrm", "password", env=env, stdin=PASSWORD).returncode == 0
    other = cli_env(tmp_path, **{STORE_KEY_ENV: generate_store_key_text()})
    checked = toolhost("list", "--check", env=other)
    assert checked.returncode == 1 and "does not match the key the value was written with" in checked.stdout
    assert toolhost("list", env=other).returncode == 0  # listing needs no key


def test_generate_key_prints_a_key_and_never_replaces_a_key_file(tmp_path: Path):
    printed = toolhost("generate-key", env=cli_env(tmp_path))
    assert printed.returncode == 0 and len(printed.stdout.strip()) == 44
    key_file = tmp_path / "store.key"
    key_file.write_text("the only key that opens the database")
    refused = toolhost("generate-key", "--output", str(key_file), env=cli_env(tmp_path))
    assert refused.returncode == 1 and "never replaced" in refused.stderr
    assert key_file.read_text() == "the only key that opens the database"


def _command_line_while_running(pid: int) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            text = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            return ""
        if "credentials" in text:
            return text
        time.sleep(0.01)
    return ""


async def test_the_server_hides_its_store_key_in_every_form_it_reads(start_server, tmp_path: Path):
    """The store key decrypts every stored credential: the server learns it at start, so that a tool printing it
    (echo, given it as an argument, stands for a log file or a file a tool reads) shows [REDACTED]."""
    key_file = write_key(tmp_path)
    secret = base64.b64decode(key_file.read_text())
    server = await start_server(data_dir=str(tmp_path / "data"), store_key_file=str(key_file))
    forms = (base64.b64encode(secret).decode(), base64.urlsafe_b64encode(secret).decode(), secret.hex())
    for form in forms:
        response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
            name="echo", arguments_json=json.dumps({"text": f"shown: {form} ."})))
        assert response.success and form not in response.output, response.output
        assert "[REDACTED]" in response.output
    # The control: another key of the same shape is echoed as it is.
    other = generate_store_key_text()
    response = await server.stub.CallTool(tool_service_pb2.CallToolRequest(
        name="echo", arguments_json=json.dumps({"text": f"other {other} ."})))
    assert other in response.output
