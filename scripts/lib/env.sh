# Shared by scripts/test, scripts/demo, scripts/run and the benchmarks: install what is missing and run a throwaway
# PostgreSQL cluster under .data/ (as the postgres user: initdb refuses root). Source it; it defines functions only.
# shellcheck shell=bash

ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PG_PORT=${PG_PORT:-54329}
# PG_CLUSTER names the cluster directory under .data/ (default "pg"); PG_DATADIR, when set, is the full path and wins.
# The benchmarks and chaos runs use their own cluster (.data/pg-bench on port 54340) so they never touch the one the
# tests use, and chaos only ever stops the cluster it started.
PG_CLUSTER=${PG_CLUSTER:-pg}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else die "need root to run: $*"; fi; }

# Debian packages the build, the tests and the tools need (plus any given as arguments).
ensure_packages() {
    local need=() pkg
    for pkg in libpq-dev libmicrohttpd-dev libssl-dev zlib1g-dev libcurl4-openssl-dev postgresql-15 postgresql-client-15 postgresql-contrib pkg-config wrk curl procps time python3 pgbouncer "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
    done
    if [ ${#need[@]} -gt 0 ]; then
        log "installing ${need[*]}"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
            || die "apt-get install ${need[*]} failed"
    fi
    command -v swift >/dev/null || [ -x /opt/swift/usr/bin/swift ] || die "swift is not installed (expected on PATH or /opt/swift)"
    command -v swift >/dev/null || export PATH=/opt/swift/usr/bin:$PATH
}

# python3 for the load generators of scripts/chaos (any python3 on PATH will do).
ensure_python3() {
    command -v python3 >/dev/null && return 0
    ensure_packages python3
}

# openapi-schema-validator (PyPI) for scripts/lib/validate-paysim-paypal.py, which PaysimCoreTests runs: paysim's
# PayPal answers checked against PayPal's own OpenAPI documents. pip comes from python3-pip when python3 has none;
# Debian's own python3 refuses a system-wide pip install (PEP 668) unless told it may.
ensure_openapi_schema_validator() {
    ensure_python3
    python3 -c 'import openapi_schema_validator' 2>/dev/null && return 0
    python3 -m pip --version >/dev/null 2>&1 || ensure_packages python3-pip
    log "installing openapi-schema-validator"
    python3 -m pip install -q openapi-schema-validator >/dev/null 2>&1 \
        || python3 -m pip install -q --break-system-packages openapi-schema-validator >/dev/null \
        || die "pip install openapi-schema-validator failed"
}

# selenium and axe-selenium-python (PyPI, axe-core inside) for scripts/lib/console-check.py: the console in Debian's
# Chromium through chromium-driver.
ensure_browser_testing() {
    ensure_packages chromium chromium-driver fonts-dejavu-core
    ensure_python3
    python3 -c 'import selenium, axe_selenium_python' 2>/dev/null && return 0
    python3 -m pip --version >/dev/null 2>&1 || ensure_packages python3-pip
    log "installing selenium and axe-selenium-python"
    python3 -m pip install -q selenium axe-selenium-python >/dev/null 2>&1 \
        || python3 -m pip install -q --break-system-packages selenium axe-selenium-python >/dev/null \
        || die "pip install selenium axe-selenium-python failed"
}

# The cluster lives under .data/pg when the postgres user can reach it, else under /tmp (a clone under /root, say).
pg_datadir() {
    if [ -n "${PG_DATADIR:-}" ]; then printf '%s\n' "$PG_DATADIR"; return; fi
    local dir="$ROOT/.data/$PG_CLUSTER"
    mkdir -p "$ROOT/.data"
    if [ "$(id -u)" = 0 ] && ! su postgres -s /bin/sh -c "test -x '$ROOT/.data'" 2>/dev/null; then
        dir="/tmp/payrecon-$PG_CLUSTER-$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)"
    fi
    printf '%s\n' "$dir"
}

pg_run() { # run a PostgreSQL binary as the cluster owner
    if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; else "$@"; fi
}

# Starts (creating if needed) the cluster and the database; exports DATABASE_URL.
pg_start() {
    local dir; dir=$(pg_datadir)
    local db=${1:-payrecon}
    if [ ! -s "$dir/PG_VERSION" ]; then
        log "creating PostgreSQL cluster in $dir"
        mkdir -p "$dir"
        [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
        chmod 700 "$dir"
        pg_run "$PG_BIN/initdb" -D "$dir" -U postgres -A trust -E UTF8 --no-locale >/dev/null || die "initdb failed"
        cat >>"$dir/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$dir'
max_connections = 300
shared_buffers = 256MB
fsync = on
synchronous_commit = on
logging_collector = off
CONF
    fi
    if ! pg_run "$PG_BIN/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
        log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
        # -p: the port asked for now, whatever the cluster was created with.
        pg_run "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -o "-p $PG_PORT" -w -t 60 start >/dev/null || { tail -20 "$dir/server.log" >&2; die "PostgreSQL did not start (see above; if port $PG_PORT is in use, run again with PG_PORT=<a free port>)"; }
    fi
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 \
        || psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc "CREATE DATABASE \"$db\"" || die "cannot create database $db"
    export DATABASE_URL="postgresql://postgres@127.0.0.1:$PG_PORT/$db"
    export PG_DATADIR="$dir"
}

pg_stop() { # [mode]: fast (default) or immediate (a crash, for scripts/chaos)
    local dir; dir=$(pg_datadir)
    pg_run "$PG_BIN/pg_ctl" -D "$dir" -m "${1:-fast}" -w stop >/dev/null 2>&1 || true
}

# PgBouncer in transaction mode in front of database $1 of the cluster, as the postgres user (it refuses
# to run as root), on PGBOUNCER_PORT (default PG_PORT + 2). Exports PGBOUNCER_URL.
PGBOUNCER_PORT=${PGBOUNCER_PORT:-$((PG_PORT + 2))}
pgbouncer_start() {
    local db=${1:-payrecon} dir; dir="$(pg_datadir)-bouncer"
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
    printf '"postgres" ""\n' >"$dir/userlist.txt"
    cat >"$dir/pgbouncer.ini" <<INI
[databases]
$db = host=127.0.0.1 port=$PG_PORT dbname=$db
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGBOUNCER_PORT
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"/*
    pgbouncer_stop
    pg_run /usr/sbin/pgbouncer -d "$dir/pgbouncer.ini" || die "pgbouncer did not start (see $dir/pgbouncer.log)"
    local _i
    for _i in $(seq 1 50); do
        psql -h 127.0.0.1 -p "$PGBOUNCER_PORT" -U postgres -d "$db" -tAc "SELECT 1" >/dev/null 2>&1 && break
        sleep 0.1
    done
    export PGBOUNCER_URL="postgresql://postgres@127.0.0.1:$PGBOUNCER_PORT/$db"
}

pgbouncer_stop() {
    local dir _i; dir="$(pg_datadir)-bouncer"
    if [ -s "$dir/pgbouncer.pid" ]; then
        kill -INT "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true   # SIGINT: PgBouncer's safe shutdown
        for _i in $(seq 1 50); do [ -e "$dir/pgbouncer.pid" ] && kill -0 "$(cat "$dir/pgbouncer.pid" 2>/dev/null)" 2>/dev/null || break; sleep 0.1; done
    fi
    pkill -f "pgbouncer -d $dir/pgbouncer.ini" 2>/dev/null || true
    rm -f "$dir/pgbouncer.pid"
}

# The data directory of the server answering on PG_PORT (empty if none): lets a script check that the cluster it is
# about to stop is its own.
pg_serving_datadir() {
    psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAc "SHOW data_directory" 2>/dev/null || true
}

# Builds (swift build ARGS…) quietly: the compiler's output goes to .data/build.log, a line every 30 s says it is still
# going (a first build takes minutes), and a failure prints the errors with their context and stops.
build_quietly() {
    mkdir -p "$ROOT/.data"
    local out="$ROOT/.data/build.log"
    swift build "$@" >"$out" 2>&1 &
    local pid=$! waited=0
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1; waited=$((waited + 1))
        if [ $((waited % 30)) = 0 ]; then
            log "still building ($(grep -oE '^\[[0-9]+/[0-9]+\]' "$out" | tail -1 | tr -d '[]' | sed 's|/| of |') steps, ${waited}s)"
        fi
    done
    if ! wait "$pid"; then
        grep -E -A4 "error:" "$out" | head -60 >&2
        die "the build failed (whole output in $out)"
    fi
}
