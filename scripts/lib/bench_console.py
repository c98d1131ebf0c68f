"""scripts/bench-console's measurement: each page asked REQUESTS times by one signed-in client over one keep-alive
connection, then the same rows read by psql over one session (`\\timing`, one statement after another: the console
reads the overview's three parts on three connections at once), and the console's RSS after each page.

Environment: CONSOLE_PORT, CONSOLE_PID, REQUESTS, ORDERS, DISCREPANCIES, DATABASE_URL."""
import http.client
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.parse

PORT = int(os.environ["CONSOLE_PORT"])
PID = os.environ["CONSOLE_PID"]
N = int(os.environ["REQUESTS"])
DISCREPANCIES = int(os.environ["DISCREPANCIES"])
GOAL_MS = 200.0

# The order of the 5,000th discrepancy (orders are numbered ORD-0000001 on; discrepancy i is on order 10 i).
SEARCHED = "ORD-%07d" % (min(5000, DISCREPANCIES) * 10)
FILTER = "status = 'open' AND provider = 'pxp' AND kind = 'amount_mismatch'"
COLUMNS = ("id, provider, order_id, transaction_ref, kind, status, expected::text, actual::text, detail, amount_at_risk_minor, currency, "
           "first_seen, last_seen, occurrences, resolved_at, acknowledged_at, ack_note, acknowledged_by, evidence_id")
ACTION_COLUMNS = ("id, provider, order_id, action, amount_minor, currency, target_minor, provider_target, idempotency_key, status, attempts, "
                  "last_error, provider_ref, created_at, in_doubt, transaction_ref, sent_at")
DELIVERY_COLUMNS = ("id, provider, dedupe_key, event_type, received_at, headers::text, body, status, attempts, next_attempt_at, last_error, "
                    "redeliveries, processed_at, outcome")
SESSION = ("UPDATE console_sessions SET last_seen = now() WHERE token_sha256 = '\\x00' AND last_seen >= now() - interval '30 minutes' "
           "RETURNING user_name")

OVERVIEW = [
    "BEGIN ISOLATION LEVEL REPEATABLE READ",
    "SELECT kind, currency, count(*) AS n, sum(amount_at_risk_minor)::text FROM discrepancies WHERE status = 'open' GROUP BY kind, currency",
    "SELECT currency, sum(m)::text FROM (SELECT currency, max(amount_at_risk_minor) AS m FROM discrepancies WHERE status = 'open' "
    "AND currency IS NOT NULL GROUP BY provider, coalesce(order_id, '?' || transaction_ref), currency) p GROUP BY currency",
    "SELECT provider, source, window_start FROM backfill_windows ORDER BY finished_at DESC LIMIT 1",
    "SELECT id, name FROM settlement_files ORDER BY id DESC LIMIT 1",
    "SELECT count(*) FILTER (WHERE status = 'pending' AND NOT in_doubt), count(*) FILTER (WHERE in_doubt), "
    "count(*) FILTER (WHERE status = 'failed') FROM actions WHERE status IN ('pending', 'failed')",
    "WITH hours AS (SELECT generate_series(date_trunc('hour', now()) - interval '23 hours', date_trunc('hour', now()), interval '1 hour') AS hour), "
    "stored AS (SELECT date_trunc('hour', received_at) AS hour, status, count(*) AS n FROM deliveries "
    "WHERE received_at >= (SELECT min(hour) FROM hours) GROUP BY 1, 2), "
    "rejected AS (SELECT hour, sum(count) AS rejected FROM rejection_counts WHERE hour >= (SELECT min(hour) FROM hours) GROUP BY 1) "
    "SELECT h.hour, sum(s.n) FILTER (WHERE s.status = 'done'), sum(s.n) FILTER (WHERE s.status = 'ignored'), "
    "sum(s.n) FILTER (WHERE s.status = 'dead'), sum(s.n) FILTER (WHERE s.status = 'pending'), min(r.rejected) "
    "FROM hours h LEFT JOIN stored s USING (hour) LEFT JOIN rejected r USING (hour) GROUP BY h.hour",
    "SELECT r.finished_at, e.key, e.value FROM runs r, jsonb_each_text(r.at_risk) e WHERE r.finished_at >= now() - interval '30 days'",
    "SELECT id, started_at FROM runs ORDER BY id DESC LIMIT 1",
    "COMMIT",
]


