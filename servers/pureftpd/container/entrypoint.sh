#!/bin/sh
# Container entrypoint for pure-ftpd (see docs/containers.md). A PureDB virtual user
# (SHA-512 crypt, written by hand: pure-pw's default argon2id costs seconds per login)
# mapped to nobody/nogroup, home /srv/ftp. -c/-C: connection limits (seed 000's 2000),
# -E no anonymous, -H no reverse DNS, -p passive range, -P masquerade address.
set -eu
: "${FTP_PASSWORD:?set FTP_PASSWORD}"
FTP_USER=${FTP_USER:-xferlab}; MAX_CLIENTS=${MAX_CLIENTS:-2000}
mkdir -p /srv/ftp /etc/xferlab
chown 65534:65534 /srv/ftp
HASH=$(printf '%s' "$FTP_PASSWORD" | openssl passwd -6 -stdin)
umask 077
printf '%s:%s:65534:65534::/srv/ftp::::::::::::\n' "$FTP_USER" "$HASH" > /etc/xferlab/pureftpd.passwd
rm -f /etc/xferlab/pureftpd.pdb
pure-pw mkdb /etc/xferlab/pureftpd.pdb -f /etc/xferlab/pureftpd.passwd
set -- -S "${FTP_HOST:-0.0.0.0},${FTP_PORT:-21}" -c "$MAX_CLIENTS" -C "$MAX_CLIENTS" \
       -l puredb:/etc/xferlab/pureftpd.pdb -E -H -u 1 -p "${PASV_MIN:-30000}:${PASV_MAX:-31999}"
[ -n "${PASV_ADDRESS:-}" ] && set -- "$@" -P "$PASV_ADDRESS"
# FTPS (TLS_MODE explicit): TLS required on control and data, the campaign's certificate and key
[ -n "${TLS_MODE:-}" ] && set -- "$@" -Y 3 -2 "$TLS_CERT,$TLS_KEY"
exec /usr/sbin/pure-ftpd "$@"
