#!/usr/bin/env bash
# Operations as shipped, checked with the real parts: scripts/install into a throwaway root; `payrecon serve` and
# `payrecon work` started from the installed binary with the installed environment template's settings (only the
# database, the ports, the provider URLs and the demo credentials differ); a real Prometheus (Debian's) scraping them
# with deploy/prometheus/prometheus.yml and alerts.yml (its `for:` shortened); traffic from paysim's demo book. Then:
# every Grafana panel's query returns data, no alert is pending, stopping the worker turns PayreconWorkerDown
# pending, and (when scripts/test started the cluster itself: PAYRECON_PG_DATADIR, PAYRECON_PG_PORT,
# PAYRECON_OPS_MAY_STOP_PG=1) stopping PostgreSQL with no traffic turns PayreconDatabaseDown pending; the cluster is
# started again. Everything runs on 127.0.0.1 under a temporary
# directory and is stopped on exit.
#   PAYRECON_BIN=.build/debug/payrecon PAYSIM_BIN=.build/debug/paysim DATABASE_URL=postgresql://… \
#       scripts/lib/operations-check.sh
# Prints one line per check and `operations-check: N passed`; exits 1 on the first failure.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
: "${PAYRECON_BIN:?set PAYRECON_BIN to the payrecon binary}" "${PAYSIM_BIN:?set PAYSIM_BIN to the paysim binary}"
: "${DATABASE_URL:?set DATABASE_URL to a fresh database the check may write to}"
PROMETHEUS=${PROMETHEUS:-/usr/bin/prometheus}
[ -x "$PROMETHEUS" ] || { echo "operations-check: $PROMETHEUS is missing (apt-get install prometheus)" >&2; exit 2; }
TEST_DATABASE_URL=$DATABASE_URL

