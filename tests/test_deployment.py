"""The deployment files: the Dockerfile linted and its references checked, its health check run against real
servers, docker-compose.yml against the spec, the Kubernetes manifests against the Kubernetes schemas and
against what the server needs, and what each exposes beyond loopback against the server's exposure rules.

No Docker engine or cluster runs here, so the image is not built and the manifests are not applied in the
tests: everything around them is checked instead (hadolint, every file the Dockerfile copies, the versions it
pins, the settings it sets, the health check script; the Compose specification and what Compose mounts; the
Kubernetes schemas, every object a manifest names, the memory its settings let the server hold, and the
settings each container's environment gives the server, loaded and checked like the server would).
"""

from __future__ import annotations

import asyncio
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from toolhost_server.auth import UnsafeExposureError, check_exposure, is_loopback_host
from toolhost_server.auth.auth_file import read_auth_file
from toolhost_server.config import SETTINGS, Config, load_config
from toolhost_server.store.errors import StoreKeyError
from toolhost_server.store.keys import parse_store_key
from toolhost_server.tls_files import TlsFiles
from toolhost_server.web.metrics_token import load_metrics_token

from helpers.certificates import CertificateAuthority
from helpers.servers import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
HEALTHCHECK = ROOT / "deploy" / "docker" / "healthcheck.sh"
BIN = Path(sys.executable).parent
TOOLS_BIN = ROOT / ".tools" / "bin"
SETTING_VARIABLES = {setting.env_var for setting in SETTINGS} | {"TOOLHOST_STORE_KEY", "TOOLHOST_CRED_"}
MiB = 1024 * 1024


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


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    return instructions[max(i for i, (name, _) in enumerate(instructions) if name == "FROM"):]


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
            copied += [word for word in shlex.split(arguments)[:-1] if not word.startswith("--")]
    assert copied, "the Dockerfile copies nothing from the context"
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
        assert not any(source == pattern or source.startswith(pattern + "/") for pattern in ignored), \
            f"COPY {source} is excluded by .dockerignore"


def test_the_image_is_non_root_with_a_healthcheck_and_the_pinned_probe():
    stage = final_stage()
    users = [arguments for name, arguments in stage if name == "USER"]
    assert users and not users[-1].startswith(("0", "root")), "the final stage must run as a non-root user"
    # The health check is the script, installed executable on PATH, next to the probe it runs.
    healthcheck = next(arguments for name, arguments in stage if name == "HEALTHCHECK")
    assert healthcheck.endswith('CMD ["healthcheck"]')
    copies = [shlex.split(arguments) for name, arguments in stage if name == "COPY"]
    assert ["--chmod=0755", str(HEALTHCHECK.relative_to(ROOT)), "/usr/local/bin/healthcheck"] in copies
    assert any(words[-1] == "/usr/local/bin/grpc-health-probe" for words in copies)
    # No build tools in the runtime image: only what runs there is installed.
    installs = " ".join(arguments for name, arguments in stage if name == "RUN")
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


def image_environment() -> dict[str, str]:
    """The TOOLHOST_* variables the image's ENV sets."""
    variables = {}
    for instruction, arguments in final_stage():
        if instruction == "ENV":
            for word in shlex.split(arguments):
                name, _, value = word.partition("=")
                variables[name] = value
    return {name: value for name, value in variables.items() if name.startswith("TOOLHOST_")}


def test_the_image_listens_beyond_loopback_only_when_protected():
    image = image_environment()
    assert image["TOOLHOST_GRPC_ADDRESS"].startswith("0.0.0.0:")
    assert image["TOOLHOST_HTTP_ADDRESS"].startswith("0.0.0.0:")
    protected = {"TOOLHOST_TLS_CERT_FILE": "/tls/tls.crt", "TOOLHOST_TLS_KEY_FILE": "/tls/tls.key",
                 "TOOLHOST_AUTH_FILE": "/auth/auth.yaml"}
    with pytest.raises(UnsafeExposureError):
        check_exposure(load_config(environ=image))
    # gRPC's protection is not HTTP's: its auth file tells gRPC callers apart, and /metrics would answer anyone.
    with pytest.raises(UnsafeExposureError, match="http_address"):
        check_exposure(load_config(environ={**image, **protected}))
    for environment in ({**protected, "TOOLHOST_METRICS_TOKEN_FILE": "/metrics/token"},
                        {**protected, "TOOLHOST_TLS_CLIENT_CA_FILE": "/tls/ca.crt"},
                        {"TOOLHOST_INSECURE": "true"}):
        check_exposure(load_config(environ={**image, **environment}))


