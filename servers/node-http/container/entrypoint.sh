#!/bin/sh
# Container entrypoint for node-http (docs/containers.md, "Server container interface"):
# HTTP on HTTP_HOST:HTTP_PORT (0.0.0.0:8080), home /srv/ftp (uploads in /srv/ftp/uploads);
# WORKERS (cluster, round-robin), MAX_BODY (bytes), KEEPALIVE (1/0), BACKLOG, PERF_MAP (1/0).
# TLS_MODE=https: HTTPS on that port instead, with TLS_CERT/TLS_KEY (mounted read-only).
set -eu
mkdir -p /srv/ftp/uploads
set -- --host "${HTTP_HOST:-0.0.0.0}" --port "${HTTP_PORT:-8080}" --home /srv/ftp --workers "${WORKERS:-1}" \
       --max-body "${MAX_BODY:-1073741824}" --keepalive "${KEEPALIVE:-1}" --backlog "${BACKLOG:-4096}"
[ "${TLS_MODE:-}" = https ] && set -- "$@" --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY"
# PERF_MAP=1 (a profiled cell): V8 writes /tmp/perf-PID.map, the names of its JIT code, for perf
[ "${PERF_MAP:-0}" = 1 ] && exec /usr/bin/node --perf-basic-prof /opt/xferlab/server.js "$@"
exec /usr/bin/node /opt/xferlab/server.js "$@"