T=$(mktemp -d /tmp/payrecon-ops.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
passed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$*"; }
fail() {
    printf 'FAIL %s\n' "$*"
    for f in serve work prometheus paysim; do
        [ -s "$T/$f.log" ] && { echo "--- $f log (last lines)"; tail -5 "$T/$f.log"; }
    done
    exit 1
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 1 200); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# 1. Installed as a package would be, into a root of its own.
"$ROOT/scripts/install" --root "$T/root" --binary "$PAYRECON_BIN" >"$T/install.log" 2>&1 || { cat "$T/install.log"; fail "scripts/install"; }
env_file="$T/root/etc/payrecon/payrecon.env"
serve_env="$T/root/etc/payrecon/serve.env"
for unit in payrecon-serve.service payrecon-work.service payrecon-migrate.service payrecon-reconcile.timer payrecon-prune.timer; do
    [ -f "$T/root/etc/systemd/system/$unit" ] || fail "scripts/install did not install $unit"
done
# The template's paths are where the script put things; the units start the installed binary.
sql_dir=$(sed -n 's/^PAYRECON_SQL_DIR=//p' "$env_file"); roots=$(sed -n 's/^PAYPAL_TRUST_ROOTS=//p' "$env_file")
[ -f "$T/root$sql_dir/0001_deliveries.sql" ] || fail "the template's PAYRECON_SQL_DIR=$sql_dir is not what scripts/install installed"
[ -f "$T/root$roots" ] || fail "the template's PAYPAL_TRUST_ROOTS=$roots is not what scripts/install installed"
exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$T/root/etc/systemd/system/payrecon-serve.service")
[ -x "$T/root$exec_start" ] || fail "payrecon-serve.service starts $exec_start, which scripts/install did not install"
[ -x "$T/root/usr/local/bin/payrecon-env" ] || fail "scripts/install did not install payrecon-env"
# An upgrade keeps the secrets file but points its paths at what it installed (an older install's sql/ would be read).
sed -i 's|^PAYRECON_SQL_DIR=.*|PAYRECON_SQL_DIR=/usr/share/payrecon/sql|; s|^PXP_WEBHOOK_KEY=.*|PXP_WEBHOOK_KEY=kept-secret|' "$env_file"
"$ROOT/scripts/install" --root "$T/root" --binary "$PAYRECON_BIN" >"$T/install2.log" 2>&1 || { cat "$T/install2.log"; fail "scripts/install over an install"; }
grep -q '^PXP_WEBHOOK_KEY=kept-secret$' "$env_file" || fail "a second scripts/install overwrote the environment file's secrets"
[ "$(sed -n 's/^PAYRECON_SQL_DIR=//p' "$env_file")" = "$sql_dir" ] || fail "a second scripts/install left PAYRECON_SQL_DIR at an older install's folder"
[ -f "$env_file.new" ] || fail "a second scripts/install did not put the new template beside the kept file"
[ "$(sed -n 's/^PAYPAL_TRUST_ROOTS=//p' "$env_file")" = "$roots" ] || fail "a second scripts/install left PAYPAL_TRUST_ROOTS at an older install's shipped bundle"
# A trust bundle of the operator's own (what doctor says to set when PayPal's chain changes) survives the upgrade; an
# older install's shipped one follows the new install.
sed -i 's|^PAYPAL_TRUST_ROOTS=.*|PAYPAL_TRUST_ROOTS=/etc/payrecon/paypal-roots-2027.pem|' "$env_file"
"$ROOT/scripts/install" --root "$T/root" --binary "$PAYRECON_BIN" >"$T/install2b.log" 2>&1 || { cat "$T/install2b.log"; fail "scripts/install over an install with its own trust roots"; }
[ "$(sed -n 's/^PAYPAL_TRUST_ROOTS=//p' "$env_file")" = /etc/payrecon/paypal-roots-2027.pem ] || fail "scripts/install replaced a custom PAYPAL_TRUST_ROOTS: every PayPal delivery would be refused after the restart"
grep -q "kept PAYPAL_TRUST_ROOTS=/etc/payrecon/paypal-roots-2027.pem (your own bundle)" "$T/install2b.log" || { cat "$T/install2b.log"; fail "scripts/install did not say it kept the custom trust roots"; }
sed -i 's|^PAYPAL_TRUST_ROOTS=.*|PAYPAL_TRUST_ROOTS=/opt/payrecon-1.0/share/payrecon/certs/paypal-trust-roots.pem|' "$env_file"
"$ROOT/scripts/install" --root "$T/root" --binary "$PAYRECON_BIN" >"$T/install2c.log" 2>&1 || { cat "$T/install2c.log"; fail "scripts/install over an older install's trust roots"; }
[ "$(sed -n 's/^PAYPAL_TRUST_ROOTS=//p' "$env_file")" = "$roots" ] || fail "scripts/install left PAYPAL_TRUST_ROOTS at an older install's shipped bundle"
ok "scripts/install: binary, migrations, trust roots, units, env template and payrecon-env where the template and units say; over an install, the secrets and a custom trust bundle are kept and the shipped paths follow"

# serve, the one process strangers reach, has a user, an environment file and a database role of its own: no provider
# API credential in its file, payrecon.env out of its reach, and no migration run as it.
serve_unit="$T/root/etc/systemd/system/payrecon-serve.service"
[ -f "$serve_env" ] || fail "scripts/install did not install serve.env"
grep -qx 'EnvironmentFile=/etc/payrecon/serve.env' "$serve_unit" || fail "payrecon-serve.service does not read /etc/payrecon/serve.env"
grep -qx 'User=payrecon-serve' "$serve_unit" || fail "payrecon-serve.service does not run as payrecon-serve"
grep -qx 'InaccessiblePaths=-/etc/payrecon/payrecon.env' "$serve_unit" || fail "payrecon-serve.service can read payrecon.env"
! grep -q 'migrate' <(grep '^Exec' "$serve_unit") || fail "payrecon-serve.service runs migrate (as serve's role, which cannot)"
grep -qx 'Wants=network-online.target payrecon-migrate.service' "$serve_unit" || fail "payrecon-serve.service does not pull in payrecon-migrate.service"
api=$(grep -oE '^(PXP_(CLIENT_ID|TOKEN_ID|TOKEN_VALUE)|PAYPAL_CLIENT_(ID|SECRET)|PAYPERCUT_SECRET_KEY)(_FILE)?=' "$serve_env" || true)
[ -z "$api" ] || fail "serve.env names provider API credentials: $api"
# An upgrade from a payrecon whose serve read payrecon.env: serve.env is made from what serve read there, byte for byte.
mkdir -p "$T/old/etc/payrecon"
python3 - "$ROOT/deploy/payrecon.env" "$T/old/etc/payrecon/payrecon.env" <<'PY'
import sys
text = open(sys.argv[1]).read().replace("PAYRECON_SERVE_ROLE=payrecon_serve\n", "")
text += "DATABASE_URL=postgresql://payrecon:p&a|s\\x$y@localhost/payrecon\nPXP_WEBHOOK_KEY=k&ey\nPAYRECON_LISTEN=0.0.0.0:9000\n"
open(sys.argv[2], "w").write(text)
PY
"$ROOT/scripts/install" --root "$T/old" --binary "$PAYRECON_BIN" >"$T/install3.log" 2>&1 || { cat "$T/install3.log"; fail "scripts/install over an install without serve.env"; }
for want in 'DATABASE_URL=postgresql://payrecon:p&a|s\x$y@localhost/payrecon' 'PXP_WEBHOOK_KEY=k&ey' 'PAYRECON_LISTEN=0.0.0.0:9000'; do
    grep -qxF "$want" "$T/old/etc/payrecon/serve.env" || fail "an upgrade's serve.env lacks $want (what serve read in payrecon.env)"
done
ok "serve has its own user, environment file (no provider API credential) and role; migrations run as the owner; an upgrade's serve.env keeps what serve read"

# 2. The template's settings, with the throwaway root's paths and this machine's free ports.
set -a
# shellcheck disable=SC1090
. "$env_file"
set +a
BIN="$T/root$exec_start"
serve_port=$(free_port); serve_metrics=$(free_port); work_metrics=$(free_port); prom_port=$(free_port)
export DATABASE_URL=$TEST_DATABASE_URL PAYRECON_SQL_DIR="$T/root$sql_dir" PAYRECON_LOG_LEVEL=warning PAYRECON_DB_PROBE_INTERVAL=1s
export PAYRECON_LISTEN=127.0.0.1:$serve_port PAYRECON_METRICS_LISTEN=127.0.0.1:$serve_metrics PAYRECON_WORK_METRICS_LISTEN=127.0.0.1:$work_metrics
grep -q "^PAYRECON_TRUSTED_PROXIES=." "$serve_env" || fail "serve.env names no PAYRECON_TRUSTED_PROXIES"
export PXP_CLIENT_ID=demo-client PXP_TOKEN_ID=demo-token PXP_TOKEN_VALUE=demo-token-value PXP_WEBHOOK_KEY=demo-webhook-key
export PAYPAL_CLIENT_ID=demo-paypal PAYPAL_CLIENT_SECRET=demo-paypal-secret PAYPAL_WEBHOOK_ID=WEBHOOK_ID
export PAYPERCUT_SECRET_KEY=sk_test_paysim PAYPERCUT_WEBHOOK_SECRET=whsec_paysim

"$PAYSIM_BIN" --listen 127.0.0.1:0 --port-file "$T/paysim.port" --seed-file "$ROOT/demo/seed.json" \
    --paypal-root-out "$T/paypal-roots.pem" 2>"$T/paysim.log" &
pids+=($!)
for _ in $(seq 1 200); do [ -s "$T/paysim.port" ] && break; sleep 0.05; done
SIM="http://127.0.0.1:$(cat "$T/paysim.port")"
export PXP_API_BASE_URL="$SIM/api/v1" PAYPAL_API_BASE_URL="$SIM" PAYPERCUT_API_BASE_URL="$SIM"
export PAYPAL_TRUST_ROOTS="$T/paypal-roots.pem" PAYPAL_CERT_URL_PREFIXES="$SIM/v1/notifications/certs/"

# serve's database role, as docs/OPERATIONS.md (Least privilege for serve) has the operator create it; migrate gives it its grants.
serve_role="payrecon_serve_ops_$$"
psql -q "$TEST_DATABASE_URL" -c "CREATE ROLE $serve_role LOGIN" || fail "cannot create serve's role $serve_role"
drop_role() { psql -q "$TEST_DATABASE_URL" -c "DROP OWNED BY $serve_role" -c "DROP ROLE $serve_role" >/dev/null 2>&1 || true; }
trap 'cleanup; drop_role' EXIT
serve_url=$(printf '%s' "$TEST_DATABASE_URL" | sed -E "s|://[^@/]*@|://$serve_role@|")
[ "$(sed -n 's/^PAYRECON_SERVE_ROLE=//p' "$env_file")" = payrecon_serve ] || fail "payrecon.env does not name serve's role"
PAYRECON_SERVE_ROLE=$serve_role "$BIN" migrate >"$T/migrate.log" 2>&1 || { cat "$T/migrate.log"; fail "payrecon migrate from the installed migrations"; }
grep -q "serve's role $serve_role may store deliveries" "$T/migrate.log" || { cat "$T/migrate.log"; fail "payrecon migrate did not grant serve's role"; }
"$BIN" orders import "$ROOT/demo/orders.csv" >/dev/null 2>&1 || fail "payrecon orders import"
# serve with serve.env's settings only (nothing of payrecon.env: no API credential), as serve's role.
env -i PATH="$PATH" HOME="$T" bash -c '
    set -a; . "$1"; set +a
    export DATABASE_URL=$2 PAYRECON_LISTEN=$3 PAYRECON_METRICS_LISTEN=$4 PAYPAL_TRUST_ROOTS=$5 PAYPAL_CERT_URL_PREFIXES=$6
    export PXP_WEBHOOK_KEY=demo-webhook-key PAYPAL_WEBHOOK_ID=WEBHOOK_ID PAYPERCUT_WEBHOOK_SECRET=whsec_paysim PAYRECON_LOG_LEVEL=info
    export PAYRECON_DB_PROBE_INTERVAL=1s
    exec "$7" serve' serve "$serve_env" "$serve_url" "$PAYRECON_LISTEN" "$PAYRECON_METRICS_LISTEN" "$PAYPAL_TRUST_ROOTS" \
    "$PAYPAL_CERT_URL_PREFIXES" "$BIN" 2>"$T/serve.log" &
pids+=($!)
"$BIN" work 2>"$T/work.log" &
work_pid=$!; pids+=("$work_pid")
wait_http "http://127.0.0.1:$serve_metrics/readyz" || fail "the installed serve is not ready on PAYRECON_METRICS_LISTEN"
wait_http "http://127.0.0.1:$work_metrics/metrics" || fail "the installed work does not answer /metrics on PAYRECON_WORK_METRICS_LISTEN"
ok "serve (serve.env's settings, serve's role) and work (payrecon.env's) started from the installed files (readyz and both /metrics answer)"

# 3. Prometheus with the shipped configuration and rules: targets at this run's ports, `for:` shortened to seconds.
mkdir -p "$T/prom"
sed -e "s/127.0.0.1:9463/127.0.0.1:$serve_metrics/; s/127.0.0.1:9464/127.0.0.1:$work_metrics/" \
    -e 's/scrape_interval: 15s/scrape_interval: 1s/; s/evaluation_interval: 15s/evaluation_interval: 1s/' \
    "$ROOT/deploy/prometheus/prometheus.yml" >"$T/prom/prometheus.yml"
grep -q "127.0.0.1:$work_metrics" "$T/prom/prometheus.yml" || fail "deploy/prometheus/prometheus.yml does not scrape 127.0.0.1:9464 (PAYRECON_WORK_METRICS_LISTEN)"
sed -E 's/^( *)for: [0-9]+[smh]$/\1for: 3s/' "$ROOT/deploy/prometheus/alerts.yml" >"$T/prom/alerts.yml"
"$PROMETHEUS" --config.file="$T/prom/prometheus.yml" --storage.tsdb.path="$T/prom/data" \
    --web.listen-address="127.0.0.1:$prom_port" >"$T/prometheus.log" 2>&1 &
pids+=($!)
PROM="http://127.0.0.1:$prom_port"
wait_http "$PROM/-/ready" || fail "prometheus did not start"
# Both targets scraped once before any traffic, so the traffic shows as an increase (a series first seen after it
# reads as none).
for _ in $(seq 1 100); do
    up=$(curl -fsS --get "$PROM/api/v1/query" --data-urlencode 'query=sum(up{job=~"payrecon-serve|payrecon-work"})' \
        | python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)')
    [ "$up" = 2 ] && break; sleep 0.2
done
[ "$up" = 2 ] || fail "prometheus did not scrape both serve and work (up: $up)"

# 4. Traffic: paysim delivers signed webhooks from the demo book (discrepancies, actions, money at risk), and a forgery.
RECV="http://127.0.0.1:$serve_port"
send() { curl -sS -X POST "$SIM/admin/webhooks/send" -H 'Content-Type: application/json' -d "$1" >>"$T/webhooks.log"; echo >>"$T/webhooks.log"; }
for tx in PXP-CAPTURE-1 PXP-SHORT-1 PXP-CURRENCY-1; do
    send "{\"provider\":\"pxp\",\"target\":\"$RECV/webhooks/pxp\",\"merchantTransactionId\":\"$tx\",\"merchant\":\"MERCH-A\",\"site\":\"WEB\"}"
done
send "{\"provider\":\"paypal\",\"target\":\"$RECV/webhooks/paypal\",\"event_type\":\"CHECKOUT.ORDER.COMPLETED\",\"order_id\":\"PP-OVERCAPTURE-1\"}"
send "{\"provider\":\"pxp\",\"target\":\"$RECV/webhooks/pxp\",\"merchantTransactionId\":\"PXP-CAPTURE-1\",\"merchant\":\"MERCH-A\",\"site\":\"WEB\",\"forged\":true}"
for _ in $(seq 1 300); do
    pending=$(psql "$DATABASE_URL" -tAc "SELECT count(*) FROM deliveries WHERE status = 'pending'")
    [ "$pending" = 0 ] && break; sleep 0.1
done
[ "$pending" = 0 ] || fail "$pending deliveries still pending after 30 s"
"$BIN" reconcile --all >"$T/reconcile.log" 2>&1 || true
ok "paysim's signed deliveries were processed by the installed worker, and a nightly run made"
stored=$(psql "$DATABASE_URL" -tAc "SELECT count(*) FROM deliveries")
[ "$stored" -ge 4 ] || fail "serve, as its role, stored $stored deliveries (4 sent)"
for sql in "SELECT body FROM deliveries LIMIT 1" "SELECT * FROM orders LIMIT 1" "UPDATE deliveries SET status = 'done'" "SELECT * FROM actions LIMIT 1"; do
    if out=$(psql "$serve_url" -v ON_ERROR_STOP=1 -tAc "$sql" 2>&1); then fail "serve's role may: $sql"; fi
    case "$out" in *"permission denied"*) ;; *) fail "serve's role: $sql failed, but not for want of privilege: $out" ;; esac
