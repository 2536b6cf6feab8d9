"""tools/ensure-os-packages.sh: `make test` and `make bench` install the Debian packages they need, as root or by
`sudo -n`, or stop at once with the command to run. apt-get is replaced by a recording stand-in on PATH: the test
must not change the machine's packages, only show what the script would run and what it does with the result."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "ensure-os-packages.sh"

# A stand-in for apt-get: it records its arguments, and `install` creates the files named in $PROVIDES (what a
# real package would put on the machine) unless that is empty.
FAKE_APT_GET = """#!/bin/bash
echo "$*" >> "$APT_LOG"
if [[ $1 == install && -n $PROVIDES ]]; then touch $PROVIDES && chmod +x $PROVIDES; fi
"""


class Sandbox:
    """A directory readable by any user, with a package list, a bin directory for PATH and the apt-get log."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.bin = directory / "bin"
        self.bin.mkdir()
        self.list = directory / "os-packages.txt"
        self.apt_log = directory / "apt.log"
        # Only what the script itself runs, so that no sudo is on PATH.
        for program in ("bash", "dirname", "id", "touch", "chmod"):
            found = shutil.which(program)
            assert found, program
            (self.bin / program).symlink_to(found)

    def add_apt_get(self) -> None:
        apt_get = self.bin / "apt-get"
        apt_get.write_text(FAKE_APT_GET)
        apt_get.chmod(0o755)

    def run(self, purpose: str, provides: str = "", as_user: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {"PATH": str(self.bin), "TOOLHOST_OS_PACKAGES": str(self.list), "APT_LOG": str(self.apt_log),
               "PROVIDES": provides}
        return subprocess.run(["bash", str(SCRIPT), purpose], env=env, capture_output=True, text=True, check=False,
                              user=as_user, timeout=60)

    def apt_calls(self) -> list[str]:
        return self.apt_log.read_text().splitlines() if self.apt_log.exists() else []


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    # Not tmp_path: pytest makes it 0700 for root, and one test runs the script as another user.
    directory = Path(tempfile.mkdtemp(prefix="toolhost-os-packages-"))
    directory.chmod(0o755)
    try:
        yield Sandbox(directory)
    finally:
        shutil.rmtree(directory)


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("runs the script as root and as another user; CI runs as root")


def test_nothing_missing_installs_nothing(sandbox: Sandbox) -> None:
    present = sandbox.directory / "present"
    present.touch()
    sandbox.list.write_text(f"# a comment\ntest  {present}  some-package\ntest  bash  bash\n")
    sandbox.add_apt_get()
    result = sandbox.run("test")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert sandbox.apt_calls() == []


def test_root_installs_each_missing_package_once_and_only_for_its_purpose(sandbox: Sandbox) -> None:
    needs_root()
    first, second = sandbox.directory / "first", sandbox.directory / "second"
    sandbox.list.write_text(
        f"test   {first}                 pkg-one\n"
        f"test   {second}                pkg-one\n"       # two files of one package: installed once
        f"test   toolhost-no-such-program pkg-two\n"
        f"bench  {sandbox.directory}/h2   pkg-bench\n"     # another purpose's line is left alone
    )
    sandbox.add_apt_get()
    result = sandbox.run("test", provides=f"{first} {second} {sandbox.bin}/toolhost-no-such-program")
    assert result.returncode == 0, result.stderr
    assert sandbox.apt_calls() == ["update -qq", "install -y -qq --no-install-recommends pkg-one pkg-two"]
    assert f"make test needs {first} {second} toolhost-no-such-program" in result.stderr


def test_root_succeeds_when_the_packages_provide_what_was_missing(sandbox: Sandbox) -> None:
    needs_root()
    needed = sandbox.directory / "lib" / "initdb"
    needed.parent.mkdir()
    sandbox.list.write_text(f"test  {needed}  postgresql-like\n")
    sandbox.add_apt_get()
    result = sandbox.run("test", provides=str(needed))
    assert result.returncode == 0, result.stderr
    assert sandbox.apt_calls() == ["update -qq", "install -y -qq --no-install-recommends postgresql-like"]
    assert "installing the Debian packages postgresql-like" in result.stderr


def test_a_package_that_does_not_provide_the_file_is_an_error(sandbox: Sandbox) -> None:
    needs_root()
    sandbox.list.write_text(f"test  {sandbox.directory}/never  wrong-package\n")
    sandbox.add_apt_get()
    result = sandbox.run("test", provides="")
    assert result.returncode == 1
    assert f"{sandbox.directory}/never is still missing after installing wrong-package" in result.stderr


def test_without_root_or_sudo_it_stops_with_the_command_to_run(sandbox: Sandbox) -> None:
    needs_root()  # to become a user without rights
    sandbox.list.write_text("test  toolhost-no-such-program  pkg-one\ntest  /nonexistent/initdb  pkg-two\n")
    sandbox.add_apt_get()
    result = sandbox.run("test", as_user="nobody")
    assert result.returncode == 2
    assert "sudo apt-get update && sudo apt-get install -y --no-install-recommends pkg-one pkg-two" in result.stderr
    assert sandbox.apt_calls() == []


def test_without_apt_get_it_names_the_packages(sandbox: Sandbox) -> None:
    sandbox.list.write_text("bench  toolhost-no-such-program  nghttp2-client\n")
    result = sandbox.run("bench")
    assert result.returncode == 2
    assert "no apt-get; install the equivalent of the Debian packages nghttp2-client" in result.stderr


def test_the_shipped_list_is_well_formed_and_make_test_and_bench_use_it() -> None:
    lines = [line.split() for line in (ROOT / "tools" / "os-packages.txt").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert lines, "the list names no package"
    for fields in lines:
        assert len(fields) == 3 and fields[0] in {"test", "bench"}, fields
    assert os.access(SCRIPT, os.X_OK) and SCRIPT.stat().st_mode & stat.S_IXOTH
    for target in ("test", "bench"):
        plan = subprocess.run(["make", "-n", "-C", str(ROOT), target], capture_output=True, text=True, check=True,
                              timeout=60, env={**os.environ, "MAKEFLAGS": ""}).stdout
        assert f"tools/ensure-os-packages.sh {target}" in plan, plan
