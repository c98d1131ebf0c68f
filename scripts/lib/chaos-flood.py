#!/usr/bin/env python3
"""Traffic for scripts/chaos scenario 5: genuine deliveries, timed one by one, and three floods an unauthenticated
sender can make. Every mode runs until STOP_FILE exists, then writes its counts as JSON to OUT.

  chaos-flood.py genuine  --port P --key K --sim URL --stop-file F --out OUT
      signed PXP deliveries (2 threads, ~25/s each) and genuine PayPal deliveries sent by paysim (/admin/webhooks/send,
      one at a time): each retried like a provider until acknowledged; latencies are first attempt to 200.
  chaos-flood.py paypal-unsigned --port P --cert-prefix URL --stop-file F --out OUT
      PayPal deliveries with a current transmission time, a random signature and a random cert URL under the prefix.
  chaos-flood.py pxp-large --port P --stop-file F --out OUT
      60 KiB PXP bodies with a bad signature.
  chaos-flood.py trickle --port P --source 127.0.0.2 --connections 300 --stop-file F --out OUT
      connections that send a request a byte at a time, one byte per connection every second, from SOURCE (another
      loopback address, so the per-IP limit applies to the flood and not to the genuine senders); reconnects when cut.
"""
import argparse
import http.client
import json
import os
import random
import selectors
import socket
import sys
import threading
import time
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pxp_body import body, signature  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("mode", choices=["genuine", "paypal-unsigned", "pxp-large", "trickle"])
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--key", default="")
ap.add_argument("--sim", default="")
ap.add_argument("--cert-prefix", default="")
ap.add_argument("--source", default="127.0.0.2")
ap.add_argument("--connections", type=int, default=300)
ap.add_argument("--threads", type=int, default=4)
ap.add_argument("--stop-file", required=True)
ap.add_argument("--out", required=True)
args = ap.parse_args()

lock = threading.Lock()
counts = {}


def bump(name, n=1):
    with lock:
        counts[name] = counts.get(name, 0) + n


def stopped():
    return os.path.exists(args.stop_file)


# --- genuine -----------------------------------------------------------------------------------------------------

latencies = {"pxp": [], "paypal": []}
START = time.monotonic()
slow = []  # (seconds into the run, latency, provider) of every genuine delivery over 0.5 s
acked = {"pxp": [], "paypal": 0}


def genuine_pxp(index):
    conn = None
    seq = 0
    while not stopped():
        rid = f"genuine-{os.getpid()}-{index}-{seq:06d}"
        seq += 1
        payload = body(rid)
        first = time.monotonic()
        while True:
            ts = str(int(time.time()))
            headers = {"Content-Type": "application/json", "X-Request-Id": rid, "X-Signature-Timestamp": ts,
                       "X-Signature": signature(args.key, rid, ts, payload)}
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
                conn.request("POST", "/webhooks/pxp", body=payload, headers=headers)
                resp = conn.getresponse()
                resp.read()
                status = resp.status
            except (OSError, http.client.HTTPException):
                bump("pxp_connection_errors")
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
                continue
            if status == 200:
                with lock:
                    latencies["pxp"].append(time.monotonic() - first)
                    if time.monotonic() - first > 0.5:
                        slow.append((round(first - START, 2), round(time.monotonic() - first, 3), "pxp"))
                    acked["pxp"].append(rid)
                break
            bump(f"pxp_status_{status}")
            if status != 503:
                break  # a 4xx is final for a provider
            time.sleep(0.05)
        time.sleep(0.04)


def genuine_paypal():
    request = json.dumps({"provider": "paypal", "target": f"http://127.0.0.1:{args.port}/webhooks/paypal",
                          "event_type": "PAYMENT.CAPTURE.COMPLETED", "resource_id": "CHAOS-CAP-1"}).encode()
    while not stopped():
        first = time.monotonic()
        while True:
            try:
                req = urllib.request.Request(args.sim + "/admin/webhooks/send", data=request,
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=30) as resp:
                    answer = json.loads(resp.read())
                statuses = answer.get("statuses", {})
            except OSError:
                bump("paypal_send_errors")
                time.sleep(0.1)
                continue
            if statuses.get("200") == 1:
                with lock:
                    latencies["paypal"].append(time.monotonic() - first)
                    if time.monotonic() - first > 0.5:
                        slow.append((round(first - START, 2), round(time.monotonic() - first, 3), "paypal"))
                    acked["paypal"] += 1
                break
            for status in statuses:
                bump(f"paypal_status_{status}")
            if "503" not in statuses and "error" not in statuses:
                break
            time.sleep(0.05)
        time.sleep(0.1)


