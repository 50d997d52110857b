#!/bin/sh
# Container entrypoint for nginx (docs/containers.md, "Server container interface"):
# HTTP on HTTP_HOST:HTTP_PORT (0.0.0.0:8080), document root /srv/ftp, uploads in
# /srv/ftp/uploads. WORKERS, MAX_BODY (bytes), KEEPALIVE (1/0), USE_SENDFILE (1/0),
# MAX_CLIENTS. TLS_MODE=https: HTTPS on that port instead (listen ... ssl, TLS 1.2/1.3), with
# TLS_CERT/TLS_KEY (mounted read-only). The config is /opt/xferlab/nginx.conf.tmpl with its
# placeholders filled.
set -eu
HOME_DIR=/srv/ftp
RUN=/run/xferlab
mkdir -p "$HOME_DIR/uploads" "$HOME_DIR/.nginx-body" "$RUN"
ka=300s; [ "${KEEPALIVE:-1}" = 0 ] && ka=0
sf=on; [ "${USE_SENDFILE:-1}" = 0 ] && sf=off
nofile=$(ulimit -n)
ssl_listen=; ssl_lines=
if [ "${TLS_MODE:-}" = https ]; then  # sed turns each \n of the replacement into a newline
  ssl_listen=" ssl"
  ssl_lines="        ssl_certificate $TLS_CERT;\n        ssl_certificate_key $TLS_KEY;\n        ssl_protocols TLSv1.2 TLSv1.3;\n"
fi
sed -e "s|\${workers}|${WORKERS:-1}|g" -e "s|\${nofile}|$nofile|g" -e "s|\${run}|$RUN|g" \
    -e "s|\${user_line}|user root;|g" -e "s|\${connections}|$(( ${MAX_CLIENTS:-2000} + 1024 ))|g" \
    -e "s|\${sendfile}|$sf|g" -e "s|\${keepalive_timeout}|$ka|g" -e "s|\${max_body}|${MAX_BODY:-1073741824}|g" \
    -e "s|\${body_temp}|$HOME_DIR/.nginx-body|g" -e "s|\${listen}|${HTTP_HOST:-0.0.0.0}:${HTTP_PORT:-8080}|g" \
    -e "s|\${home}|$HOME_DIR|g" -e "s|\${ssl_listen}|$ssl_listen|g" -e "s|\${ssl_lines}|$ssl_lines|g" \
    -e 's|\$\$|$|g' /opt/xferlab/nginx.conf.tmpl > "$RUN/nginx.conf"
exec /usr/sbin/nginx -e stderr -p "$RUN" -c "$RUN/nginx.conf"
