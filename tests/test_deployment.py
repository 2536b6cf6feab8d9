"""The deployment files: the Dockerfile linted and its references checked, docker-compose.yml against the spec.

No Docker engine runs here, so the image is not built in the tests: everything around the build is checked
instead (hadolint, every file the Dockerfile copies, the versions it pins, the settings it sets), and the
Compose file is validated against the Compose specification with what it mounts checked to exist.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from toolhost_server.config import SETTINGS

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
BIN = Path(sys.executable).parent
SETTING_VARIABLES = {setting.env_var for setting in SETTINGS} | {"TOOLHOST_STORE_KEY", "TOOLHOST_CRED_"}


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, arguments = line.partition(" ")
            pairs.append((instruction.upper(), arguments.strip()))
    return pairs


def test_hadolint_finds_nothing():
    done = subprocess.run([str(BIN / "hadolint"), "--config", str(ROOT / ".hadolint.yaml"), str(DOCKERFILE)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_file_the_dockerfile_copies_exists_and_is_in_the_build_context():
    ignored = [line for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line and not line.startswith("#")]
    copied = []
    for instruction, arguments in dockerfile_instructions():
        if instruction == "COPY" and "--from=" not in arguments:
            copied += shlex.split(arguments)[:-1]
    assert copied, "the Dockerfile copies nothing from the context"
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
        assert not any(source == pattern or source.startswith(pattern + "/") for pattern in ignored), \
            f"COPY {source} is excluded by .dockerignore"


def test_the_image_is_non_root_with_a_healthcheck_and_the_pinned_probe():
    instructions = dockerfile_instructions()
    final_stage = instructions[max(i for i, (name, _) in enumerate(instructions) if name == "FROM"):]
    users = [arguments for name, arguments in final_stage if name == "USER"]
    assert users and not users[-1].startswith(("0", "root")), "the final stage must run as a non-root user"
    healthcheck = next(arguments for name, arguments in final_stage if name == "HEALTHCHECK")
    assert '"grpc-health-probe", "-addr", "127.0.0.1:50051"' in healthcheck
    # No build tools in the runtime image: only what runs there is installed.
    installs = " ".join(arguments for name, arguments in final_stage if name == "RUN")
    for tool in ("gcc", "build-essential", "golang", "git "):
        assert tool not in installs
    # The probe is the version the developer tools pin.
    pinned = re.search(r"github.com/grpc-ecosystem/grpc-health-probe (v[\d.]+)", (ROOT / "tools/go.mod").read_text())
    assert pinned is not None
    assert f"ARG GRPC_HEALTH_PROBE_VERSION={pinned.group(1)}" in DOCKERFILE.read_text()


def test_the_dockerfile_sets_only_real_settings():
    set_variables = re.findall(r"\b(TOOLHOST_[A-Z_]+)=", DOCKERFILE.read_text())
    assert set_variables
    for variable in set_variables:
        assert variable in SETTING_VARIABLES, f"{variable} is no setting of the server"


def test_docker_compose_is_valid_against_the_compose_specification():
    done = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_compose_mounts_what_exists_and_wires_traces_and_metrics():
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert set(services) >= {"toolhost", "otel-collector", "jaeger", "prometheus"}
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which does not exist"
    toolhost = services["toolhost"]
    environment = toolhost["environment"]
    for variable in environment:
        assert variable.startswith("OTEL_") or variable in SETTING_VARIABLES, variable
    # The example catalog is mounted where the server reads its catalog, so edits reload it.
    catalog_mount = next(v for v in toolhost["volumes"] if "catalog/examples" in v)
    assert catalog_mount.split(":")[1] == environment["TOOLHOST_CATALOG_DIRS"]
    collector_port = environment["OTEL_EXPORTER_OTLP_ENDPOINT"].rsplit(":", 1)[1]
    collector = yaml.safe_load((ROOT / "deploy/compose/otel-collector.yaml").read_text())
    assert collector["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].endswith(f":{collector_port}")
    assert collector["exporters"]["otlp/jaeger"]["endpoint"].startswith("jaeger:")
    prometheus = yaml.safe_load((ROOT / "deploy/compose/prometheus.yml").read_text())
    [job] = prometheus["scrape_configs"]
    http_port = re.search(r"TOOLHOST_HTTP_ADDRESS=0\.0\.0\.0:(\d+)", DOCKERFILE.read_text())
    assert http_port is not None
    assert job["static_configs"][0]["targets"] == [f"toolhost:{http_port.group(1)}"]
    assert job["metrics_path"] == "/metrics"