def percentile(values, p):
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def run_genuine():
    threads = [threading.Thread(target=genuine_pxp, args=(i,), daemon=True) for i in range(2)]
    threads.append(threading.Thread(target=genuine_paypal, daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = latencies["pxp"] + latencies["paypal"]
    return {"counts": counts, "pxp_acked": acked["pxp"], "paypal_acked": acked["paypal"],
            "p50": percentile(every, 0.50), "p99": percentile(every, 0.99), "max": max(every, default=0.0),
            "pxp_p99": percentile(latencies["pxp"], 0.99), "paypal_p99": percentile(latencies["paypal"], 0.99),
            "over_2s": sum(1 for v in every if v > 2.0), "slow": sorted(slow)}


# --- floods ------------------------------------------------------------------------------------------------------

def post_loop(make):
    conn = None
    while not stopped():
        path, headers, payload = make()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=30)
            conn.request("POST", path, body=payload, headers=headers)
            resp = conn.getresponse()
            resp.read()
            bump(f"status_{resp.status}")
            bump("bytes_sent", len(payload))
            if resp.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            bump("connection_errors")
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.01)


def unsigned_paypal():
    event_id = "WH-FLOOD-" + uuid.uuid4().hex
    payload = json.dumps({"id": event_id, "event_type": "PAYMENT.CAPTURE.COMPLETED", "resource_type": "capture",
                          "resource": {"id": "CAP-" + uuid.uuid4().hex[:12]}}).encode()
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    headers = {"Content-Type": "application/json", "PAYPAL-TRANSMISSION-ID": str(uuid.uuid4()),
               "PAYPAL-TRANSMISSION-TIME": now, "PAYPAL-AUTH-ALGO": "SHA256withRSA",
               "PAYPAL-TRANSMISSION-SIG": "".join(random.choice("ABCDEFGHIJKLMNOP") for _ in range(344)),
               "PAYPAL-CERT-URL": args.cert_prefix + "CERT-" + uuid.uuid4().hex}
    return "/webhooks/paypal", headers, payload


LARGE = None


def large_pxp():
    global LARGE
    if LARGE is None:
        LARGE = (b'{"eventData":{"merchantTransactionId":"FLOOD","padding":"' + b"x" * (60 * 1024 - 64) + b'"}}')
    rid = "flood-" + uuid.uuid4().hex
    headers = {"Content-Type": "application/json", "X-Request-Id": rid, "X-Signature-Timestamp": str(int(time.time())),
               "X-Signature": "bm90IGEgc2lnbmF0dXJl"}
    return "/webhooks/pxp", headers, LARGE


def run_posts(make):
    threads = [threading.Thread(target=post_loop, args=(make,), daemon=True) for _ in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"counts": counts}


def run_trickle():
    request = (b"POST /webhooks/pxp HTTP/1.1\r\nHost: x\r\nX-Request-Id: trickle\r\nContent-Length: 4096\r\n\r\n"
               + b"y" * 4096)
    sel = selectors.DefaultSelector()
    slots = {}  # socket -> next byte offset
    next_attempt = 0.0

    def connect():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((args.source, 0))
            s.connect_ex(("127.0.0.1", args.port))
        except OSError:
            s.close()
            bump("connect_errors")
            return
        slots[s] = 0
        sel.register(s, selectors.EVENT_READ)
        bump("connections_opened")

    def drop(s, why):
        sel.unregister(s)
        slots.pop(s, None)
        s.close()
        bump(why)

    while not stopped():
        now = time.monotonic()
        if len(slots) < args.connections and now >= next_attempt:
            for _ in range(min(50, args.connections - len(slots))):
                connect()
            next_attempt = now + 0.5  # refill the pool at most twice a second
        # One byte per connection per round; a round a second.
        for s in list(slots):
            offset = slots[s]
            try:
                s.send(request[offset % len(request):offset % len(request) + 1])
                slots[s] = offset + 1
                bump("bytes_sent")
            except BlockingIOError:
                pass
            except OSError:
                drop(s, "cut_while_sending")
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and not stopped():
            for key, _ in sel.select(timeout=max(0.0, deadline - time.monotonic())):
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    drop(s, "cut_by_server")
                elif data.startswith(b"HTTP/1.1 "):
                    bump("answered_" + data[9:12].decode(errors="replace"))
        bump("max_open", 0)
        with lock:
            counts["max_open"] = max(counts.get("max_open", 0), len(slots))
    for s in list(slots):
        drop(s, "closed_at_end")
    return {"counts": counts}


if args.mode == "genuine":
    result = run_genuine()
elif args.mode == "paypal-unsigned":
    result = run_posts(unsigned_paypal)
elif args.mode == "pxp-large":
    result = run_posts(large_pxp)
else:
    result = run_trickle()
with open(args.out, "w") as f:
    json.dump(result, f)
