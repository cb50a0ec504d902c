#!/bin/bash
# Initialises PGDATA on first start (the upstream image's contract: POSTGRES_USER, POSTGRES_PASSWORD,
# POSTGRES_DB), then runs postgres in the foreground. Extra arguments go to postgres (-c name=value).
set -euo pipefail
die() {
  echo "brain-postgres: $*" >&2
  exit 1
}
: "${PGDATA:=/var/lib/postgresql/data/pgdata}"
POSTGRES_USER=${POSTGRES_USER:-postgres}
POSTGRES_DB=${POSTGRES_DB:-$POSTGRES_USER}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -n "${POSTGRES_PASSWORD:-}" ] || die "POSTGRES_PASSWORD is empty; the StatefulSet sets it from the Brain's db-credentials Secret"
  [ -w "$(dirname "$PGDATA")" ] || die "$(dirname "$PGDATA") is not writable by uid $(id -u): mount a volume there (fsGroup 999)"
  mkdir -p "$PGDATA" && chmod 700 "$PGDATA"
  pwfile=$(mktemp)
  trap 'rm -f "$pwfile"' EXIT
  printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" -E UTF8 --no-locale \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
  if [ "$POSTGRES_DB" != postgres ]; then
    echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$POSTGRES_USER\";" | postgres --single -j -D "$PGDATA" postgres >/dev/null
  fi
  echo "CREATE EXTENSION IF NOT EXISTS vector; CREATE EXTENSION IF NOT EXISTS pg_trgm;" \
    | postgres --single -D "$PGDATA" "$POSTGRES_DB" >/dev/null
  echo "brain-postgres: initialised $PGDATA (database $POSTGRES_DB, owner $POSTGRES_USER)" >&2
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
