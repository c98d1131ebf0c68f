#!/usr/bin/env bash
# Runs deploy/nginx/payrecon.conf with a real nginx in front of a real `payrecon serve` and checks what docs/OPERATIONS.md
# promises of it. The shipped file is used as it is, except for its listen addresses, certificate paths and upstream
# address (each replaced on its own line, checked below). Everything runs on 127.0.0.0/8 under a temporary directory,
# and everything started here is stopped on exit, failed or not.
#   PAYRECON_BIN=.build/debug/payrecon PAYSIM_BIN=.build/debug/paysim DATABASE_URL=postgresql://… \
#       scripts/lib/nginx-check.sh
# DATABASE_URL: a database this check may write deliveries and rejection counts to (it runs `payrecon migrate`).
# PAYSIM_BIN is accepted for symmetry with the other checks; none of these deliveries needs it (python3 and curl sign
# and send them). Prints one line per assertion and `nginx-check: N passed`; exits 1 on the first failure.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CONF="$ROOT/deploy/nginx/payrecon.conf"
LIB="$ROOT/scripts/lib"
: "${PAYRECON_BIN:?set PAYRECON_BIN to the payrecon binary}"
: "${DATABASE_URL:?set DATABASE_URL to a database the check may write to}"
PAYRECON_BIN=$(cd "$(dirname "$PAYRECON_BIN")" && pwd)/$(basename "$PAYRECON_BIN")
[ -x "$PAYRECON_BIN" ] || { echo "nginx-check: $PAYRECON_BIN is not executable" >&2; exit 2; }

KEY=nginx-check-key           # PXP_WEBHOOK_KEY of this serve
SENDER=127.0.0.7              # the source address of assertion d
passed=0

note() { printf 'nginx-check: %s\n' "$*"; }
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$*"; }
fail() {
    printf 'FAIL %s\n' "$*"
    # nginx's error log, without the lines assertion e causes on purpose.
    local expected='client intended to send too large body|request body is buffered to a temporary file'
    if grep -Eqv "$expected" "${T:-/nonexistent}/error.log" 2>/dev/null; then
        echo "--- nginx error.log (last lines)"; grep -Ev "$expected" "$T/error.log" | tail -5
    fi
    [ -s "${T:-/nonexistent}/serve.log" ] && { echo "--- serve log (last lines)"; tail -5 "$T/serve.log"; }
    exit 1
}

NGINX=/usr/sbin/nginx
if [ ! -x "$NGINX" ]; then
    note "installing nginx-light"
    as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx-light >/dev/null \
        || { echo "nginx-check: apt-get install nginx-light failed" >&2; exit 2; }
fi
for tool in openssl curl psql python3; do
    command -v "$tool" >/dev/null || { echo "nginx-check: $tool is required" >&2; exit 2; }
done

