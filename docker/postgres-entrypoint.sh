#!/bin/sh
# PostgreSQL from Debian's packages (docker/images.py, image `postgres`), started the way the official
# image starts: on an empty PGDATA, initdb with POSTGRES_USER / POSTGRES_PASSWORD, create POSTGRES_DB,
# run /docker-entrypoint-initdb.d/*.sql once; then the server in the foreground as `postgres`.
# PGPORT (default 5432) and POSTGRES_LISTEN_ADDRESSES (default *) say where it listens; the password
# is read from the environment and handed to initdb through a file that is removed at once.
set -eu
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
: "${PGDATA:=/var/lib/postgresql/data}"
: "${PGPORT:=5432}"
: "${POSTGRES_LISTEN_ADDRESSES:=*}"
export PGDATA PGPORT
bin=$(ls -d /usr/lib/postgresql/*/bin | tail -n 1)

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  "$bin/initdb" -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  "$bin/pg_ctl" -D "$PGDATA" -o "-c listen_addresses='' -p $PGPORT" -w start >/dev/null
  if [ "$POSTGRES_DB" != postgres ]; then
    psql -v ON_ERROR_STOP=1 -q -U "$POSTGRES_USER" -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\""
  fi
  for script in /docker-entrypoint-initdb.d/*.sql; do
    [ -e "$script" ] || continue
    echo "running $script"
    psql -v ON_ERROR_STOP=1 -q -U "$POSTGRES_USER" -d "$POSTGRES_DB" -f "$script"
  done
  "$bin/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
  echo "PostgreSQL initialised in $PGDATA"
fi
exec "$bin/postgres" -D "$PGDATA" -p "$PGPORT" -c listen_addresses="$POSTGRES_LISTEN_ADDRESSES" "$@"
