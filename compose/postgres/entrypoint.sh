#!/bin/sh
# PostgreSQL for the xferlab stack. First start (empty $PGDATA): initdb with
# POSTGRES_USER (default xferlab) as superuser, password POSTGRES_PASSWORD (required),
# database POSTGRES_DB (default xferlab); password (scram-sha-256) logins from any
# address. Then runs postgres in the foreground as user postgres.
set -eu
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
USER_=${POSTGRES_USER:-xferlab}; DB=${POSTGRES_DB:-xferlab}
AS_PG="setpriv --reuid=postgres --regid=postgres --init-groups"
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 0700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    PWFILE=$(mktemp); printf '%s\n' "$POSTGRES_PASSWORD" > "$PWFILE"; chown postgres "$PWFILE"
    $AS_PG initdb -D "$PGDATA" -U "$USER_" --pwfile="$PWFILE" --auth-host=scram-sha-256 \
        --auth-local=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$PWFILE"
    echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
    echo "host all all ::/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
    $AS_PG pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    if [ "$DB" != postgres ]; then $AS_PG createdb -U "$USER_" "$DB"; fi
    $AS_PG pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "xferlab-postgres: initialised $PGDATA (user $USER_, database $DB)"
fi
exec $AS_PG postgres -D "$PGDATA" -c listen_addresses='*' -c max_connections=200
