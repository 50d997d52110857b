#!/bin/sh
# Container entrypoint for vsftpd (see docs/containers.md, "Server container interface").
# Creates the system account FTP_USER (vsftpd serves real accounts; PAM service
# "vsftpd", Debian's pam_unix) with a SHA-512 crypt password (same login cost as the
# proftpd and pure-ftpd users) and home /srv/ftp, writes /etc/xferlab/vsftpd.conf with
# seed 000's settings (max_clients, max_per_ip) and runs vsftpd in the foreground.
set -eu
: "${FTP_PASSWORD:?set FTP_PASSWORD}"
FTP_USER=${FTP_USER:-xferlab}; MAX_CLIENTS=${MAX_CLIENTS:-2000}
id "$FTP_USER" >/dev/null 2>&1 || useradd --home-dir /srv/ftp --no-create-home --shell /bin/sh "$FTP_USER"
printf '%s:%s\n' "$FTP_USER" "$FTP_PASSWORD" | chpasswd -c SHA512
mkdir -p /srv/ftp /etc/xferlab /var/run/vsftpd/empty
chown "$FTP_USER:" /srv/ftp
if [ "${USE_SENDFILE:-1}" = 0 ]; then SENDFILE=NO; else SENDFILE=YES; fi
# FTPS (TLS_MODE explicit|implicit; TLS_CERT/TLS_KEY: the campaign's files, mounted read-only):
# the same settings as the local recipe (runner/backends/local/recipes/vsftpd.py, VSFTPD_TLS)
SSL_LINES=ssl_enable=NO
if [ -n "${TLS_MODE:-}" ]; then
  if [ "$TLS_MODE" = implicit ]; then IMPLICIT=YES; else IMPLICIT=NO; fi
  SSL_LINES="ssl_enable=YES
rsa_cert_file=$TLS_CERT
rsa_private_key_file=$TLS_KEY
ssl_sslv2=NO
ssl_sslv3=NO
ssl_tlsv1=YES
ssl_ciphers=HIGH
require_ssl_reuse=NO
allow_anon_ssl=NO
force_local_logins_ssl=YES
force_local_data_ssl=YES
implicit_ssl=$IMPLICIT"
fi
cat > /etc/xferlab/vsftpd.conf <<CONF
listen=YES
listen_ipv6=NO
background=NO
listen_address=${FTP_HOST:-0.0.0.0}
listen_port=${FTP_PORT:-21}
anonymous_enable=NO
local_enable=YES
write_enable=YES
local_umask=022
chroot_local_user=NO
max_clients=$MAX_CLIENTS
max_per_ip=$MAX_CLIENTS
pasv_enable=YES
pasv_min_port=${PASV_MIN:-30000}
pasv_max_port=${PASV_MAX:-31999}
${PASV_ADDRESS:+pasv_address=$PASV_ADDRESS}
seccomp_sandbox=NO
use_sendfile=$SENDFILE
pam_service_name=vsftpd
userlist_enable=NO
tcp_wrappers=NO
secure_chroot_dir=/var/run/vsftpd/empty
xferlog_enable=NO
vsftpd_log_file=/dev/stderr
syslog_enable=NO
idle_session_timeout=600
data_connection_timeout=300
connect_from_port_20=NO
ftpd_banner=xferlab vsftpd ready
$SSL_LINES
CONF
exec /usr/sbin/vsftpd /etc/xferlab/vsftpd.conf
