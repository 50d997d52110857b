#!/bin/sh
# Container entrypoint for uvicorn (docs/containers.md, "Server container interface"):
# HTTP on HTTP_HOST:HTTP_PORT (0.0.0.0:8080), home /srv/ftp (uploads in /srv/ftp/uploads);
# WORKERS, MAX_BODY (bytes), KEEPALIVE (1/0), BACKLOG.
# TLS_MODE=https: HTTPS on that port instead (uvicorn's ssl_certfile/ssl_keyfile), with
# TLS_CERT/TLS_KEY (mounted read-only).
set -eu
mkdir -p /srv/ftp/uploads
export PYTHONUNBUFFERED=1
set -- --host "${HTTP_HOST:-0.0.0.0}" --port "${HTTP_PORT:-8080}" --home /srv/ftp --workers "${WORKERS:-1}" \
       --max-body "${MAX_BODY:-1073741824}" --keepalive "${KEEPALIVE:-1}" --backlog "${BACKLOG:-4096}"
[ "${TLS_MODE:-}" = https ] && set -- "$@" --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY"
exec /opt/venv/bin/python /opt/xferlab/serve.py "$@"
