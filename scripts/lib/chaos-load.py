#!/usr/bin/env python3
"""Load generator for scripts/chaos: signed PXP deliveries from several threads, behaving like a provider — a
delivery that got no 200 (connection error, 503) is retried with the same X-Request-Id until it is acknowledged
or the run stops. Records every acknowledged request id with the event_id answered.

Usage: chaos-load.py --port P --key K --threads N --stop-file F --mark-file M --out RESULT.json
Runs until STOP_FILE exists. 200s answered after MARK_FILE appeared are counted separately (recovery check)."""
import argparse
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pxp_body import body, signature  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--key", required=True)
ap.add_argument("--threads", type=int, default=8)
ap.add_argument("--stop-file", required=True)
ap.add_argument("--mark-file", default="")
ap.add_argument("--out", required=True)
ap.add_argument("--run", default=str(int(time.time() * 1000)))
args = ap.parse_args()

lock = threading.Lock()
acked = {}  # request id -> event_id
counts = {"accepted": 0, "duplicate": 0, "s503": 0, "s503_without_retry_after": 0, "connection_errors": 0,
          "other_status": 0, "ok_after_mark": 0, "sent": 0}
other = {}


def bump(name, n=1):
    with lock:
        counts[name] += n


def worker(index):
    conn = None
    seq = 0
    while not os.path.exists(args.stop_file):
        rid = f"chaos-{args.run}-{index}-{seq:06d}"
        seq += 1
        payload = body(rid)
        while not os.path.exists(args.stop_file):
            ts = str(int(time.time()))
            headers = {"Content-Type": "application/json", "X-Request-Id": rid, "X-Signature-Timestamp": ts,
                       "X-Signature": signature(args.key, rid, ts, payload)}
            bump("sent")
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
                conn.request("POST", "/webhooks/pxp", body=payload, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status, retry_after = resp.status, resp.getheader("Retry-After")
            except (OSError, http.client.HTTPException):
                bump("connection_errors")
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
                continue
            if status == 200:
                answer = json.loads(data)
                with lock:
                    acked[rid] = answer["event_id"]
                    counts[answer["status"]] += 1
                    if args.mark_file and os.path.exists(args.mark_file):
                        counts["ok_after_mark"] += 1
                break
            if status == 503:
                bump("s503")
                if not retry_after:
                    bump("s503_without_retry_after")
                time.sleep(0.05)  # a provider would wait Retry-After; the run is short
                continue
            with lock:
                counts["other_status"] += 1
                other[str(status)] = other.get(str(status), 0) + 1
            break  # a 4xx is final for a provider: not acknowledged, not retried


threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(args.threads)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with open(args.out, "w") as f:
    json.dump({"counts": counts, "other": other, "acked": acked}, f)
