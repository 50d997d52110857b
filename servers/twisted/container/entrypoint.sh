#!/bin/sh
# Container entrypoint for Twisted's FTP server (see docs/containers.md).
# Environment: FTP_PASSWORD (required), FTP_USER, FTP_PORT, FTP_HOST, PASV_MIN/PASV_MAX,
# PASV_ADDRESS (masquerade), BACKLOG (listen backlog, default 1024).
set -eu
: "${FTP_PASSWORD:?set FTP_PASSWORD}"
FTP_USER=${FTP_USER:-xferlab}
mkdir -p /srv/ftp /run/xferlab
umask 077
printf '%s:%s\n' "$FTP_USER" "$FTP_PASSWORD" > /run/xferlab/pass.dat
export PYTHONUNBUFFERED=1
exec /opt/venv/bin/python /opt/xferlab/serve.py --host "${FTP_HOST:-0.0.0.0}" \
     --port "${FTP_PORT:-21}" --passwd-file /run/xferlab/pass.dat --home /srv/ftp \
     --backlog "${BACKLOG:-1024}" --pasv-ports "${PASV_MIN:-30000}-${PASV_MAX:-31999}" \
     ${PASV_ADDRESS:+--masquerade "$PASV_ADDRESS"}
