#!/usr/bin/env bash
# `payrecon console` in a real browser, over the demo's data: scripts/demo runs into this database (its schema
# payrecon_demo) and is held up (PAYRECON_DEMO_HOLD: paysim and the worker stay up, so a failed action can be
# retried against the provider), a discrepancy holding a provider's `<script>` is added, two users are made with
# `payrecon console add-user`, the console is started with the demo's settings (.data/demo/env), and
# scripts/lib/console-check.py drives Debian's Chromium through chromium-driver (selenium), with axe-core judging
# each page. Screenshots at 1400 and 800 px go to SHOTS_DIR.
#   PAYRECON_BIN=.build/debug/payrecon DATABASE_URL=postgresql://…/a_fresh_database scripts/lib/console-check.sh [SHOTS_DIR]
# Prints one line per check and `console-check: N passed`; exits 1 on the first failure.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
: "${PAYRECON_BIN:?set PAYRECON_BIN to the payrecon binary}" "${DATABASE_URL:?set DATABASE_URL to a fresh database the check may write to}"
shots=${1:-$ROOT/.data/console}
mkdir -p "$shots"
T=$(mktemp -d /tmp/payrecon-console.XXXXXX)
console_pid= demo_pid=
cleanup() {
    [ -n "$console_pid" ] && { kill "$console_pid" 2>/dev/null || true; wait "$console_pid" 2>/dev/null || true; }
    # Closing the demo's standard input lets it stop what it started.
    exec 3>&- || true
    [ -n "$demo_pid" ] && { wait "$demo_pid" 2>/dev/null || true; }
    rm -rf "$T"
}
trap cleanup EXIT
fail() { printf 'FAIL %s\n' "$*"; [ -s "$T/console.log" ] && { echo "--- console log (last lines)"; tail -5 "$T/console.log"; }; exit 1; }

# The demo's data, in its own schema of this database; the demo stays up until its standard input (a FIFO held open
# on fd 3) ends.
mkfifo "$T/hold"
PAYRECON_DEMO_HOLD=1 DATABASE_URL="$DATABASE_URL" "$ROOT/scripts/demo" <"$T/hold" >"$T/demo.log" 2>&1 &
demo_pid=$!
exec 3>"$T/hold"
for _ in $(seq 1 6000); do  # up to 10 minutes: the demo may build first
    grep -q "everything stays up until standard input ends" "$T/demo.log" && break
    kill -0 "$demo_pid" 2>/dev/null || { tail -20 "$T/demo.log"; demo_pid=; fail "scripts/demo"; }
    sleep 0.1
done
grep -q "everything stays up until standard input ends" "$T/demo.log" || { tail -20 "$T/demo.log"; fail "scripts/demo did not get ready"; }
# shellcheck disable=SC1091
. "$ROOT/.data/demo/env"
url=$DATABASE_URL
psql "$url" -qc "INSERT INTO discrepancies (provider, transaction_ref, kind, expected, actual, detail, amount_at_risk_minor)
                 VALUES ('paypal', 'TX-SCRIPT', 'unknown_order', '{}', '{\"note\": \"<script>alert(1)</script>\"}',
                         'PayPal names <script>alert(1)</script> as the payer', 0)" >/dev/null || fail "adding the <script> discrepancy"
DATABASE_URL="$url" "$PAYRECON_BIN" report --format json --status open >"$T/report.json" || fail "payrecon report --format json"

viewer="vera:viewer password $RANDOM$RANDOM" operator="olga:operator password $RANDOM$RANDOM"
printf '%s\n' "${viewer#*:}" | PAYRECON_CONSOLE_USERS_FILE="$T/users" "$PAYRECON_BIN" console add-user vera --role viewer >/dev/null \
    || fail "console add-user vera"
printf '%s\n' "${operator#*:}" | PAYRECON_CONSOLE_USERS_FILE="$T/users" "$PAYRECON_BIN" console add-user olga --role operator >/dev/null \
    || fail "console add-user olga"
PAYRECON_CONSOLE_USERS_FILE="$T/users" \
    "$PAYRECON_BIN" console --listen 127.0.0.1:0 --port-file "$T/port" >"$T/console.log" 2>&1 &
console_pid=$!
for _ in $(seq 1 100); do [ -s "$T/port" ] && break; sleep 0.1; done
[ -s "$T/port" ] || fail "the console did not start"

CONSOLE_URL="http://127.0.0.1:$(cat "$T/port")" REPORT_JSON="$T/report.json" SHOTS="$shots" VIEWER="$viewer" OPERATOR="$operator" \
    python3 "$ROOT/scripts/lib/console-check.py" || fail "the browser checks"