done
ok "serve's role stored $stored deliveries, and may not read a body or an order, change a delivery's status or read actions"

# 5. Every dashboard panel's query returns data (the worker refreshes its database-backed gauges at start and every
#    15 s; rates need two scrapes).
query() { curl -fsS --get "$PROM/api/v1/query" --data-urlencode "query=$1"; }
python3 - "$ROOT/deploy/grafana/payrecon.json" >"$T/panels.tsv" <<'PY'
import json, sys
for panel in json.load(open(sys.argv[1]))["panels"]:
    for target in panel.get("targets", []):
        if target.get("expr"):
            print(f"{panel['title']}\t{target['expr']}")
PY
deadline=$((SECONDS + 40)); missing=""
while :; do
    missing=""
    while IFS=$'\t' read -r title expr; do
        # A number, not NaN (a quantile or a mean over nothing is NaN: no data to show).
        n=$(query "$expr" | python3 -c 'import json, sys; d = json.load(sys.stdin)["data"]; r = d["result"]
print(sum(1 for x in r if x["value"][1] != "NaN") if d["resultType"] == "vector" else (len(r) if d["resultType"] == "matrix" else int(r[1] != "NaN")))')
        [ "$n" -gt 0 ] || missing="$missing; $title ($expr)"
    done <"$T/panels.tsv"
    [ -z "$missing" ] && break
    [ $SECONDS -lt $deadline ] || fail "dashboard panels with no data:${missing#;}"
    sleep 2
done
ok "every Grafana panel's query returns data ($(wc -l <"$T/panels.tsv") queries)"

# The HTML report of what this traffic found, for scripts/lib/report-check.sh (REPORT_HTML names where).
[ -z "${REPORT_HTML:-}" ] || "$BIN" report --format html --output "$REPORT_HTML" >/dev/null 2>&1 || fail "payrecon report --format html"

alerts() { curl -fsS "$PROM/api/v1/alerts" | python3 -c 'import json, sys; print(" ".join(sorted(a["labels"]["alertname"] + ":" + a["state"] for a in json.load(sys.stdin)["data"]["alerts"])))'; }
active=$(alerts)
[ -z "$active" ] || fail "alerts active on a healthy install: $active"
ok "no alert is pending or firing on a healthy install"

# 6. The worker stops: PayreconWorkerDown goes pending (then firing, `for:` being 3 s here).
kill "$work_pid"; wait "$work_pid" 2>/dev/null || true
for _ in $(seq 1 40); do
    active=$(alerts)
    case "$active" in *PayreconWorkerDown:*) break ;; esac
    sleep 0.5
