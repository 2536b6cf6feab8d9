"""The release workflow (.github/workflows/release.yml): actionlint passes on every workflow, and the release rules
that actionlint cannot see hold: version tags only, `make dist` once, publishing through OIDC without stored tokens."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers.paths import REPO_ROOT, tool_binary

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yml"
# The job's own token, which expires with the run: the only credential a workflow may name.
JOB_TOKENS = {"${{ secrets.GITHUB_TOKEN }}", "${{ github.token }}"}
LONG_LIVED = ("NODE_AUTH_TOKEN", "NPM_TOKEN", "PYPI_TOKEN", "PYPI_API_TOKEN", "TWINE_PASSWORD", "TWINE_USERNAME")
SECRET_REFERENCE = re.compile(r"\bsecrets\s*(?:\.\s*([A-Za-z_][\w-]*)|\[\s*['\"]([^'\"]*)['\"]\s*\])")


def actionlint(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool_binary("actionlint"), "-no-color", *map(str, paths)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)


def load_release() -> dict[str, Any]:
    workflow: dict[Any, Any] = yaml.safe_load(RELEASE.read_text())
    # YAML 1.1 (PyYAML) reads the key `on` as the boolean true.
    if True in workflow:
        workflow["on"] = workflow.pop(True)
    return workflow


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    return load_release()


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job.get("steps", []))


def strings(node: Any) -> Iterator[str]:
    """Every key and scalar of a parsed YAML tree, as text."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)
    elif node is not None:
        yield str(node)


