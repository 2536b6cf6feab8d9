# toolhost: the gRPC tool server, as a slim non-root image.
#   docker build -t toolhost .
#   docker run --rm -p 50051:50051 -p 8010:8010 -e TOOLHOST_INSECURE=true toolhost   # local trial only
# It listens on every interface, gRPC and HTTP (/metrics names every tool, hidden ones too), so it starts only
# with TLS (TOOLHOST_TLS_CERT_FILE, TOOLHOST_TLS_KEY_FILE), an auth file for gRPC and a metrics token file or
# client certificates for HTTP (README, "Authentication"), or with TOOLHOST_INSECURE=true behind something that
# does TLS and authenticates. TOOLHOST_HTTP_ADDRESS=127.0.0.1:8010 keeps HTTP inside the container instead.

# grpc-health-probe for the HEALTHCHECK and Kubernetes exec probes, at the version tools/go.mod pins.
FROM golang:1.24-bookworm AS probe
ARG GRPC_HEALTH_PROBE_VERSION=v0.4.40
RUN CGO_ENABLED=0 GOBIN=/out go install "github.com/grpc-ecosystem/grpc-health-probe@${GRPC_HEALTH_PROBE_VERSION}"

# The server and its Python client in a virtualenv, from the pinned constraints; only wheels, no compiler.
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY constraints.txt pyproject.toml README.md ./
COPY clients/python clients/python
COPY server server
RUN python -m venv /opt/toolhost \
 && /opt/toolhost/bin/pip install --no-cache-dir --only-binary=:all: --no-binary=toolhost-client,toolhost-server \
      -c constraints.txt ./clients/python .

FROM python:3.11-slim-bookworm
# ping and traceroute are what the shell_ping and traceroute tools run; ripgrep is what the grep tool runs.
RUN apt-get update \
 && apt-get install -y --no-install-recommends iputils-ping traceroute ripgrep \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /nonexistent --shell /usr/sbin/nologin toolhost \
 && install -d -o toolhost -g toolhost -m 0700 /var/lib/toolhost
COPY --from=build /opt/toolhost /opt/toolhost
COPY --from=probe /out/grpc-health-probe /usr/local/bin/grpc-health-probe
# grpc-health-probe with the server's own TLS settings: `healthcheck` in HEALTHCHECK and in Kubernetes exec probes.
COPY --chmod=0755 deploy/docker/healthcheck.sh /usr/local/bin/healthcheck
ENV PATH=/opt/toolhost/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    TOOLHOST_GRPC_ADDRESS=0.0.0.0:50051 \
    TOOLHOST_HTTP_ADDRESS=0.0.0.0:8010 \
    TOOLHOST_DATA_DIR=/var/lib/toolhost \
    TOOLHOST_LOG_FORMAT=json
USER 10001:10001
WORKDIR /var/lib/toolhost
EXPOSE 50051 8010
# The script gives the probe 2 s to connect and 2 s to answer: a busy server is not taken for a dead one.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["healthcheck"]
# The bundled example catalog serves unless TOOLHOST_CATALOG_DIRS (a mounted ConfigMap) says otherwise.
ENTRYPOINT ["toolhost", "serve"]