T=$(mktemp -d /tmp/nginx-check.XXXXXX)
nginx_pid='' serve_pid=''
cleanup() {
    local pid
    for pid in $nginx_pid $serve_pid; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in $nginx_pid $serve_pid; do
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Three distinct free loopback ports: nginx (TLS), serve's webhook listener, serve's metrics listener.
read -r NGINX_PORT SERVE_PORT METRICS_PORT < <(python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
PY
)
IPV6=0
python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null && IPV6=1

# --- A throwaway CA and a server certificate for 127.0.0.1 (CN localhost).
(
    cd "$T"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=nginx-check-ca \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
        -keyout ca.key -out ca.pem
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
        -keyout server.key -out server.csr
    printf 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial 1 -days 1 -extfile server.ext -out server.pem
) >"$T/openssl.log" 2>&1 || { cat "$T/openssl.log"; fail "openssl could not make the test certificates"; }

# --- The shipped file with only its addresses and certificate paths replaced. Each replaced line must be there
# exactly once, and nothing else may differ: if the file changes shape, this says so instead of testing something else.
listen6="listen [::1]:$NGINX_PORT ssl;"
[ "$IPV6" = 1 ] || listen6="# listen [::]:443 ssl; (left out: no IPv6 loopback here)"
rules=(
    "listen 443 ssl;|listen 127.0.0.1:$NGINX_PORT ssl;"
    "listen [::]:443 ssl;|$listen6"
    "ssl_certificate     /etc/ssl/certs/payrecon-webhooks.pem;|ssl_certificate     $T/server.pem;"
    "ssl_certificate_key /etc/ssl/private/payrecon-webhooks.key;|ssl_certificate_key $T/server.key;"
    "server 127.0.0.1:8080;|server 127.0.0.1:$SERVE_PORT;"
)
python3 - "$CONF" "$T/payrecon.conf" "${rules[@]}" <<'PY' || fail "cannot render deploy/nginx/payrecon.conf for the test (see above)"
import sys
src, dst, rules = sys.argv[1], sys.argv[2], [r.split("|", 1) for r in sys.argv[3:]]
lines = open(src).read().split("\n")
for old, new in rules:
    hits = [i for i, line in enumerate(lines) if line.strip().split("#")[0].strip() == old]
    if len(hits) != 1:
        sys.exit(f"{src}: expected exactly one line `{old}`, found {len(hits)}: update scripts/lib/nginx-check.sh")
    i = hits[0]
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + new
open(dst, "w").write("\n".join(lines))
PY
changed=$(diff "$CONF" "$T/payrecon.conf" | grep -c '^>' || true)
[ "$changed" = "${#rules[@]}" ] || fail "the rendered file differs from deploy/nginx/payrecon.conf in $changed lines, not ${#rules[@]}"

# A minimal main configuration around it: all state under $T, one worker, in the foreground.
mkdir -p "$T/logs"
{
    [ "$(id -u)" = 0 ] && echo "user root;"   # the workers must read the keys under $T (mode 0700)
    cat <<EOF
worker_processes 1;
daemon off;
pid $T/nginx.pid;
error_log $T/error.log warn;
events { worker_connections 256; }
http {
    access_log $T/access.log;
    client_body_temp_path $T/body;
    proxy_temp_path $T/proxy;
    fastcgi_temp_path $T/fastcgi;
    uwsgi_temp_path $T/uwsgi;
    scgi_temp_path $T/scgi;
    include $T/payrecon.conf;
}
EOF
} >"$T/nginx.conf"

"$NGINX" -t -q -p "$T" -e "$T/error.log" -c "$T/nginx.conf" >"$T/nginx-t.log" 2>&1 \
    || { cat "$T/nginx-t.log" "$T/error.log" 2>/dev/null; fail "nginx -t rejects deploy/nginx/payrecon.conf"; }
ok "nginx -t accepts deploy/nginx/payrecon.conf (nginx $("$NGINX" -v 2>&1 | sed 's|.*nginx/||'))"

# --- serve, as docs/OPERATIONS.md configures it behind nginx.
(cd "$ROOT" && PAYRECON_SQL_DIR="$ROOT/sql" "$PAYRECON_BIN" migrate) >"$T/migrate.log" 2>&1 \
    || { cat "$T/migrate.log"; fail "payrecon migrate failed against DATABASE_URL"; }
(
    cd "$ROOT"
    exec env PAYRECON_LISTEN="127.0.0.1:$SERVE_PORT" PAYRECON_METRICS_LISTEN="127.0.0.1:$METRICS_PORT" \
        PAYRECON_TRUSTED_PROXIES=127.0.0.1 PAYRECON_REQUEST_TIMEOUT=2s PAYRECON_LOG_LEVEL=error \
        PAYRECON_MAX_BODY_BYTES=1048576 PAYRECON_SQL_DIR="$ROOT/sql" PXP_WEBHOOK_KEY="$KEY" \
        "$PAYRECON_BIN" serve
) >"$T/serve.log" 2>&1 &
serve_pid=$!
"$NGINX" -p "$T" -e "$T/error.log" -c "$T/nginx.conf" >>"$T/error.log" 2>&1 &
nginx_pid=$!

# Up when each answers HTTP at all (serve's webhook listener answers a GET of an unknown path with 404).
wait_http() { # URL what [curl options]
    local url=$1 what=$2 code; shift 2
    for _ in $(seq 1 100); do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$@" "$url" 2>/dev/null) || true
        [ "${code:-000}" != 000 ] && return 0
        kill -0 "$serve_pid" 2>/dev/null || fail "payrecon serve exited at start"
        kill -0 "$nginx_pid" 2>/dev/null || fail "nginx exited at start"
        sleep 0.1
    done
    fail "$what did not answer at $url within 10 s"
}
wait_http "http://127.0.0.1:$SERVE_PORT/nginx-check" "payrecon serve"
wait_http "https://127.0.0.1:$NGINX_PORT/" "nginx" --cacert "$T/ca.pem"

rid() { printf 'nginx-check-%s-%s' "$$" "$(date +%s%N)"; }   # a fresh X-Request-Id: a delivery is never a duplicate
sign() { # FILE RID TS [KEY]: the X-Signature of the body in FILE
    python3 - "$LIB" "$@" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from pxp_body import signature
path, rid, ts = sys.argv[2:5]
key = sys.argv[5] if len(sys.argv) > 5 else "nginx-check-key"
print(signature(key, rid, ts, open(path, "rb").read()))
PY
}
# post_pxp FILE [KEY [curl options]]: POSTs the body in FILE as a PXP delivery through nginx, signed with KEY.
# Sets RID (its X-Request-Id), CODE and BODY (the answer).
post_pxp() {
    local file=$1 key=${2:-$KEY} ts sig; shift 2 || shift $#
    RID=$(rid); ts=$(date +%s); sig=$(sign "$file" "$RID" "$ts" "$key")
    CODE=$(curl -sS -o "$T/answer" -w '%{http_code}' --max-time 10 --cacert "$T/ca.pem" "$@" \
        -H 'Content-Type: application/json' -H 'Expect:' -H "X-Request-Id: $RID" \
        -H "X-Signature-Timestamp: $ts" -H "X-Signature: $sig" \
        --data-binary "@$file" "https://127.0.0.1:$NGINX_PORT/webhooks/pxp" 2>"$T/curl.err") || CODE=${CODE:-000}
    BODY=$(head -c 300 "$T/answer" 2>/dev/null || true)
    [ "$CODE" != 000 ] || BODY=$(cat "$T/curl.err")
}
status_of() { # URL [curl options]: the HTTP status (000 when nothing answered)
    local url=$1; shift
    curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" "$url" 2>/dev/null || true
}

# a. A signed delivery over HTTPS through nginx is accepted, and serve got nginx's one X-Forwarded-For hop, not the
# one the client sent.
printf '{"eventCode":"Authorised","merchantTransactionId":"NGINX-A-%s"}' "$$" >"$T/a.json"
post_pxp "$T/a.json" "$KEY" -H "X-Forwarded-For: 198.51.100.9"
[ "$CODE" = 200 ] && grep -q '"status":"accepted"' <<<"$BODY" \
    || fail "a. a signed PXP delivery through nginx got $CODE $BODY, not 200 accepted"
ok "a. a signed PXP delivery over HTTPS through nginx: 200 accepted"
xff=$(psql "$DATABASE_URL" -XqtA -c "SELECT string_agg(h->>1, ' / ') FROM deliveries, jsonb_array_elements(headers) h
    WHERE provider = 'pxp' AND dedupe_key = '$RID' AND lower(h->>0) = 'x-forwarded-for'") \
    || fail "a. cannot read the stored delivery with psql \"\$DATABASE_URL\""
[ "$xff" = 127.0.0.1 ] || fail "a. the stored delivery has X-Forwarded-For '$xff', not the one hop 127.0.0.1 nginx sets (the client sent 198.51.100.9)"
ok "a. serve got X-Forwarded-For 127.0.0.1 (the client as nginx saw it), not the client's own 198.51.100.9"

# c. Request buffering: a body trickled over ~4 s, twice serve's PAYRECON_REQUEST_TIMEOUT of 2 s, is accepted
# through nginx. The same trickle straight to serve is cut off, so the first result is nginx's doing.
trickle() { # tls|plain PORT: prints the status line, or "cut off after S s"
    python3 - "$LIB" "$1" "$2" "$T/ca.pem" "$KEY" "$(rid)" <<'PY'
import socket, ssl, sys, time
sys.path.insert(0, sys.argv[1])
from pxp_body import body, signature
mode, port, cafile, key, rid = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
payload = body(rid)
ts = str(int(time.time()))
head = (f"POST /webhooks/pxp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nX-Request-Id: {rid}\r\nX-Signature-Timestamp: {ts}\r\n"
        f"X-Signature: {signature(key, rid, ts, payload)}\r\nConnection: close\r\n\r\n").encode()
sock = socket.create_connection(("127.0.0.1", port), timeout=10)
if mode == "tls":
    sock = ssl.create_default_context(cafile=cafile).wrap_socket(sock, server_hostname="127.0.0.1")
start = time.monotonic()
pieces = 9
step = -(-len(payload) // pieces)
answer = b""
try:
    sock.sendall(head)
    for i in range(pieces):
        time.sleep(0.5)  # 9 pieces, 0.5 s before each: the last byte leaves after ~4.5 s
        sock.sendall(payload[i * step:(i + 1) * step])
    while chunk := sock.recv(65536):
        answer += chunk
except OSError:
    pass
took = time.monotonic() - start
if answer.startswith(b"HTTP/"):
    status = answer.split(b"\r\n", 1)[0].decode()
    text = " ".join(answer.split(b"\r\n\r\n", 1)[-1][:200].decode(errors="replace").split())
    print(f"{status} after {took:.1f} s: {text}")
else:
    print(f"cut off after {took:.1f} s")
PY
}
got=$(trickle tls "$NGINX_PORT")
[[ $got == "HTTP/1.1 200"*'"status":"accepted"'* ]] \
    || fail "c. a delivery trickled to nginx over ~4.5 s got: $got (nginx should have buffered it whole)"
direct=$(trickle plain "$SERVE_PORT")
[[ $direct == "cut off"* ]] \
    || fail "c. control: the same trickle straight to serve got \"$direct\", not cut off by PAYRECON_REQUEST_TIMEOUT=2s: the check above proves nothing"
ok "c. a delivery trickled over ~4.5 s through nginx: ${got%% after*} (straight to serve it is $direct)"

# e. The body limit: exactly 1048576 bytes passes (serve's PAYRECON_MAX_BODY_BYTES); one more is refused by nginx.
pad() { # FILE SIZE: a PXP event of exactly SIZE bytes
    python3 -c '
import sys
path, size = sys.argv[1], int(sys.argv[2])
head, tail = b"{\"eventCode\":\"Authorised\",\"merchantTransactionId\":\"NGINX-E-" + sys.argv[3].encode() + b"\",\"pad\":\"", b"\"}"
open(path, "wb").write(head + b"x" * (size - len(head) - len(tail)) + tail)' "$1" "$2" "$$"
}
pad "$T/e-max.json" 1048576
post_pxp "$T/e-max.json"
[ "$CODE" = 200 ] || fail "e. a signed delivery of exactly 1048576 bytes through nginx got $CODE $BODY, not 200"
pad "$T/e-over.json" 1048577
post_pxp "$T/e-over.json"
[ "$CODE" = 413 ] && grep -qi '<center>nginx</center>' "$T/answer" \
    || fail "e. a delivery of 1048577 bytes through nginx got $CODE $BODY, not nginx's 413"
ok "e. body limit: 1048576 bytes accepted, 1048577 refused by nginx with 413"

# b. Only /webhooks/ is routed: health and metrics stay on serve's internal listener.
for path in /metrics /readyz /healthz /webhooks/../metrics; do
    code=$(status_of "https://127.0.0.1:$NGINX_PORT$path" --cacert "$T/ca.pem" --path-as-is)
    [ "$code" = 404 ] || fail "b. GET $path through nginx answered $code, not 404"
done
ok "b. /metrics, /readyz, /healthz (and /webhooks/../metrics) through nginx: 404"
code=000
for _ in $(seq 1 30); do
    code=$(status_of "http://127.0.0.1:$METRICS_PORT/healthz")
    [ "$code" = 000 ] || break
    sleep 0.1
done
[ "$code" = 200 ] || fail "b. nothing answers /healthz on PAYRECON_METRICS_LISTEN=127.0.0.1:$METRICS_PORT (got $code): serve did not open its metrics listener"
curl -s --max-time 5 -o "$T/metrics" "http://127.0.0.1:$METRICS_PORT/metrics" \
    && grep -q '^# TYPE payrecon_deliveries_total ' "$T/metrics" \
    || fail "b. /metrics on 127.0.0.1:$METRICS_PORT is not Prometheus text with payrecon_deliveries_total"
code=$(status_of "http://127.0.0.1:$METRICS_PORT/readyz")
[ "$code" = 200 ] || fail "b. /readyz on the metrics listener answered $code, not 200"
for path in /metrics /readyz /healthz; do
    code=$(status_of "http://127.0.0.1:$SERVE_PORT$path")
    [ "$code" = 404 ] || fail "b. GET $path on serve's webhook listener answered $code, not 404 (PAYRECON_METRICS_LISTEN is set)"
done
ok "b. /metrics, /readyz, /healthz answer on the metrics listener only (404 on the webhook listener)"

# d. The sender's address: a bad signature sent from $SENDER is counted under $SENDER, not under nginx's 127.0.0.1.
counts() { psql "$DATABASE_URL" -XqtA -c "SELECT source, sum(count) FROM rejection_counts GROUP BY source"; }
before=$(counts) || fail "d. cannot read rejection_counts with psql \"\$DATABASE_URL\""
printf '{"eventCode":"Authorised","merchantTransactionId":"NGINX-D-%s"}' "$$" >"$T/d.json"
post_pxp "$T/d.json" wrong-key --interface "$SENDER" -H "X-Forwarded-For: 198.51.100.9"
[ "$CODE" = 401 ] || fail "d. a delivery with a bad signature from $SENDER got $CODE $BODY, not 401"
grown=''
for _ in $(seq 1 25); do   # the receiver flushes rejection counts about once a second
    # The sources whose count grew since before the delivery (source|count lines; '' is an unknown source).
    grown=$(counts | awk -F'|' 'NR == FNR { was[$1] = $2; next } $2 > was[$1] + 0 { print ($1 == "" ? "(empty)" : $1) }' \
        <(printf '%s\n' "$before") - | paste -sd' ')
    [[ " $grown " == *" $SENDER "* ]] && break
    sleep 0.2
done
[[ " $grown " == *" $SENDER "* ]] || fail "d. the rejection was counted under source '${grown:-nothing within 5 s}', not $SENDER: serve did not take the sender from X-Forwarded-For (PAYRECON_TRUSTED_PROXIES=127.0.0.1)"
ok "d. a bad signature from $SENDER through nginx: 401, counted in rejection_counts under $SENDER (a forged X-Forwarded-For ignored)"

note "$passed passed"