# --- The health check script, run against real servers --------------------------------------------------------

async def healthcheck(environment: Mapping[str, str], *arguments: str) -> int:
    """The exit status of the image's health check, run by the image's shell (dash) with the given TOOLHOST_*
    variables, the pinned grpc-health-probe on PATH and nothing else of this process's environment."""
    process = await asyncio.create_subprocess_exec(
        "/bin/sh", str(HEALTHCHECK), *arguments, env={"PATH": f"{TOOLS_BIN}:/usr/bin:/bin", **environment},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    return await process.wait()


@pytest.mark.server
@pytest.mark.slow
async def test_the_healthcheck_passes_on_a_serving_server_and_fails_on_a_draining_or_stopped_one():
    server = ServerProcess(env={"TOOLHOST_SHUTDOWN_DELAY_SECONDS": "60"})
    port = await server.start()
    address = {"TOOLHOST_GRPC_ADDRESS": f"127.0.0.1:{port}"}
    try:
        assert await healthcheck(address) == 0
        assert await healthcheck(address, "--live") == 0
        # The image's address, every interface, is probed on loopback.
        assert await healthcheck({"TOOLHOST_GRPC_ADDRESS": f"0.0.0.0:{port}"}) == 0
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        # Logged in the step of the server's event loop that turns health NOT_SERVING: no probe comes between.
        await server.wait_for_log(rb"health is NOT_SERVING")
        assert await healthcheck(address) == 4  # NOT_SERVING: not ready
        assert await healthcheck(address, "--live") == 0  # but alive: a liveness probe lets it drain
    finally:
        await server.stop()
    assert await healthcheck(address) == 2  # nobody listens
    assert await healthcheck(address, "--live") == 2


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("pki"))


@pytest.mark.server
@pytest.mark.slow
async def test_the_healthcheck_speaks_tls_when_the_server_does(certificates):
    # Signed by a CA the probe does not trust, like a cluster's own CA: it passes because it does not verify.
    server_pair = certificates.issue_server("tls-server")
    tls = {"TOOLHOST_TLS_CERT_FILE": str(server_pair.certificate), "TOOLHOST_TLS_KEY_FILE": str(server_pair.key)}
    server = ServerProcess(env=tls)
    port = await server.start()
    try:
        address = {"TOOLHOST_GRPC_ADDRESS": f"127.0.0.1:{port}"}
        assert await healthcheck({**address, **tls}) == 0
        assert await healthcheck(address) != 0  # plaintext to a TLS server: the TLS flags are what made it pass
    finally:
        await server.stop()


@pytest.mark.server
@pytest.mark.slow
async def test_with_client_certificates_required_the_healthcheck_uses_the_unix_socket_or_a_given_certificate(
        certificates):
    server_pair = certificates.issue_server("mtls-server")
    client_pair = certificates.issue_client("probe", "probe")
    tls = {"TOOLHOST_TLS_CERT_FILE": str(server_pair.certificate), "TOOLHOST_TLS_KEY_FILE": str(server_pair.key),
           "TOOLHOST_TLS_CLIENT_CA_FILE": str(certificates.certificate)}
    server = ServerProcess(env=tls)
    # In the data directory: a short path (a unix socket path has ~100 bytes at most), gone with the server.
    socket = {"TOOLHOST_UNIX_SOCKET": str(Path(server.data_dir) / "toolhost.sock")}
    server.env.update(socket)
    port = await server.start()
    try:
        address = {"TOOLHOST_GRPC_ADDRESS": f"127.0.0.1:{port}"}
        assert await healthcheck({**address, **tls, **socket}) == 0
        assert await healthcheck({**address, **tls}) != 0  # TCP without a client certificate: refused
        assert await healthcheck({**address, **tls}, "-tls-client-cert", str(client_pair.certificate),
                                 "-tls-client-key", str(client_pair.key)) == 0
    finally:
        await server.stop()


