#!/bin/sh
# Patroni's post_bootstrap (bench/postgres/run): the same schema as examples/postgres
set -eu
exec /usr/lib/postgresql/15/bin/psql -XAtq -v ON_ERROR_STOP=1 -d "$1" -f "$(dirname "$0")/../../examples/postgres/schema.sql"
