#!/bin/sh
# The image's health check (/usr/local/bin/healthcheck): grpc-health-probe against this container's own toolhost,
# for the Dockerfile's HEALTHCHECK and the Kubernetes exec probes. It reads the server's own TOOLHOST_* variables,
# so it speaks TLS exactly when the server does; a TOOLHOST_CONFIG file is not read (set TLS in the environment).
# Exit status: 0 SERVING; 2 cannot connect; 4 NOT_SERVING (draining); see grpc-health-probe for the rest.
# `healthcheck --live` is a liveness check: a draining server (NOT_SERVING) is alive too, so that a liveness
# probe never kills a pod while its calls finish; use it where HTTP /healthz cannot be probed (HTTP on loopback
# only, or client certificates required).
# Other arguments are passed on to grpc-health-probe, for example `healthcheck -service toolhost.v1.ToolService`,
# or `-tls-client-cert FILE -tls-client-key FILE` when the server requires client certificates and has no unix
# socket.
set -eu

live=false
if [ "${1:-}" = "--live" ]; then
  live=true
  shift
fi

address=${TOOLHOST_GRPC_ADDRESS:-127.0.0.1:50051}
host=${address%:*}
port=${address##*:}
# A server listening on every address is reached on loopback: the probe runs in the server's network namespace.
case $host in
  0.0.0.0) host=127.0.0.1 ;;
  "[::]") host="[::1]" ;;
esac

if [ -n "${TOOLHOST_TLS_CLIENT_CA_FILE:-}" ] && [ -n "${TOOLHOST_UNIX_SOCKET:-}" ]; then
  # TCP would need a client certificate the probe does not have; the unix socket serves the same server
  # without TLS (its file permissions guard it).
  set -- -addr "unix://${TOOLHOST_UNIX_SOCKET}" "$@"
else
  if [ -n "${TOOLHOST_TLS_CERT_FILE:-}" ]; then
    # No verification: the probe dials loopback inside the container, where there is nobody to impersonate the
    # server, and the certificate names the service (toolhost.tools.svc...), never 127.0.0.1.
    set -- -tls -tls-no-verify "$@"
  fi
  set -- -addr "${host}:${port}" "$@"
fi

if [ "$live" = false ]; then
  exec grpc-health-probe -connect-timeout 2s -rpc-timeout 2s "$@"
fi
status=0
grpc-health-probe -connect-timeout 2s -rpc-timeout 2s "$@" || status=$?
if [ "$status" -eq 4 ]; then
  exit 0  # NOT_SERVING: draining, and alive
fi
exit "$status"
