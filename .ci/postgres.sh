#!/usr/bin/env bash
# Install (Debian's package, if missing) and start a throwaway PostgreSQL server on 127.0.0.1:55432 for the tests.
# Prints the SQLAlchemy URL of an admin database on stdout; everything else goes to stderr.
set -euo pipefail
PORT=${TUNER_PG_PORT:-55432}
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2
fi
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
id postgres >/dev/null 2>&1 || useradd --system --home /var/lib/postgresql postgres >&2
DATA=${TUNER_PG_DATA:-/tmp/tuner-pg-$PORT}
if ! su postgres -s /bin/sh -c "$BIN/pg_ctl -D $DATA status" >/dev/null 2>&1; then
  rm -rf "$DATA" && mkdir -p "$DATA" && chown postgres "$DATA"
  su postgres -s /bin/sh -c "$BIN/initdb -D $DATA -A trust -U postgres" >/dev/null
  su postgres -s /bin/sh -c "$BIN/pg_ctl -D $DATA -l $DATA/log -w -o '-p $PORT -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off' start" >&2
fi
echo "postgresql+psycopg://postgres@127.0.0.1:$PORT/postgres"
