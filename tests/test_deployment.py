"""The deployment files: the Dockerfile linted and its references checked, docker-compose.yml against the spec,
the Kubernetes manifests against the Kubernetes schemas and against what the server needs.

No Docker engine or cluster runs here, so the image is not built and the manifests are not applied in the
tests: everything around them is checked instead (hadolint, every file the Dockerfile copies, the versions it
pins, the settings it sets; the Compose specification and what Compose mounts; the Kubernetes schemas, and the
settings each container's environment gives the server, loaded and checked like the server would).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from toolhost_server.auth import check_exposure
from toolhost_server.config import SETTINGS, Config, load_config

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


# --- Kubernetes --------------------------------------------------------------------------------------------

K8S = ROOT / "deploy" / "k8s"


def k8s_documents(name: str) -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all((K8S / name).read_text())}


def toolhost_container(pod_spec: dict) -> dict:
    return next(c for c in [*pod_spec.get("initContainers", []), *pod_spec["containers"]] if c["name"] == "toolhost")


def container_config(container: dict) -> Config:
    """The server's Config from the container's environment; values from Secrets get a stand-in."""
    environ = {e["name"]: e.get("value", "from-a-secret") for e in container["env"]}
    environ["TOOLHOST_DATABASE_URL"] = environ.get("TOOLHOST_DATABASE_URL", "") and "postgresql://u:p@db/toolhost"
    return load_config(environ={k: v for k, v in environ.items() if k.startswith("TOOLHOST_")})


def test_the_manifests_are_valid_kubernetes_objects():
    done = subprocess.run([str(BIN / "kubernetes-validate"), "--strict", *map(str, sorted(K8S.glob("*.yaml")))],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed" in done.stdout + done.stderr


def test_the_sidecar_shares_a_trusted_socket_and_drains_before_it_is_killed(tmp_path):
    documents = k8s_documents("sidecar.yaml")
    pod = documents["Pod"]["spec"]
    sidecar = toolhost_container(pod)
    assert sidecar["restartPolicy"] == "Always"  # a native sidecar: an init container that keeps running
    config = container_config(sidecar)
    check_exposure(config)  # the server would start with these settings
    assert config.trusted_unix_socket and config.grpc_address.startswith("127.0.0.1:")
    socket_dir = str(Path(config.unix_socket).parent)
    app = next(c for c in pod["containers"] if c["name"] != "toolhost")
    app_target = next(e["value"] for e in app["env"] if e["name"] == "TOOLHOST_TARGET")
    assert app_target == f"unix://{config.unix_socket}"
    for container in (sidecar, app):
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert mounts[socket_dir] == "toolhost-socket"
    assert pod["terminationGracePeriodSeconds"] > config.shutdown_delay_seconds + config.shutdown_grace_seconds
    # The catalog ConfigMap is what the server reads, and it is a valid catalog.
    mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts[config.catalog_dirs[0]]["name"]]["configMap"]["name"] == "toolhost-catalog"
    for name, text in documents["ConfigMap"]["data"].items():
        (tmp_path / name).write_text(text)
    validated = subprocess.run([sys.executable, "-m", "toolhost_server.cli", "catalog", "validate", str(tmp_path)],
                               capture_output=True, text=True, timeout=60, check=False)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    # Credentials come from the Secret, as <name>.<key> files.
    assert volumes[mounts[config.credentials_dir]["name"]]["secret"]["secretName"] == "toolhost-credentials"
    assert all("." in key for key in documents["Secret"]["stringData"])


def test_the_standalone_service_is_headless_and_its_replicas_rebalance_and_authenticate():
    documents = k8s_documents("standalone.yaml")
    service, deployment = documents["Service"]["spec"], documents["Deployment"]["spec"]
    assert service["clusterIP"] == "None"
    assert service["selector"].items() <= deployment["template"]["metadata"]["labels"].items()
    pod = deployment["template"]["spec"]
    container = toolhost_container(pod)
    config = container_config(container)
    check_exposure(config)  # TLS and an auth file: the server accepts a non-loopback address
    assert config.grpc_address.startswith("0.0.0.0:") and config.tls_cert_file and config.auth_file
    assert config.max_connection_age_seconds > 0
    secrets = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    assert set(secrets) >= {"TOOLHOST_DATABASE_URL", "TOOLHOST_STORE_KEY"}  # never literal values
    assert pod["terminationGracePeriodSeconds"] > config.shutdown_delay_seconds + config.shutdown_grace_seconds


def test_every_toolhost_container_is_locked_down_and_probed_on_its_http_port():
    for name in ("sidecar.yaml", "standalone.yaml"):
        documents = k8s_documents(name)
        pod = (documents.get("Pod") or documents["Deployment"]["spec"]["template"])["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert {"name": "net.ipv4.ping_group_range", "value": "0 2147483647"} in pod["securityContext"]["sysctls"]
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
            assert {"requests", "limits"} <= set(container["resources"]), (name, container["name"])
        container = toolhost_container(pod)
        config = container_config(container)
        http_port = int(config.http_address.rpartition(":")[2])
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["http"] == http_port
        # Liveness on /healthz, which answers while the server drains: a draining pod is not killed early.
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert {"/tmp", config.data_dir} <= mounts  # writable places on a read-only root filesystem
        for variable in (e["name"] for e in container["env"]):
            assert variable.startswith("OTEL_") or variable in SETTING_VARIABLES, variable
