#!/bin/sh
# PostgreSQL for the compose file: initialises the data directory on first start (password from
# POSTGRES_PASSWORD, database and user from POSTGRES_DB/POSTGRES_USER), then runs in the foreground.
set -eu
PGDATA=/var/lib/postgresql/data
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-host=scram-sha-256 --auth-local=trust >/dev/null
  rm -f "$pwfile"
  printf "host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n" >> "$PGDATA/pg_hba.conf"
  postgres -D "$PGDATA" -c listen_addresses='' -k /var/run/postgresql &
  pid=$!
  until pg_isready -q -h /var/run/postgresql; do sleep 0.2; done
  psql -q -h /var/run/postgresql -U "$POSTGRES_USER" -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\""
  kill -INT "$pid"
  wait "$pid" || true
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -k /var/run/postgresql