# --- Compose --------------------------------------------------------------------------------------------------

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
    # No TLS or tokens on Compose's private network, said explicitly (the server refuses otherwise), and nothing
    # published beyond the host's loopback.
    settings = {name: value for name, value in environment.items() if name.startswith("TOOLHOST_")}
    check_exposure(load_config(environ={**image_environment(), **settings}))
    assert settings["TOOLHOST_INSECURE"] == "true"
    assert all(port.startswith("127.0.0.1:") for service in services.values() for port in service.get("ports", []))
    # The example catalog is mounted where the server reads its catalog, so edits reload it.
    catalog_mount = next(v for v in toolhost["volumes"] if "catalog/examples" in v)
    assert catalog_mount.split(":")[1] == environment["TOOLHOST_CATALOG_DIRS"]
    collector_port = environment["OTEL_EXPORTER_OTLP_ENDPOINT"].rsplit(":", 1)[1]
    collector = yaml.safe_load((ROOT / "deploy/compose/otel-collector.yaml").read_text())
    assert collector["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].endswith(f":{collector_port}")
    # Jaeger v2 takes OTLP itself (v1's all-in-one needed COLLECTOR_OTLP_ENABLED), on every interface.
    jaeger = services["jaeger"]
    assert re.fullmatch(r"jaegertracing/jaeger:2\.\d+\.\d+", jaeger["image"]), jaeger["image"]
    assert jaeger["environment"] == {"JAEGER_LISTEN_HOST": "0.0.0.0"}
    exporter = collector["exporters"]["otlp/jaeger"]
    assert exporter["endpoint"] == "jaeger:4317" and exporter["tls"] == {"insecure": True}
    assert collector["service"]["pipelines"]["traces"]["exporters"] == ["otlp/jaeger"]
    prometheus = yaml.safe_load((ROOT / "deploy/compose/prometheus.yml").read_text())
    [job] = prometheus["scrape_configs"]
    http_port = re.search(r"TOOLHOST_HTTP_ADDRESS=0\.0\.0\.0:(\d+)", DOCKERFILE.read_text())
    assert http_port is not None
    assert job["static_configs"][0]["targets"] == [f"toolhost:{http_port.group(1)}"]
    assert job["metrics_path"] == "/metrics"


# --- Kubernetes --------------------------------------------------------------------------------------------

K8S = ROOT / "deploy" / "k8s"
KUSTOMIZATION = K8S / "kustomization.yaml"
SIDECAR, STANDALONE, NETWORK_POLICY = K8S / "sidecar.yaml", K8S / "standalone.yaml", K8S / "networkpolicy.yaml"
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
Shipped = Mapping[tuple[str, str], dict[str, Any]]  # objects by (kind, name)


def manifests() -> list[Path]:
    """Every Kubernetes manifest shipped (the kustomization is kustomize's, not the cluster's)."""
    return sorted(path for path in K8S.glob("*.yaml") if path != KUSTOMIZATION)


def documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def the(path: Path, kind: str) -> dict[str, Any]:
    [document] = [d for d in documents(path) if d["kind"] == kind]
    return document


def generated_objects() -> list[dict[str, Any]]:
    """The ConfigMaps and Secrets kustomization.yaml generates, as kustomize makes them (but for the hash that
    it appends to some names, and writes into the references too)."""
    kustomization = yaml.safe_load(KUSTOMIZATION.read_text())
    objects = []
    for kind, generators in (("ConfigMap", "configMapGenerator"), ("Secret", "secretGenerator")):
        for generator in kustomization.get(generators, []):
            data: dict[str, str] = {}
            for source in generator.get("files", []):
                key, _, file = source.rpartition("=")  # "key=path", or "path" for the file's own name
                data[key or Path(file).name] = (K8S / file).read_text()
            for env_file in generator.get("envs", []):
                for line in (K8S / env_file).read_text().splitlines():
                    if line.strip() and not line.startswith("#"):
                        key, _, value = line.partition("=")
                        data[key] = value
            for literal in generator.get("literals", []):
                key, _, value = literal.partition("=")
                data[key] = value
            made: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": {"name": generator["name"]},
                                    "data" if kind == "ConfigMap" else "stringData": data}
            if "type" in generator:
                made["type"] = generator["type"]
            objects.append(made)
    return objects