def pages(keyset_before):
    """(name, console path, psql statements reading the same rows)."""
    return [
        ("overview", "/", [SESSION] + OVERVIEW),
        ("discrepancies: open, pxp, amount_mismatch", "/discrepancies?status=open&provider=pxp&kind=amount_mismatch",
         [SESSION, f"SELECT {COLUMNS} FROM discrepancies WHERE {FILTER} ORDER BY id DESC LIMIT 51"]),
        ("discrepancies: search an order id", "/discrepancies?status=all&q=" + SEARCHED,
         [SESSION, f"SELECT {COLUMNS} FROM discrepancies WHERE (order_id = '{SEARCHED}' OR transaction_ref = '{SEARCHED}') ORDER BY id DESC LIMIT 51"]),
        ("discrepancies: second keyset page", f"/discrepancies?status=open&provider=pxp&kind=amount_mismatch&before={keyset_before}",
         [SESSION, f"SELECT {COLUMNS} FROM discrepancies WHERE {FILTER} AND id < {keyset_before} ORDER BY id DESC LIMIT 51"]),
        ("actions: failed", "/actions?status=failed",
         [SESSION, f"SELECT {ACTION_COLUMNS} FROM actions WHERE status = 'failed' ORDER BY id DESC LIMIT 51"]),
        ("deliveries: dead", "/deliveries?status=dead",
         [SESSION, f"SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE status = 'dead' ORDER BY id DESC LIMIT 51"]),
    ]


def rss_kib():
    with open(f"/proc/{PID}/status") as status:
        return int(next(line for line in status if line.startswith("VmRSS:")).split()[1])


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def sign_in(port):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = urllib.parse.urlencode({"name": "bench", "password": "bench console password"})
    connection.request("POST", "/login", body, {"Content-Type": "application/x-www-form-urlencoded"})
    answer = connection.getresponse()
    answer.read()
    if answer.status != 303:
        sys.exit(f"signing in was answered {answer.status}")
    connection.close()
    return answer.getheader("Set-Cookie").split(";")[0]


def console_times(port, cookie, path):
    """A connection of its own (the console closes one idle for 30 s, as while psql runs)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times = []
    for i in range(N + 5):
        started = time.perf_counter()
        connection.request("GET", path, headers={"Cookie": cookie})
        answer = connection.getresponse()
        page = answer.read()
        elapsed = (time.perf_counter() - started) * 1000
        if answer.status != 200:
            sys.exit(f"{path} was answered {answer.status}: {page[:300]!r}")
        if i >= 5:  # the first few warm the connection and the caches
            times.append(elapsed)
    connection.close()
    return times, page


def psql_times(statements):
    script = "\\timing on\n\\o /dev/null\n" + "".join(";\n".join(statements) + ";\n" for _ in range(N + 5))
    out = subprocess.run(["psql", "-X", "-q", os.environ["DATABASE_URL"]], input=script, capture_output=True, text=True, check=True).stdout
    each = [float(m) for m in re.findall(r"^Time: ([0-9.]+) ms", out, re.M)]
    k = len(statements)
    if len(each) != k * (N + 5):
        sys.exit(f"psql printed {len(each)} timings, not {k * (N + 5)}")
    return [sum(each[i * k:(i + 1) * k]) for i in range(5, N + 5)]


BROWSED = int(os.environ["BROWSED_PORT"])
cookie = sign_in(PORT)
_, first = console_times(PORT, cookie, "/discrepancies?status=open&provider=pxp&kind=amount_mismatch")
match = re.search(rb"before=([0-9]+)", first)
if not match:
    sys.exit("the filtered list has no second page: give more discrepancies")
start_rss = rss_kib()
print(f"console RSS at start {start_rss // 1024} MiB; {N} requests a page, one at a time")
print(f"{'page':44} {'console p50':>11} {'p95':>8} {'psql p50':>9} {'p95':>8} {'p95 ratio':>9} {'RSS MiB':>8}")
worst, failed = 0.0, []
measured = [(name, PORT, cookie, path, statements) for name, path, statements in pages(match.group(1).decode())]
measured.append(("overview, as shipped (figures kept 5 s)", BROWSED, sign_in(BROWSED), "/", [SESSION] + OVERVIEW))
for name, port, session, path, statements in measured:
    times, _ = console_times(port, session, path)
    reference = psql_times(statements)
    p50, p95, r50, r95 = percentile(times, 50), percentile(times, 95), percentile(reference, 50), percentile(reference, 95)
    worst = max(worst, p95)
    if p95 > GOAL_MS:
        failed.append(name)
    print(f"{name:44} {p50:9.1f}ms {p95:6.1f}ms {r50:7.1f}ms {r95:6.1f}ms {p95 / max(r95, 0.01):8.2f}x {rss_kib() / 1024:8.1f}")
end_rss = rss_kib()
print(f"console RSS {start_rss // 1024} -> {end_rss // 1024} MiB over {len(pages('1')) * N} pages (the console reading each time) "
      f"({(end_rss - start_rss) / max(start_rss, 1) * 100:+.1f}%)")
print(f"goal: every page's p95 within {GOAL_MS:.0f} ms: " + ("met" if not failed else "NOT met (" + ", ".join(failed) + ")")
      + f"; the slowest p95 {worst:.1f} ms")
