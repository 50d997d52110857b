#!/bin/sh
# Container entrypoint for pyftpdlib (see docs/containers.md, "Server container interface").
# Environment: FTP_PASSWORD (required), FTP_USER, FTP_PORT, FTP_HOST, PASV_MIN/PASV_MAX,
# PASV_ADDRESS (masquerade), MAX_CLIENTS, USE_SENDFILE (1/0), BACKLOG, TLS_MODE/TLS_CERT/TLS_KEY (FTPS).
set -eu
: "${FTP_PASSWORD:?set FTP_PASSWORD}"
FTP_USER=${FTP_USER:-xferlab}; FTP_PORT=${FTP_PORT:-21}; FTP_HOST=${FTP_HOST:-0.0.0.0}
PASV_MIN=${PASV_MIN:-30000}; PASV_MAX=${PASV_MAX:-31999}; MAX_CLIENTS=${MAX_CLIENTS:-2000}
HOME_DIR=/srv/ftp
mkdir -p "$HOME_DIR"
set -- --host "$FTP_HOST" --port "$FTP_PORT" --user "$FTP_USER" --password "$FTP_PASSWORD" \
       --home "$HOME_DIR" --pasv-ports "$PASV_MIN-$PASV_MAX" --backlog "${BACKLOG:-1024}"
# max_cons = 0 (unlimited) as seed 000 patches in, unless a smaller limit is asked
if [ "$MAX_CLIENTS" -ge 2000 ]; then set -- "$@" --max-cons 0; else set -- "$@" --max-cons "$MAX_CLIENTS"; fi
[ -n "${PASV_ADDRESS:-}" ] && set -- "$@" --masquerade "$PASV_ADDRESS"
[ "${USE_SENDFILE:-1}" = 0 ] && set -- "$@" --no-sendfile
# FTPS (TLS_MODE explicit): TLS_FTPHandler, which needs pyOpenSSL in the image's venv
[ -n "${TLS_MODE:-}" ] && set -- "$@" --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY"
export PYTHONUNBUFFERED=1
exec /opt/venv/bin/python /opt/xferlab/serve.py "$@"