def shipped_with(path: Path) -> Shipped:
    """The objects applied together with the manifest at `path`, by (kind, name): its own, and for a resource of
    kustomization.yaml, those of every other resource and the generated ones."""
    together = documents(path)
    kustomization = yaml.safe_load(KUSTOMIZATION.read_text())
    if path.name in kustomization["resources"]:
        together = [d for resource in kustomization["resources"] for d in documents(K8S / resource)]
        together += generated_objects()
    return {(d["kind"], d["metadata"]["name"]): d for d in together}


def object_data(shipped: dict[str, Any]) -> dict[str, str]:
    return {**shipped.get("data", {}), **shipped.get("stringData", {})}


def pod_specs(path: Path) -> Iterator[dict[str, Any]]:
    for document in documents(path):
        if document["kind"] == "Pod":
            yield document["spec"]
        elif document["kind"] in WORKLOADS:
            yield document["spec"]["template"]["spec"]


def all_containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod_spec.get("initContainers", []), *pod_spec["containers"]]


def toolhost_container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in all_containers(pod_spec) if c["name"] == "toolhost")


def references(pod_spec: dict[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """(kind, name, key or None) of every ConfigMap, Secret and ServiceAccount the pod needs."""
    yield "ServiceAccount", pod_spec.get("serviceAccountName", "default"), None
    for volume in pod_spec.get("volumes", []):
        sources = [volume, *volume.get("projected", {}).get("sources", [])]
        for source in sources:
            if "configMap" in source:
                yield "ConfigMap", source["configMap"]["name"], None
            if "secret" in source:
                yield "Secret", source["secret"].get("secretName") or source["secret"]["name"], None
    for container in all_containers(pod_spec):
        for variable in container.get("env", []):
            reference = variable.get("valueFrom", {})
            if "secretKeyRef" in reference:
                yield "Secret", reference["secretKeyRef"]["name"], reference["secretKeyRef"]["key"]
            if "configMapKeyRef" in reference:
                yield "ConfigMap", reference["configMapKeyRef"]["name"], reference["configMapKeyRef"]["key"]
        for source in container.get("envFrom", []):
            if "secretRef" in source:
                yield "Secret", source["secretRef"]["name"], None
            if "configMapRef" in source:
                yield "ConfigMap", source["configMapRef"]["name"], None


def container_environment(container: dict[str, Any], shipped: Shipped) -> dict[str, str]:
    """The container's TOOLHOST_* variables, those from Secrets and ConfigMaps read from the shipped objects."""
    environ = {}
    for variable in container["env"]:
        if "value" in variable:
            environ[variable["name"]] = variable["value"]
        else:
            [(kind, reference)] = variable["valueFrom"].items()
            kind = "Secret" if kind == "secretKeyRef" else "ConfigMap"
            environ[variable["name"]] = object_data(shipped[kind, reference["name"]])[reference["key"]]
    return {name: value for name, value in environ.items() if name.startswith("TOOLHOST_")}


def container_config(container: dict[str, Any], shipped: Shipped) -> Config:
    """The server's Config from the container's environment, as the server would load it."""
    return load_config(environ=container_environment(container, shipped))


def mounted_file(pod_spec: dict[str, Any], container: dict[str, Any], path: str, shipped: Shipped) -> str:
    """The text of the file at `path` in the container: a key of the ConfigMap or Secret mounted there."""
    directory, _, key = path.rpartition("/")
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert directory in mounts, f"nothing is mounted at {directory} for {path}"
    volume = next(v for v in pod_spec["volumes"] if v["name"] == mounts[directory])
    source = ("ConfigMap", volume["configMap"]["name"]) if "configMap" in volume \
        else ("Secret", volume["secret"]["secretName"])
    data = object_data(shipped[source])
    assert key in data, f"{path}: {source[0]} {source[1]} has no key {key}"
    return data[key]


def test_the_manifests_are_valid_kubernetes_objects(tmp_path):
    generated = tmp_path / "generated.yaml"
    generated.write_text(yaml.safe_dump_all(generated_objects()))
    done = subprocess.run([str(BIN / "kubernetes-validate"), "--strict", *map(str, manifests()), str(generated)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed" in done.stdout + done.stderr
    assert {SIDECAR, STANDALONE, NETWORK_POLICY} <= set(manifests())


def test_every_configmap_secret_and_service_account_a_manifest_names_is_shipped():
    kustomization = yaml.safe_load(KUSTOMIZATION.read_text())
    assert set(kustomization["resources"]) <= {path.name for path in manifests()}
    named = 0
    for path in manifests():
        shipped = shipped_with(path)
        for pod_spec in pod_specs(path):
            for kind, name, key in references(pod_spec):
                named += 1
                assert (kind, name) in shipped, f"{path.name} names {kind} {name}, which nothing shipped makes"
                if key is not None:
                    assert key in object_data(shipped[kind, name]), f"{path.name}: {kind} {name} has no key {key}"
            # Every file a setting names is a key of what is mounted where it points.
            container = toolhost_container(pod_spec)
            config = container_config(container, shipped)
            for file in (config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file, config.auth_file,
                         config.store_key_file, config.metrics_token_file):
                if file:
                    mounted_file(pod_spec, container, file, shipped)
    assert named >= 8


def test_the_sidecar_shares_a_trusted_socket_and_drains_before_it_is_killed(tmp_path):
    shipped = shipped_with(SIDECAR)
    [pod] = pod_specs(SIDECAR)
    sidecar = toolhost_container(pod)
    assert sidecar["restartPolicy"] == "Always"  # a native sidecar: an init container that keeps running
    config = container_config(sidecar, shipped)
    check_exposure(config)  # the server would start with these settings
    assert config.trusted_unix_socket and config.grpc_address.startswith("127.0.0.1:")
    # No TLS in this Pod: HTTP (/metrics names every tool) stays on its loopback too.
    assert not config.tls_cert_file and is_loopback_host(config.http_address.rpartition(":")[0])
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
    assert_valid_catalog(object_data(shipped["ConfigMap", "toolhost-catalog"]), tmp_path)
    # Credentials come from the Secret, as <name>.<key> files.
    assert volumes[mounts[config.credentials_dir]["name"]]["secret"]["secretName"] == "toolhost-credentials"
    assert all("." in key for key in object_data(shipped["Secret", "toolhost-credentials"]))


def assert_valid_catalog(files: Mapping[str, str], directory: Path) -> None:
    for name, text in files.items():
        (directory / name).write_text(text)
    validated = subprocess.run([sys.executable, "-m", "toolhost_server.cli", "catalog", "validate", str(directory)],
                               capture_output=True, text=True, timeout=60, check=False)
    assert validated.returncode == 0, validated.stdout + validated.stderr


def test_the_standalone_service_is_headless_and_its_replicas_rebalance_and_authenticate():
    shipped = shipped_with(STANDALONE)
    service, deployment = the(STANDALONE, "Service")["spec"], the(STANDALONE, "Deployment")["spec"]
    assert service["clusterIP"] == "None"
    assert service["selector"].items() <= deployment["template"]["metadata"]["labels"].items()
    pod = deployment["template"]["spec"]
    container = toolhost_container(pod)
    config = container_config(container, shipped)
    check_exposure(config)  # TLS, an auth file and a metrics token: the server accepts non-loopback addresses
    assert config.grpc_address.startswith("0.0.0.0:") and config.tls_cert_file and config.auth_file
    assert config.http_address.startswith("0.0.0.0:") and config.metrics_token_file and not config.insecure
    # Nothing invites a scrape without the token: the annotation-driven jobs send none.
    assert not any(key.startswith("prometheus.io/")
                   for key in deployment["template"]["metadata"].get("annotations", {}))
    assert config.database_url.startswith("postgresql://")
    assert config.max_connection_age_seconds > 0
    secrets = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    assert set(secrets) >= {"TOOLHOST_DATABASE_URL", "TOOLHOST_STORE_KEY"}  # never literal values
    assert pod["terminationGracePeriodSeconds"] > config.shutdown_delay_seconds + config.shutdown_grace_seconds


SERVICE_MONITOR = K8S / "servicemonitor.yaml"


def test_the_service_monitor_scrapes_every_replica_over_https_with_the_metrics_token():
    kustomization = yaml.safe_load(KUSTOMIZATION.read_text())
    assert SERVICE_MONITOR.name not in kustomization["resources"]  # its kind exists only with the operator
    monitor = the(SERVICE_MONITOR, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    shipped = shipped_with(STANDALONE)
    service = the(STANDALONE, "Service")
    [pod] = pod_specs(STANDALONE)
    container = toolhost_container(pod)
    config = container_config(container, shipped)
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # The Service's http port, which is the server's http_address.
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    [endpoint] = monitor["spec"]["endpoints"]
    service_port = next(p for p in service["spec"]["ports"] if p["name"] == endpoint["port"])
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container_ports[service_port["targetPort"]] == int(config.http_address.rpartition(":")[2])
    assert endpoint["path"] == "/metrics" and endpoint["scheme"] == "https" and config.tls_cert_file
    # The token Prometheus sends is the one the server reads: the same key of the same Secret.
    assert endpoint["authorization"]["type"] == "Bearer"
    credentials = endpoint["authorization"]["credentials"]
    token_dir, _, token_key = config.metrics_token_file.rpartition("/")
    assert (volumes[mounts[token_dir]]["secret"]["secretName"], token_key) == (credentials["name"], credentials["key"])
    # Verified, with the CA in the Secret of the server's certificate, under the name that certificate is for.
    tls = endpoint["tlsConfig"]
    ca = tls["ca"]["secret"]
    assert volumes[mounts[config.tls_cert_file.rpartition("/")[0]]]["secret"]["secretName"] == ca["name"]
    assert ca["key"] in object_data(shipped["Secret", ca["name"]])
    assert re.fullmatch(re.escape(service["metadata"]["name"]) + r"\.[a-z0-9-]+\.svc", tls["serverName"])
    assert "insecureSkipVerify" not in tls


def test_the_shipped_secrets_are_placeholders_the_server_refuses_and_the_examples_are_valid(tmp_path):
    """The example secrets are public: a server given them unchanged must not start (or let anybody in)."""
    shipped = shipped_with(STANDALONE)
    [pod] = pod_specs(STANDALONE)
    container = toolhost_container(pod)
    environment = container_environment(container, shipped)
    with pytest.raises(StoreKeyError):
        parse_store_key(environment["TOOLHOST_STORE_KEY"], "TOOLHOST_STORE_KEY")
    config = load_config(environ=environment)
    for setting in ("tls_cert_file", "tls_key_file"):
        (tmp_path / setting).write_text(mounted_file(pod, container, getattr(config, setting), shipped))
    with pytest.raises(ValueError, match="no PEM"):
        TlsFiles(tmp_path / "tls_cert_file", tmp_path / "tls_key_file").read()
    (tmp_path / "metrics-token").write_text(mounted_file(pod, container, config.metrics_token_file, shipped))
    with pytest.raises(OSError, match="metrics_token_file"):
        load_metrics_token(str(tmp_path / "metrics-token"))
    # The auth file is valid, and as shipped admits no token and no certificate.
    (tmp_path / "auth.yaml").write_text(mounted_file(pod, container, config.auth_file, shipped))
    table = read_auth_file(tmp_path / "auth.yaml")
    assert table.roles and not (table.token_callers or table.common_name_callers or table.san_callers)
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    assert_valid_catalog(object_data(shipped["ConfigMap", "toolhost-catalog"]), catalog)


def test_no_pod_gets_a_service_account_token():
    for path in (SIDECAR, STANDALONE):
        shipped = shipped_with(path)
        for pod in pod_specs(path):
            # The pod needs no Kubernetes API: a tool that goes astray finds no token to use it with.
            assert pod["automountServiceAccountToken"] is False
            account = shipped["ServiceAccount", pod["serviceAccountName"]]
            assert account["automountServiceAccountToken"] is False
            toolhost_volumes = {m["name"] for m in toolhost_container(pod)["volumeMounts"]}
            for volume in pod["volumes"]:
                sources = volume.get("projected", {}).get("sources", [])
                assert volume["name"] not in toolhost_volumes or not any("serviceAccountToken" in s for s in sources)


def test_the_standalone_replicas_spread_over_nodes_and_zones_and_are_evicted_one_at_a_time():
    deployment = the(STANDALONE, "Deployment")["spec"]
    labels = deployment["template"]["metadata"]["labels"]
    budget = the(STANDALONE, "PodDisruptionBudget")["spec"]
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    assert deployment["replicas"] >= 2
    # One at a time: a drain is never blocked outright, and never takes the service down.
    if "maxUnavailable" in budget:
        assert budget["maxUnavailable"] == 1
    else:
        assert budget["minAvailable"] == deployment["replicas"] - 1
    assert budget["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    constraints = {c["topologyKey"]: c for c in deployment["template"]["spec"]["topologySpreadConstraints"]}
    assert set(constraints) == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    for constraint in constraints.values():
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()
        assert constraint["maxSkew"] == 1
    # A cluster with one zone, or zones without room, still schedules.
    assert constraints["topology.kubernetes.io/zone"]["whenUnsatisfiable"] == "ScheduleAnyway"


def test_the_network_policy_lets_in_only_labelled_clients_and_monitoring_and_out_only_what_is_needed():
    policy = the(NETWORK_POLICY, "NetworkPolicy")["spec"]
    [pod] = pod_specs(STANDALONE)
    labels = the(STANDALONE, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    container = toolhost_container(pod)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    def port_names(rule: dict[str, Any]) -> set[str]:
        named = set()
        for port in rule["ports"]:
            assert port["protocol"] == "TCP"
            named.add(port["port"] if isinstance(port["port"], str)
                      else next(n for n, number in ports.items() if number == port["port"]))
        return named

    by_port = {frozenset(port_names(rule)): rule["from"] for rule in policy["ingress"]}
    assert set(by_port) == {frozenset({"grpc"}), frozenset({"http"})}  # nothing else is open
    [clients] = by_port[frozenset({"grpc"})]
    assert clients["podSelector"]["matchLabels"]  # only pods that carry the label
    [monitoring] = by_port[frozenset({"http"})]
    assert monitoring == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    assert set(ports) == {"grpc", "http"}

    out = [(port["protocol"], port["port"]) for rule in policy["egress"] for port in rule.get("ports", [])]
    assert {("UDP", 53), ("TCP", 53)} <= set(out)
    environment = container_environment(container, shipped_with(STANDALONE))
    database = urlsplit(environment["TOOLHOST_DATABASE_URL"])
    collector = urlsplit(next(e["value"] for e in container["env"] if e["name"] == "OTEL_EXPORTER_OTLP_ENDPOINT"))
    assert ("TCP", database.port) in out and ("TCP", collector.port) in out
    # The tools' rule is an example: documentation ranges, which reach nothing until the operator says where.
    tools = [rule for rule in policy["egress"] if "ports" not in rule]
    assert [peer["ipBlock"]["cidr"] for rule in tools for peer in rule["to"]] == ["192.0.2.0/24", "2001:db8::/32"]


def test_every_toolhost_container_is_locked_down_and_probed_the_ways_its_listeners_allow():
    for path in (SIDECAR, STANDALONE):
        shipped = shipped_with(path)
        for pod in pod_specs(path):
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert {"name": "net.ipv4.ping_group_range", "value": "0 2147483647"} \
                in pod["securityContext"]["sysctls"]
            for container in all_containers(pod):
                context = container["securityContext"]
                assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
                assert context["capabilities"]["drop"] == ["ALL"]
                assert {"requests", "limits"} <= set(container["resources"]), (path.name, container["name"])
            container = toolhost_container(pod)
            config = container_config(container, shipped)
            check_exposure(config)  # the server starts with these settings
            http_host, _, http_port = config.http_address.rpartition(":")
            ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            # Startup and readiness by gRPC health, with the server's TLS (the image's script, run in the
            # container).
            for probe in ("startupProbe", "readinessProbe"):
                assert container[probe]["exec"] == {"command": ["healthcheck"]}
                assert container[probe]["timeoutSeconds"] >= 5  # the script's connect and RPC timeouts, 2 s each
            # Liveness answers while the server drains, so a draining pod is not killed early: /healthz where the
            # kubelet can reach it (over HTTPS, unverified, when the server has TLS; the kubelet has no client
            # certificate to present), else the script's --live check.
            liveness = container["livenessProbe"]
            if is_loopback_host(http_host) or config.tls_client_ca_file:
                assert liveness["exec"] == {"command": ["healthcheck", "--live"]}
                assert liveness["timeoutSeconds"] >= 5
                assert "http" not in ports or not is_loopback_host(http_host)  # a port nobody outside reaches
            else:
                assert ports["http"] == int(http_port)
                expected = {"path": "/healthz", "port": "http"} | ({"scheme": "HTTPS"} if config.tls_cert_file else {})
                assert liveness["httpGet"] == expected
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert {"/tmp", config.data_dir} <= mounts  # writable places on a read-only root filesystem
            for variable in (e["name"] for e in container["env"]):
                assert variable.startswith("OTEL_") or variable in SETTING_VARIABLES, variable


# --- Memory: the limit covers what the settings let the server hold -----------------------------------------

# What one call holds, at worst, for each byte of output it keeps (max_output_bytes of stdout and of stderr):
# the bytes, their text, the redacted text, the response and its serialization, and for a streamed call the
# chunks waiting for a slow reader. The most measured was 15.2 (2026-11-24: 16 StreamCallTool calls at once read
# by one Python client, output that decodes to 4-byte characters and U+FFFD; 6.6 with nobody reading, 2.3 for
# ASCII): 20 leaves room.
HELD_PER_KEPT_BYTE = 20
# The tool's own process counts in the container's memory: df, ping, traceroute ~2 MiB each; a Python script
# ~14 MiB (a catalog of such tools needs a lower max_in_flight_calls or a higher limit).
TOOL_PROCESS_BYTES = 8 * MiB
# A log record in the ring (an audit line: 1.6 KiB measured). Records waiting for the database are bounded by
# store_buffer_bytes per table, counted by estimates that err high (batching.py).
RING_RECORD_BYTES = 4 * 1024
# The idle server (85 MiB measured, with the log table and OTLP export on) with room for the PostgreSQL driver
# and a larger catalog, and an exec probe (sh and grpc-health-probe: 13 MiB measured), for each that may run at
# once (readiness and liveness; startup runs before them).
IDLE_SERVER_BYTES = 160 * MiB
PROBE_BYTES = 16 * MiB


def exec_probes_at_once(container: dict[str, Any]) -> int:
    return max(1, sum("exec" in container.get(probe, {}) for probe in ("readinessProbe", "livenessProbe")))


def worst_case_memory(config: Config, catalog: Mapping[str, str], exec_probes: int) -> int:
    """The most the server can hold with `config`, serving `catalog`, probed by `exec_probes` at once, in bytes
    (see the constants above)."""
    tool_limits = [yaml.safe_load(text).get("max_output_bytes") for text in catalog.values()]
    kept_per_stream = max([config.max_output_bytes, *(limit for limit in tool_limits if limit)])
    calls = config.max_in_flight_calls * (2 * kept_per_stream * HELD_PER_KEPT_BYTE + TOOL_PROCESS_BYTES)
    ring = config.log_memory_records * RING_RECORD_BYTES
    queues = config.store_buffer_bytes * (int(config.audit_database) + int(config.log_database))
    return calls + ring + queues + IDLE_SERVER_BYTES + exec_probes * PROBE_BYTES


def quantity_bytes(quantity: str) -> int:
    parsed = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", quantity)
    assert parsed is not None, f"{quantity}: write memory in Ki, Mi or Gi"
    return int(parsed.group(1)) * {None: 1, "Ki": 1024, "Mi": MiB, "Gi": 1024 * MiB}[parsed.group(2)]


def test_the_memory_limit_covers_what_the_settings_let_the_server_hold():
    for path in (SIDECAR, STANDALONE):
        shipped = shipped_with(path)
        for pod in pod_specs(path):
            container = toolhost_container(pod)
            config = container_config(container, shipped)
            catalog_volume = next(v for v in pod["volumes"] if v["name"] == next(
                m["name"] for m in container["volumeMounts"] if m["mountPath"] == config.catalog_dirs[0]))
            catalog = object_data(shipped["ConfigMap", catalog_volume["configMap"]["name"]])
            worst = worst_case_memory(config, catalog, exec_probes_at_once(container))
            limit = quantity_bytes(container["resources"]["limits"]["memory"])
            assert worst <= limit, f"{path.name}: the server may hold {worst / MiB:.0f} MiB, over its limit"
            # The manifest shows the same sum next to the limit.
            shown = re.search(r"#\s+= (\d+) MiB\n\s+limits: \{[^}]*memory: " + re.escape(
                container["resources"]["limits"]["memory"]), path.read_text())
            assert shown is not None and int(shown.group(1)) == round(worst / MiB), \
                f"{path.name}: the comment above the limit should say = {round(worst / MiB)} MiB"

