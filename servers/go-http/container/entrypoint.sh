#!/bin/sh
# Container entrypoint for go-http (docs/containers.md, "Server container interface"):
# HTTP on HTTP_HOST:HTTP_PORT (0.0.0.0:8080), home /srv/ftp (uploads in /srv/ftp/uploads);
# WORKERS (GOMAXPROCS; unset: every CPU of the cpuset), MAX_BODY (bytes), KEEPALIVE (1/0).
# TLS_MODE=https: HTTPS on that port instead, with TLS_CERT/TLS_KEY (mounted read-only).
set -eu
mkdir -p /srv/ftp/uploads
[ -n "${WORKERS:-}" ] && export GOMAXPROCS="$WORKERS"
ka=true; [ "${KEEPALIVE:-1}" = 0 ] && ka=false
set -- -listen "${HTTP_HOST:-0.0.0.0}:${HTTP_PORT:-8080}" -home /srv/ftp -max-body "${MAX_BODY:-1073741824}" \
       -keepalive="$ka"
[ "${TLS_MODE:-}" = https ] && set -- "$@" -tls-cert "$TLS_CERT" -tls-key "$TLS_KEY"
exec /usr/local/bin/go-http "$@"