def mappings(node: Any) -> Iterator[dict[Any, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from mappings(value)
    elif isinstance(node, list):
        for item in node:
            yield from mappings(item)


def publish_jobs(workflow: dict[str, Any]) -> dict[str, str]:
    """Each registry published to, and the one job that does it (found by what the job does, not by its name)."""
    found: dict[str, list[str]] = {"pypi": [], "npm": [], "image": []}
    for name, job in workflow["jobs"].items():
        for step in steps(job):
            uses = step.get("uses", "")
            if uses.startswith("pypa/gh-action-pypi-publish@"):
                found["pypi"].append(name)
            if re.search(r"\bnpm\s+publish\b", step.get("run", "")):
                found["npm"].append(name)
            if uses.startswith("docker/build-push-action@") and step.get("with", {}).get("push") is True:
                found["image"].append(name)
    assert {kind: len(names) for kind, names in found.items()} == {"pypi": 1, "npm": 1, "image": 1}, found
    return {kind: names[0] for kind, names in found.items()}


def build_job(workflow: dict[str, Any]) -> str:
    """The one job that runs `make dist`."""
    names = [name for name, job in workflow["jobs"].items()
             if any(re.search(r"^\s*make dist\s*$", step.get("run", ""), re.MULTILINE) for step in steps(job))]
    assert len(names) == 1, f"exactly one job must run `make dist`, found {names}"
    return names[0]


def step_named(job: dict[str, Any], words: str) -> dict[str, Any]:
    matching = [step for step in steps(job) if words in step.get("name", "")]
    assert len(matching) == 1, f"one step named with {words!r} expected, found {len(matching)}"
    return matching[0]


def run_step(step: dict[str, Any], cwd: Path, tag: str) -> subprocess.CompletedProcess[str]:
    """A `run:` script as a GitHub runner runs it (bash -eo pipefail), with the step's env and the given tag."""
    env = {**os.environ, "TAG": tag}
    # tomllib needs Python 3.11, which this interpreter is; a runner gets it from setup-python.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_actionlint_passes_every_workflow():
    files = sorted(WORKFLOWS.glob("*.yml")) + sorted(WORKFLOWS.glob("*.yaml"))
    assert RELEASE in files
    result = actionlint(*files)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_actionlint_catches_a_broken_workflow(tmp_path):
    """So that the test above cannot pass by checking nothing."""
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\n"
        "permissions:\n"
        "  id-tokens: write\n"
        "jobs:\n"
        "  build:\n"
        "    runs-on: ubuntu-lates\n"
        "    steps:\n"
        "      - run: echo \"$REF\"\n"
        "        env:\n"
        "          REF: ${{ github.no_such_property }}\n")
    result = actionlint(broken)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'label "ubuntu-lates" is unknown' in result.stdout
    assert 'property "no_such_property" is not defined' in result.stdout
    assert '"id-tokens"' in result.stdout


def test_release_runs_on_version_tags_only(workflow):
    assert workflow["on"] == {"push": {"tags": ["v*.*.*"]}}


def test_no_long_lived_publish_credential(workflow):
    texts = list(strings(workflow))
    named = {match.group(1) or match.group(2) for text in texts for match in SECRET_REFERENCE.finditer(text)}
    assert named <= {"GITHUB_TOKEN"}, f"secrets other than the job's token: {named - {'GITHUB_TOKEN'}}"
    for word in LONG_LIVED:
        assert not [text for text in texts if word in text], f"{word} appears in the workflow"
    for mapping in mappings(workflow):
        for key in ("password", "token", "api-token"):
            if key in mapping:
                assert mapping[key] in JOB_TOKENS, f"{key}: {mapping[key]} is not the job's own token"


def test_registries_are_published_to_through_oidc(workflow):
    jobs = workflow["jobs"]
    publishers = publish_jobs(workflow)
    for kind, name in publishers.items():
        assert jobs[name].get("permissions", {}).get("id-token") == "write", f"{kind} job {name} lacks id-token: write"
        needs = jobs[name].get("needs", [])
        assert build_job(workflow) in ([needs] if isinstance(needs, str) else needs), f"{name} must need the build"

    pypi = jobs[publishers["pypi"]]
    assert pypi.get("environment"), "trusted publishing on PyPI is bound to a GitHub environment"
    (publish,) = [step for step in steps(pypi) if step.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert {"password", "user"}.isdisjoint(publish.get("with", {}))
    assert publish["with"]["packages-dir"].rstrip("/") == "dist/python"

    npm = jobs[publishers["npm"]]
    assert npm.get("environment")
    for step in steps(npm):
        # registry-url writes an .npmrc that authenticates with NODE_AUTH_TOKEN instead of OIDC.
        assert "registry-url" not in step.get("with", {}), step
    scripts = "\n".join(step.get("run", "") for step in steps(npm))
    assert re.search(r"npm install --global \"?npm@\^11\.5\.1\"?", scripts), "trusted publishing needs npm 11.5.1+"
    publish_line = next(line for line in scripts.splitlines() if re.search(r"\bnpm\s+publish\b", line))
    assert "--provenance" in publish_line and "dist/npm/" in publish_line

    image = jobs[publishers["image"]]
    uses = [step.get("uses", "") for step in steps(image)]
    assert any(action.startswith("sigstore/cosign-installer@") for action in uses)
    assert any(re.search(r"\bcosign sign --yes\b", step.get("run", "")) for step in steps(image))
    assert any(action.startswith("actions/attest-build-provenance@") for action in uses)


def test_permissions_are_least_privilege(workflow):
    assert workflow["permissions"] == {}, "the workflow grants nothing by default; jobs ask for what they need"
    publishers = set(publish_jobs(workflow).values())
    for name, job in workflow["jobs"].items():
        permissions = job.get("permissions")
        assert isinstance(permissions, dict), f"job {name} must list its permissions"
        assert permissions.get("contents", "read") == "read", f"job {name} must not write to the repository"
        if name not in publishers:
            assert "id-token" not in permissions, f"job {name} publishes nothing and needs no OIDC token"
            assert set(permissions.values()) <= {"read"}, f"job {name} publishes nothing and writes nothing"


def test_build_job_checks_versions_then_runs_make_dist_and_hands_dist_on(workflow):
    jobs = workflow["jobs"]
    build = jobs[build_job(workflow)]
    runs = [step.get("run", "") for step in steps(build)]
    make_dist = next(index for index, run in enumerate(runs) if re.search(r"^\s*make dist\s*$", run, re.MULTILINE))
    checks = "\n".join(runs[:make_dist])
    for manifest in ("pyproject.toml", "clients/python/pyproject.toml", "clients/ts/package.json", "clients/go/"):
        assert manifest in checks, f"the build checks {manifest} before `make dist`"

    (upload,) = [step for step in steps(build) if step.get("uses", "").startswith("actions/upload-artifact@")]
    artifact = upload["with"]["name"]
    assert upload["with"]["path"].rstrip("/") == "dist"
    publishers = publish_jobs(workflow)
    for kind in ("pypi", "npm"):
        downloads = [step for step in steps(jobs[publishers[kind]])
                     if step.get("uses", "").startswith("actions/download-artifact@")]
        assert [(step["with"]["name"], step["with"]["path"].rstrip("/")) for step in downloads] == [(artifact, "dist")]


def test_scripts_take_expressions_through_env(workflow):
    """An expression inside `run:` is pasted into the script before it runs (a tag name could inject commands)."""
    for name, job in workflow["jobs"].items():
        for step in steps(job):
            assert "${{" not in step.get("run", ""), f"job {name}, step {step.get('name')}: use env: instead"


def test_actions_are_pinned_at_full_commit_shas(workflow):
    for job in workflow["jobs"].values():
        for step in steps(job):
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
    for line in RELEASE.read_text().splitlines():
        if re.match(r"\s*(?:-\s+)?uses:", line):
            assert re.search(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), f"name the release after the SHA: {line}"


def test_version_check_accepts_the_manifests_version_only(workflow):
    step = step_named(workflow["jobs"][build_job(workflow)], "manifest")
    with open(REPO_ROOT / "pyproject.toml", "rb") as handle:
        version = tomllib.load(handle)["project"]["version"]

    result = run_step(step, REPO_ROOT, f"v{version}")
    assert (result.returncode, result.stdout + result.stderr) == (0, "")

    result = run_step(step, REPO_ROOT, "v999.0.0")
    assert result.returncode == 1
    for manifest in ("pyproject.toml", "clients/python/pyproject.toml", "clients/ts/package.json"):
        assert f"{manifest} says version {version} but the tag v999.0.0 releases 999.0.0" in result.stdout


def test_go_tag_check_wants_the_same_commit(workflow, tmp_path):
    step = step_named(workflow["jobs"][build_job(workflow)], "clients/go/")

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd=tmp_path,
                              check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "first")
    first = git("rev-parse", "HEAD")
    git("commit", "-q", "--allow-empty", "-m", "second")

    result = run_step(step, tmp_path, "v1.2.3")
    assert result.returncode == 1
    assert "git push origin clients/go/v1.2.3" in result.stdout

    git("tag", "clients/go/v1.2.3", first)
    result = run_step(step, tmp_path, "v1.2.3")
    assert result.returncode == 1
    assert f"clients/go/v1.2.3 tags {first}" in result.stdout

    git("tag", "-f", "-a", "-m", "Go client v1.2.3", "clients/go/v1.2.3", "HEAD")
    result = run_step(step, tmp_path, "v1.2.3")
    assert (result.returncode, result.stdout + result.stderr) == (0, "")