done
case "$active" in *PayreconWorkerDown:*) ok "stopping the worker turns PayreconWorkerDown ${active##*PayreconWorkerDown:}" ;;
    *) fail "the worker stopped, but PayreconWorkerDown is not pending (active: ${active:-none})" ;; esac
# 7. PostgreSQL stops, with no traffic at all: serve's probe turns PayreconDatabaseDown pending (then firing), its log
#    says so once with libpq's reason, and says when the database is back. (scripts/test names the cluster.)
if [ -n "${PAYRECON_PG_DATADIR:-}" ] && [ "${PAYRECON_OPS_MAY_STOP_PG:-0}" = 1 ] && [ -n "${PAYRECON_PG_PORT:-}" ]; then
    pg_port=$PAYRECON_PG_PORT
    pgctl() { # pg_ctl on the test cluster, as its owner
        local bin=${PAYRECON_PG_BIN:-/usr/lib/postgresql/15/bin}
        if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$(printf '%q ' "$bin/pg_ctl" -D "$PAYRECON_PG_DATADIR" "$@")"
        else "$bin/pg_ctl" -D "$PAYRECON_PG_DATADIR" "$@"; fi
    }
    pgctl -m fast -w stop >/dev/null 2>&1 || fail "cannot stop the test cluster in $PAYRECON_PG_DATADIR"
    # Starts the cluster unless it runs (it may already have been started again when the exit trap runs).
    restart_pg() { pgctl status >/dev/null 2>&1 || pgctl -l "$PAYRECON_PG_DATADIR/server.log" -o "-p $pg_port" -w -t 60 start >/dev/null 2>&1; }
    trap 'restart_pg; cleanup; drop_role' EXIT
    for _ in $(seq 1 60); do
        active=$(alerts)
        case "$active" in *PayreconDatabaseDown:*) break ;; esac
        sleep 0.5
    done
    case "$active" in *PayreconDatabaseDown:*) ;; *) restart_pg; fail "PostgreSQL stopped with no traffic, but PayreconDatabaseDown is not pending (active: ${active:-none})" ;; esac
    sleep 3
    restart_pg || fail "the test cluster did not start again"
    trap 'cleanup; drop_role' EXIT
    for _ in $(seq 1 60); do grep -q "database reachable again" "$T/serve.log" && break; sleep 0.5; done
    grep -q "database reachable again" "$T/serve.log" || { cat "$T/serve.log"; fail "serve did not say the database is back"; }
    [ "$(grep -c "database out of reach" "$T/serve.log")" = 1 ] || { cat "$T/serve.log"; fail "serve did not say the outage exactly once"; }
    state=$(printf '%s\n' $active | sed -n 's/^PayreconDatabaseDown://p' | head -1)
    ok "PostgreSQL stopped with no traffic turns PayreconDatabaseDown $state; serve logs the outage once and says when the database is back"
fi
echo "operations-check: $passed passed"
