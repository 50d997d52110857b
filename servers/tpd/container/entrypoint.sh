#!/bin/sh
# Container entrypoint for tpd (see docs/containers.md): FTP on FTP_PORT, HTTP on
# HTTP_PORT (default 8080), one user with a writable /srv/ftp (HTTP uploads in
# /srv/ftp/uploads; MAX_BODY: largest upload body, bytes, default 1 GiB).
set -eu
: "${FTP_PASSWORD:?set FTP_PASSWORD}"
FTP_USER=${FTP_USER:-xferlab}; HOST=${FTP_HOST:-0.0.0.0}
mkdir -p /srv/ftp/uploads /etc/xferlab
umask 077
printf '%s:{plain}%s:/srv/ftp:rw\n' "$FTP_USER" "$FTP_PASSWORD" > /etc/xferlab/users
# TLS_MODE=https: the HTTP port serves HTTPS (the same handler, --https-listen)
HTTP_FLAG=--http-listen; [ "${TLS_MODE:-}" = https ] && HTTP_FLAG=--https-listen
set -- --ftp-listen "$HOST:${FTP_PORT:-21}" "$HTTP_FLAG" "$HOST:${HTTP_PORT:-8080}" \
       --users /etc/xferlab/users --pasv-ports "${PASV_MIN:-30000}-${PASV_MAX:-31999}" \
       --max-conns "${MAX_CLIENTS:-2000}" --idle-timeout "${IDLE_TIMEOUT:-300}" --log-level warn \
       --max-body "${MAX_BODY:-1073741824}"
[ -n "${PASV_ADDRESS:-}" ] && set -- "$@" --masquerade "$PASV_ADDRESS"
[ "${USE_SENDFILE:-1}" = 0 ] && set -- "$@" --no-sendfile
# FTPS and HTTPS (TLS_MODE explicit|implicit|https; TLS_CERT/TLS_KEY mounted read-only): AUTH TLS
# on the FTP listener, for implicit FTPS a second listener on FTPS_PORT (default 990)
if [ -n "${TLS_MODE:-}" ]; then
  set -- "$@" --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY"
  [ "$TLS_MODE" = implicit ] && set -- "$@" --ftps-listen "$HOST:${FTPS_PORT:-990}"
fi
exec /usr/local/bin/tpd "$@"
