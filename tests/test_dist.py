"""The release artifacts, installed the way a project outside this repository installs them.

`make dist` builds the Python client's and the server's sdists and wheels and the TypeScript client's npm
tarball. Each is installed into a fresh virtualenv or Node project in a temporary directory (never the
repository, never its .venv or node_modules), and runs its README's example against a server that was itself
installed from the server's wheel. The Go client has no artifact: `go get` fetches the repository at the tag
clients/go/vX.Y.Z, so the test serves a copy of the repository at that tag and fetches it the same way.

The installs download from the package registries (pip's and npm's caches make repeats quick); a module-wide time
limit guards against a hang, it does not measure speed.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
GO_MODULE = "github.com/toolhost/toolhost/clients/go"
_LISTENING = re.compile(r"serving gRPC on 127\.0\.0\.1:(\d+)")

pytestmark = [pytest.mark.timeout(1800), pytest.mark.slow]


def run(argv: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command to completion; its stdout, or a failure that shows both streams."""
    result = subprocess.run([str(arg) for arg in argv], cwd=cwd, env=env, capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        pytest.fail(f"{' '.join(map(str, argv))} failed ({result.returncode}) in {cwd}:\n"
                    f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result.stdout


def outside_env(**extra: str) -> dict[str, str]:
    """The environment of an outside project: nothing that points into the repository."""
    env = {key: value for key, value in os.environ.items()
           if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"} and not key.startswith("TOOLHOST_")}
    env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep)
                                  if not part.startswith(str(ROOT)))
    return {**env, **extra}


def readme_example(readme: Path, language: str) -> str:
    """The first fenced block of `language` under the README's "## Example" heading."""
    text = readme.read_text()
    section = text.split("\n## Example", 1)[1].split("\n## ", 1)[0]
    found = re.search(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert found, f"{readme} has no ```{language} block under '## Example'"
    return found.group(1)


@dataclass
class Artifacts:
    directory: Path

    def one(self, pattern: str) -> Path:
        found = sorted(self.directory.glob(pattern))
        assert len(found) == 1, f"expected one {pattern} in {self.directory}, found {found}"
        return found[0]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Artifacts:
    directory = tmp_path_factory.mktemp("dist")
    # Not the calling make's flags (jobserver descriptors that pytest does not pass on, -k, -n).
    env = {key: value for key, value in os.environ.items() if key not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    run(["make", "--no-print-directory", "dist", f"DIST_DIR={directory}"], cwd=ROOT, env=env)
    return Artifacts(directory)


def new_venv(directory: Path) -> Path:
    run([sys.executable, "-m", "venv", directory], cwd=directory.parent)
    return directory / "bin"


def pip_install(bin_dir: Path, *requirements: str | Path) -> None:
    run([bin_dir / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
        cwd=bin_dir.parent, env=outside_env())


@dataclass
class InstalledServer:
    bin_dir: Path
    target: str


@pytest.fixture(scope="module")
def installed_server(artifacts: Artifacts, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InstalledServer]:
    """`toolhost serve` from a virtualenv holding only the two wheels and their dependencies (at the versions the
    tests pin, so that a registry's new release cannot turn this test red), started outside the repository."""
    home = tmp_path_factory.mktemp("server-venv")
    bin_dir = new_venv(home / "venv")
    pip_install(bin_dir, "-c", ROOT / "constraints.txt", artifacts.one("python/toolhost_client-*.whl"),
                artifacts.one("python/toolhost_server-*.whl"))
    env = outside_env(TOOLHOST_DATA_DIR=str(home / "data"), TOOLHOST_HTTP_ADDRESS="127.0.0.1:0")
    server = subprocess.Popen([bin_dir / "toolhost", "serve", "--grpc-address", "127.0.0.1:0"], cwd=home, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert server.stderr is not None
    log: list[str] = []
    port = None
    for line in server.stderr:
        log.append(line)
        found = _LISTENING.search(line)
        if found:
            port = found.group(1)
            break
    if port is None:
        server.wait()
        pytest.fail("the installed server exited before listening:\n" + "".join(log))
    # Keep reading its log, so that a full pipe never blocks it.
    threading.Thread(target=lambda: log.extend(server.stderr or ()), daemon=True).start()
    try:
        yield InstalledServer(bin_dir, f"127.0.0.1:{port}")
    finally:
        server.terminate()
        server.wait()


def test_the_artifacts_carry_the_release_names_and_version(artifacts: Artifacts) -> None:
    names = sorted(path.relative_to(artifacts.directory).as_posix() for path in artifacts.directory.rglob("*.*"))
    assert names == [
        f"npm/toolhost-client-{VERSION}.tgz",
        f"python/toolhost_client-{VERSION}-py3-none-any.whl",
        f"python/toolhost_client-{VERSION}.tar.gz",
        f"python/toolhost_server-{VERSION}-py3-none-any.whl",
        f"python/toolhost_server-{VERSION}.tar.gz",
    ]
    server = wheel_metadata(artifacts.one("python/toolhost_server-*.whl"))
    # The server needs its own client, not the unrelated "toolhost" of the package index.
    assert f"toolhost-client=={VERSION}" in server.get_all("Requires-Dist", [])
    with zipfile.ZipFile(artifacts.one("python/toolhost_server-*.whl")) as wheel:
        files = set(wheel.namelist())
    # Package data: the bundled catalog and the tools' definitions, which `make run` serves.
    assert "toolhost_server/catalog/examples/greet.yaml" in files
    assert "toolhost_server/tools/definitions/traceroute.yaml" in files

    # Every package carries the license its metadata names.
    license_text = (ROOT / "LICENSE").read_bytes()
    assert b"Apache License" in license_text[:200]
    for pattern in ("python/toolhost_client-*.whl", "python/toolhost_server-*.whl"):
        with zipfile.ZipFile(artifacts.one(pattern)) as wheel:
            licenses = [name for name in wheel.namelist() if name.endswith(".dist-info/licenses/LICENSE")]
            assert len(licenses) == 1, pattern
            assert wheel.read(licenses[0]) == license_text
        assert wheel_metadata(artifacts.one(pattern))["License-Expression"] == "Apache-2.0"
    for pattern in ("python/toolhost_client-*.tar.gz", "python/toolhost_server-*.tar.gz"):
        with tarfile.open(artifacts.one(pattern)) as sdist:
            member = next(name for name in sdist.getnames() if name.count("/") == 1 and name.endswith("/LICENSE"))
            extracted = sdist.extractfile(member)
            assert extracted is not None and extracted.read() == license_text
    with tarfile.open(artifacts.one("npm/toolhost-client-*.tgz")) as package:
        extracted = package.extractfile("package/LICENSE")
        assert extracted is not None and extracted.read() == license_text


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(item for item in archive.namelist() if item.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(archive.read(name).decode())


@pytest.mark.server
def test_python_client_wheel_runs_its_readme_example(installed_server: InstalledServer, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(readme_example(ROOT / "clients/python/README.md", "python"))
    where = run([installed_server.bin_dir / "python", "-c", "import toolhost; print(toolhost.__file__)"],
                cwd=tmp_path, env=outside_env())
    assert not where.startswith(str(ROOT)), where
    output = run([installed_server.bin_dir / "python", script], cwd=tmp_path,
                 env=outside_env(TOOLHOST_TARGET=installed_server.target))
    assert "True hello" in output, output
    assert "INVALID_ARGUMENTS" in output, output


@pytest.mark.server
def test_python_client_sdist_at_its_stated_dependency_floors(
        artifacts: Artifacts, installed_server: InstalledServer, tmp_path: Path) -> None:
    """The client's Requires-Dist floors are true: its sdist installed with each dependency at exactly its
    floor imports, and runs the README's example."""
    floors = {}
    for text in wheel_metadata(artifacts.one("python/toolhost_client-*.whl")).get_all("Requires-Dist", []):
        requirement = Requirement(text)
        lower = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        assert len(lower) == 1, f"the client's requirement {text!r} states no single floor to test"
        floors[requirement.name] = lower[0]
    assert set(floors) == {"grpcio", "grpcio-status", "protobuf"}
    bin_dir = new_venv(tmp_path / "venv")
    pip_install(bin_dir, artifacts.one("python/toolhost_client-*.tar.gz"),
                *(f"{name}=={version}" for name, version in floors.items()))
    installed = run([bin_dir / "python", "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                    cwd=tmp_path, env=outside_env())
    for name, version in floors.items():
        assert f"{name}=={version}" in installed.splitlines(), installed
    script = tmp_path / "example.py"
    script.write_text(readme_example(ROOT / "clients/python/README.md", "python"))
    output = run([bin_dir / "python", script], cwd=tmp_path, env=outside_env(TOOLHOST_TARGET=installed_server.target))
    assert "True hello" in output, output


@pytest.mark.server
def test_npm_tarball_in_a_fresh_node_project(
        artifacts: Artifacts, installed_server: InstalledServer, tmp_path: Path) -> None:
    project = tmp_path / "node-project"
    project.mkdir()
    (project / "package.json").write_text('{"name": "outside", "private": true, "type": "module"}\n')
    env = outside_env()
    run(["npm", "install", "--no-audit", "--no-fund", "--silent", artifacts.one("npm/toolhost-client-*.tgz")],
        cwd=project, env=env)
    example = readme_example(ROOT / "clients/ts/README.md", "js")
    assert example.count("127.0.0.1:50051") == 1, "the example names its target once"
    (project / "example.mjs").write_text(example.replace("127.0.0.1:50051", installed_server.target))
    output = run(["node", "example.mjs"], cwd=project, env=env)
    assert "hello" in output.splitlines(), output

    # The package's types resolve through its `exports` for a TypeScript project with Node's module resolution.
    (project / "check.ts").write_text(
        'import { createClient, type CallToolResponse } from "toolhost-client";\n'
        'const client = createClient("127.0.0.1:1");\n'
        'const pending: Promise<unknown> = client.callTool("echo", { text: "typed" });\n'
        'export const response: CallToolResponse | undefined = undefined;\n'
        'void pending.catch(() => undefined).finally(() => client.close());\n')
    tsc = ROOT / "clients/ts/node_modules/.bin/tsc"
    run([tsc, "--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext",
         "--target", "es2022", "--types", "node", "--typeRoots", ROOT / "clients/ts/node_modules/@types", "check.ts"],
        cwd=project, env=env)


@pytest.mark.server
def test_go_module_from_its_subdirectory_tag(installed_server: InstalledServer, tmp_path: Path) -> None:
    """`go get github.com/toolhost/toolhost/clients/go@vX.Y.Z` resolves the tag clients/go/vX.Y.Z of the
    repository. The repository here is a copy of this checkout's clients/go at that tag, reached through git's
    insteadOf; the module's dependencies come from the Go module proxy as for any user."""
    repository = tmp_path / "repository"
    files = run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "clients/go"], cwd=ROOT).split()
    for name in files:
        if (ROOT / name).is_file():
            (repository / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repository / name)
    git_env = outside_env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
                          GIT_COMMITTER_EMAIL="t@example.com")
    run(["git", "init", "--quiet", "--initial-branch", "main"], cwd=repository, env=git_env)
    run(["git", "add", "--all"], cwd=repository, env=git_env)
    run(["git", "commit", "--quiet", "--message", "release"], cwd=repository, env=git_env)
    run(["git", "tag", f"clients/go/v{VERSION}"], cwd=repository, env=git_env)

    project = tmp_path / "go-project"
    project.mkdir()
    example = readme_example(ROOT / "clients/go/README.md", "go")
    assert example.count("127.0.0.1:50051") == 1, "the example names its target once"
    (project / "main.go").write_text(example.replace("127.0.0.1:50051", installed_server.target))
    shared_cache = go_env_value("GOMODCACHE")
    go_env = outside_env(
        # toolhost's module straight from "GitHub", which insteadOf turns into the copy; no checksum database.
        GOPRIVATE="github.com/toolhost/*", GOFLAGS="-mod=mod", GIT_CONFIG_COUNT="1",
        GIT_CONFIG_KEY_0=f"url.file://{repository}.insteadOf", GIT_CONFIG_VALUE_0="https://github.com/toolhost/toolhost",
        # A module cache of its own, so that no other run's copy of this version is reused; the dependencies
        # come from the machine's cache when it has them (a module cache's download directory is a proxy).
        GOMODCACHE=str(tmp_path / "gomodcache"),
        GOPROXY=f"file://{shared_cache}/cache/download,{go_env_value('GOPROXY')}")
    try:
        run(["go", "mod", "init", "example.com/outside"], cwd=project, env=go_env)
        run(["go", "get", f"{GO_MODULE}@v{VERSION}"], cwd=project, env=go_env)
        assert f"{GO_MODULE} v{VERSION}" in (project / "go.mod").read_text()
        output = run(["go", "run", "."], cwd=project, env=go_env)
    finally:
        subprocess.run(["go", "clean", "-modcache"], cwd=project, env=go_env, check=False, capture_output=True)
    assert "true hello" in output, output


def go_env_value(name: str) -> str:
    return subprocess.run(["go", "env", name], capture_output=True, text=True, check=True).stdout.strip()
