#!/bin/sh
# Container entrypoint for proftpd (see docs/containers.md). The FTP user lives in an
# AuthUserFile (mod_auth_file, SHA-512 crypt) mapped to nobody/nogroup, home /srv/ftp.
# Seed 000: MaxInstances 2000; plus DelayEngine off, no reverse DNS, no ident.
set -eu
: "${FTP_PASSWORD:?set FTP_PASSWORD}"
FTP_USER=${FTP_USER:-xferlab}; MAX_CLIENTS=${MAX_CLIENTS:-2000}
mkdir -p /srv/ftp /etc/xferlab /run/proftpd
chown 65534:65534 /srv/ftp
HASH=$(printf '%s' "$FTP_PASSWORD" | openssl passwd -6 -stdin)
umask 077
printf '%s:%s:65534:65534:xferlab:/srv/ftp:/bin/sh\n' "$FTP_USER" "$HASH" > /etc/xferlab/ftpd.passwd
printf 'nogroup:x:65534:%s\n' "$FTP_USER" > /etc/xferlab/ftpd.group
umask 022
if [ "${USE_SENDFILE:-1}" = 0 ]; then SENDFILE=off; else SENDFILE=on; fi
# FTPS (TLS_MODE explicit|implicit): mod_tls from proftpd-mod-crypto, the same settings as
# the local recipe (runner/backends/local/recipes/proftpd.py, PROFTPD_TLS); a proftpd built
# from source (servers/Dockerfile.c-source) has mod_tls compiled in: no LoadModule line
TLS_BLOCK=
LOAD_TLS="LoadModule mod_tls.c
"
if /usr/sbin/proftpd -l | grep -qx '  mod_tls.c'; then LOAD_TLS=; fi
if [ -n "${TLS_MODE:-}" ]; then
  if [ -n "$LOAD_TLS" ] && [ ! -f /usr/lib/proftpd/mod_tls.so ]; then
    echo "xferlab: /usr/lib/proftpd/mod_tls.so missing: the image lacks proftpd-mod-crypto (rebuild it)" >&2
    exit 2
  fi
  case "${TLS_KEY_TYPE:-ecdsa-p256}" in ecdsa*) KIND=EC ;; *) KIND=RSA ;; esac
  OPTS=NoSessionReuseRequired
  [ "$TLS_MODE" = implicit ] && OPTS="$OPTS UseImplicitSSL"
  TLS_BLOCK="${LOAD_TLS}<IfModule mod_tls.c>
  TLSEngine on
  TLSProtocol TLSv1.2 TLSv1.3
  TLS${KIND}CertificateFile $TLS_CERT
  TLS${KIND}CertificateKeyFile $TLS_KEY
  TLSRequired on
  TLSVerifyClient off
  TLSRenegotiate none
  TLSOptions $OPTS
</IfModule>"
fi
cat > /etc/xferlab/proftpd.conf <<CONF
ServerName            "xferlab proftpd"
ServerType            standalone
DefaultServer         on
Port                  ${FTP_PORT:-21}
UseIPv6               off
MaxInstances          $MAX_CLIENTS
# The largest listen backlog proftpd accepts (docs/methodology.md, "Listen backlog")
TCPBacklog            255
MaxClients            none
MaxClientsPerHost     none
MaxConnectionsPerHost none
User                  nobody
Group                 nogroup
Umask                 022
PidFile               /run/proftpd/proftpd.pid
ScoreboardFile        /run/proftpd/proftpd.scoreboard
DelayTable            /run/proftpd/proftpd.delay
SystemLog             none
TransferLog           none
WtmpLog               off
UseReverseDNS         off
UseSendfile           $SENDFILE
AllowOverwrite        on
RequireValidShell     off
AuthOrder             mod_auth_file.c
AuthUserFile          /etc/xferlab/ftpd.passwd
AuthGroupFile         /etc/xferlab/ftpd.group
<IfModule mod_auth_pam.c>
  AuthPAM off
</IfModule>
ServerIdent           on "xferlab proftpd ready"
DeferWelcome          off
TimeoutIdle           600
TimeoutNoTransfer     600
PassivePorts          ${PASV_MIN:-30000} ${PASV_MAX:-31999}
${PASV_ADDRESS:+MasqueradeAddress $PASV_ADDRESS}
$TLS_BLOCK
<IfModule mod_ident.c>
  IdentLookups off
</IfModule>
<IfModule mod_delay.c>
  DelayEngine off
</IfModule>
<IfModule mod_ctrls.c>
  ControlsEngine off
</IfModule>
<Directory />
  AllowOverwrite on
</Directory>
CONF
exec /usr/sbin/proftpd -n -c /etc/xferlab/proftpd.conf
