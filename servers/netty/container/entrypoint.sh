#!/bin/sh
# Container entrypoint for netty (docs/containers.md, "Server container interface"):
# HTTP on HTTP_HOST:HTTP_PORT (0.0.0.0:8080), home /srv/ftp (uploads in /srv/ftp/uploads);
# WORKERS (event-loop threads), MAX_BODY (bytes), KEEPALIVE (1/0), BACKLOG.
# TLS_MODE=https: HTTPS on that port instead (SslHandler), with TLS_CERT/TLS_KEY (mounted read-only).
set -eu
mkdir -p /srv/ftp/uploads
J=/usr/share/java
CP=/opt/xferlab/classes:$J/netty-buffer.jar:$J/netty-codec.jar:$J/netty-codec-http.jar:$J/netty-common.jar
CP=$CP:$J/netty-handler.jar:$J/netty-transport.jar:$J/netty-resolver.jar:$J/jctools-core.jar
set -- --host "${HTTP_HOST:-0.0.0.0}" --port "${HTTP_PORT:-8080}" --home /srv/ftp --workers "${WORKERS:-1}" \
       --max-body "${MAX_BODY:-1073741824}" --keepalive "${KEEPALIVE:-1}" --backlog "${BACKLOG:-4096}"
[ "${TLS_MODE:-}" = https ] && set -- "$@" --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY"
exec /usr/bin/java -cp "$CP" NettyServer "$@"
