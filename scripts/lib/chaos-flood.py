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
  chaos-flood.py cert-url --sim URL
      prints the PAYPAL-CERT-URL paysim signs its PayPal deliveries with (one delivery sent to a listener of our own).
  chaos-flood.py cert-flood --port P --cert-prefix URL --cert-url GENUINE --source 127.0.1.3 --rate 2 --stop-file F --out OUT
      unsigned PayPal deliveries at RATE a second from SOURCE: half with a random cert URL under the prefix
      (PREFIX + "CERT-" + hex), half with a dot-segment alias of the genuine cert URL (PREFIX + "./" + id,
      "x/../" + id, ".//" + id, each variant made distinct so none is cached): both kinds cost the receiver a fetch
      of an uncached URL. Before the receiver is up, the attempts fail to connect and are counted.
  chaos-flood.py genuine-paypal --port P --sim URL --every 2 --retry-every 1 --give-up 10 --stop-file F --out OUT
      a genuine PayPal delivery every EVERY seconds until STOP_FILE: paysim signs it (sent to a listener of our own),
      then it is posted to the receiver and, like PayPal, redelivered (the same event, signed by paysim in a new
      transmission) on any answer but 2xx every RETRY_EVERY seconds until acknowledged or GIVE_UP seconds after its
      first attempt (after STOP_FILE, the deliveries already started
      go on until then). Counts each delivery's answers (401 untrusted_certificate among them) and its latency from
      first attempt to 200; records the event ids acknowledged.
  chaos-flood.py memory --port P --sources 127.0.0.4,...,127.0.0.7 --connections 1000 --body-bytes 1048576
                 --cert-url GENUINE --serve-pid PID --stop-file F --out OUT
      CONNECTIONS connections spread over SOURCES, each sending a PayPal or PXP webhook's headers with
      Content-Length BODY_BYTES and BODY_BYTES - 1 bytes of body (one preallocated buffer), then holding without the
      last byte until STOP_FILE or until the server answers or cuts it (not reopened). Samples the receiver's VmRSS
      (/proc/PID/status) every 0.5 s: for 2 s before the first connection, throughout, and for 3 s after closing.
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
ap.add_argument("mode", choices=["genuine", "paypal-unsigned", "pxp-large", "trickle", "cert-url", "cert-flood",
                                 "genuine-paypal", "memory"])
ap.add_argument("--port", type=int, default=0)
ap.add_argument("--key", default="")
ap.add_argument("--sim", default="")
ap.add_argument("--cert-prefix", default="")
ap.add_argument("--source", default="127.0.0.2")
ap.add_argument("--connections", type=int, default=300)
ap.add_argument("--threads", type=int, default=4)
ap.add_argument("--cert-url", default="")
ap.add_argument("--rate", type=float, default=2.0)
ap.add_argument("--every", type=float, default=2.0)
ap.add_argument("--retry-every", type=float, default=1.0)
ap.add_argument("--give-up", type=float, default=10.0)
ap.add_argument("--sources", default="127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7")
ap.add_argument("--body-bytes", type=int, default=1048576)
ap.add_argument("--serve-pid", type=int, default=0)
ap.add_argument("--groups", default="", help="cert-flood: X-Forwarded-For addresses, one per sender group, in turn")
ap.add_argument("--repeat", type=int, default=1, help="cert-flood with --groups: each random URL sent this many times")
ap.add_argument("--stop-file", default="")
ap.add_argument("--out", default="")
args = ap.parse_args()
if args.mode != "cert-url" and not (args.port and args.stop_file and args.out):
    ap.error(f"{args.mode} needs --port, --stop-file and --out")

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


def unsigned_paypal(cert_url=None):
    event_id = "WH-FLOOD-" + uuid.uuid4().hex
    payload = json.dumps({"id": event_id, "event_type": "PAYMENT.CAPTURE.COMPLETED", "resource_type": "capture",
                          "resource": {"id": "CAP-" + uuid.uuid4().hex[:12]}}).encode()
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    headers = {"Content-Type": "application/json", "PAYPAL-TRANSMISSION-ID": str(uuid.uuid4()),
               "PAYPAL-TRANSMISSION-TIME": now, "PAYPAL-AUTH-ALGO": "SHA256withRSA",
               "PAYPAL-TRANSMISSION-SIG": "".join(random.choice("ABCDEFGHIJKLMNOP") for _ in range(344)),
               "PAYPAL-CERT-URL": cert_url or args.cert_prefix + "CERT-" + uuid.uuid4().hex}
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


# --- cold start: the cert-URL flood and genuine PayPal deliveries retried like PayPal --------------------------------

def error_code(data):
    """The contract's error code of an answer body ({"error":{"code":...}}), or ""."""
    try:
        return json.loads(data).get("error", {}).get("code", "") or ""
    except (ValueError, AttributeError):
        return ""


class Capture:
    """A listener of our own that paysim delivers to (POST /admin/webhooks/send with it as the target): gives the
    signed PayPal delivery paysim made, to post (and re-post) ourselves and read the receiver's answers."""

    def __init__(self, sim):
        import http.server
        import queue
        self.sim = sim
        self.got = queue.Queue()
        got = self.got

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                payload = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                got.put((list(self.headers.items()), payload))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_):
                pass

        self.one_at_a_time = threading.Lock()  # what the listener gets is the delivery asked for
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.target = f"http://127.0.0.1:{self.server.server_address[1]}/capture"

    def paypal(self, event=None):
        """(headers to post, body, event id) of a genuine PayPal delivery signed by paysim: a new event, or EVENT (the
        parsed body of one) again in a new transmission, as PayPal redelivers."""
        import queue
        ask = {"provider": "paypal", "target": self.target}
        ask.update({"body": event} if event is not None else
                   {"event_type": "PAYMENT.CAPTURE.COMPLETED", "resource_id": "CHAOS-CAP-1"})
        req = urllib.request.Request(self.sim + "/admin/webhooks/send", data=json.dumps(ask).encode(),
                                     headers={"Content-Type": "application/json"})
        with self.one_at_a_time:
            with urllib.request.urlopen(req, timeout=10) as resp:
                resp.read()
            try:
                headers, payload = self.got.get(timeout=10)
            except queue.Empty:
                raise OSError("paysim delivered nothing to the capture listener")
        # What PayPal sends that matters: its own headers and the content type (not Host, Content-Length...).
        kept = {k: v for k, v in headers if k.upper().startswith("PAYPAL-") or k.lower() == "content-type"}
        return kept, payload, json.loads(payload).get("id", "")


def run_cert_url():
    headers, _, _ = Capture(args.sim).paypal()
    url = next((v for k, v in headers.items() if k.upper() == "PAYPAL-CERT-URL"), "")
    if not url:
        sys.exit("paysim's PayPal delivery has no PAYPAL-CERT-URL")
    print(url)


def run_cert_flood():
    prefix = args.cert_prefix
    genuine_id = args.cert_url[len(prefix):] if args.cert_url.startswith(prefix) else args.cert_url.rsplit("/", 1)[-1]
    period = 1.0 / args.rate
    groups = [g for g in args.groups.split(",") if g]
    conn = None
    sent = 0
    due = time.monotonic()
    while not stopped():
        now = time.monotonic()
        if now < due:
            time.sleep(min(due - now, 0.2))
            continue
        due = max(due + period, now - period)  # no burst to catch up after a slow answer
        if groups:
            # Many sender groups (through the trusted proxy's X-Forwarded-For), random URLs each sent --repeat
            # times: what the receiver's per-group turns must hold against at a cold start.
            group = groups[sent % len(groups)]
            k = sent // len(groups)
            kind, url = "random", prefix + "CERT-flood-%s-%d" % (group.replace(":", "_"), k // args.repeat)
        elif sent % 2 == 0:
            kind, url = "random", None
        else:
            # Distinct aliases of the genuine certificate's URL: each is an uncached URL to the receiver, and an HTTP
            # client that removes dot segments (or a server that ignores empty ones) fetches the genuine certificate.
            k = sent // 2
            n = k // 3 + 1
            kind = "alias"
            url = prefix + ["./" * n, "x%s/../" % uuid.uuid4().hex[:8], "." + "/" * (n + 1)][k % 3] + genuine_id
        sent += 1
        path, headers, payload = unsigned_paypal(url)
        if groups:
            headers["X-Forwarded-For"] = group
        bump(f"sent_{kind}")
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10, source_address=(args.source, 0))
            conn.request("POST", path, body=payload, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            code = error_code(data)
            bump(f"status_{resp.status}")
            bump(f"{kind}_{resp.status}_{code or 'none'}")
            with lock:
                counts.setdefault("first_answer_at", round(time.monotonic() - START, 2))
            if resp.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            bump("connection_errors")  # before the receiver is up: refused
            if conn is not None:
                conn.close()
            conn = None
    return {"counts": counts, "sent": sent, "seconds": round(time.monotonic() - START, 2)}


def run_genuine_paypal():
    capture = Capture(args.sim)
    deliveries = []  # one dict per delivery, filled by its thread

    def deliver(record, headers, payload):
        conn = None
        first = time.monotonic()
        while True:
            status, code = "error", ""
            try:
                if record["attempts"]:  # a redelivery: the same event in a new transmission (new id, time, signature)
                    headers, payload, _ = capture.paypal(json.loads(payload))
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
                conn.request("POST", "/webhooks/paypal", body=payload, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status, code = resp.status, error_code(data)
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException):
                if conn is not None:
                    conn.close()
                conn = None
            with lock:
                record["attempts"] += 1
                answer = f"{status} {code}".strip()
                record["answers"][answer] = record["answers"].get(answer, 0) + 1
            if status == 200:
                with lock:
                    record["latency"] = round(time.monotonic() - first, 3)
                    record["acked_at"] = round(time.monotonic() - START, 2)
                break
            if time.monotonic() - first + args.retry_every > args.give_up:
                with lock:
                    record["given_up"] = True
                break
            time.sleep(args.retry_every)  # PayPal re-posts on any answer but 2xx
        if conn is not None:
            conn.close()

    threads = []
    due = time.monotonic()
    while not stopped():
        now = time.monotonic()
        if now < due:
            time.sleep(min(due - now, 0.2))
            continue
        due += args.every
        try:
            headers, payload, event_id = capture.paypal()
        except (OSError, ValueError) as e:
            bump("capture_errors")
            counts["capture_error"] = str(e)[:200]
            continue
        record = {"id": event_id, "started_at": round(time.monotonic() - START, 2), "attempts": 0, "answers": {},
                  "latency": None, "acked_at": None, "given_up": False}
        deliveries.append(record)
        t = threading.Thread(target=deliver, args=(record, headers, payload), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    acked = [d for d in deliveries if d["latency"] is not None]
    answers = {}
    for d in deliveries:
        for k, v in d["answers"].items():
            answers[k] = answers.get(k, 0) + v
    lat = [d["latency"] for d in acked]
    return {"counts": counts, "deliveries": len(deliveries), "acked": len(acked),
            "given_up": sum(1 for d in deliveries if d["given_up"]),
            "untrusted_once": sum(1 for d in deliveries if "401 untrusted_certificate" in d["answers"]),
            "attempts": sum(d["attempts"] for d in deliveries), "answers": answers,
            "acked_ids": [d["id"] for d in acked], "max": max(lat, default=0.0), "p50": percentile(lat, 0.5),
            "first_acked_at": min((d["acked_at"] for d in acked), default=None), "list": deliveries}


# --- memory: connections holding almost-complete bodies -----------------------------------------------------------

def read_rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run_memory():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < args.connections + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, args.connections + 256), hard))
    samples = []  # (seconds into the run, VmRSS KiB)
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            rss = read_rss_kib(args.serve_pid)
            if rss is not None:
                samples.append((round(time.monotonic() - START, 2), rss))
            sampling.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    time.sleep(2.0)  # the baseline
    opened_at = time.monotonic() - START

    sources = [a.strip() for a in args.sources.split(",") if a.strip()]
    length = args.body_bytes
    start = b'{"id":"WH-MEMORY","padding":"'
    body = memoryview(start + b"x" * (length - len(start)))[:length - 1]  # one buffer for all; the last byte never sent
    now_rfc3339 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def head(i):
        if i % 2:
            lines = ["POST /webhooks/paypal HTTP/1.1", "Content-Type: application/json",
                     f"PAYPAL-TRANSMISSION-ID: {uuid.uuid4()}", f"PAYPAL-TRANSMISSION-TIME: {now_rfc3339}",
                     "PAYPAL-AUTH-ALGO: SHA256withRSA", "PAYPAL-TRANSMISSION-SIG: " + "QUJD" * 86,
                     f"PAYPAL-CERT-URL: {args.cert_url}"]
        else:
            lines = ["POST /webhooks/pxp HTTP/1.1", "Content-Type: application/json", f"X-Request-Id: memory-{i}",
                     f"X-Signature-Timestamp: {int(time.time())}", "X-Signature: bm90IGEgc2lnbmF0dXJlIGF0IGFsbA=="]
        lines += [f"Host: 127.0.0.1:{args.port}", f"Content-Length: {length}", "", ""]
        return "\r\n".join(lines).encode()

    class Conn:
        __slots__ = ("sock", "head", "hoff", "boff", "connected", "sent", "held_at")

    sel = selectors.DefaultSelector()
    live = set()
    answers_at = []
    full_at = []
    idle_cuts = []  # seconds from a body's last sent byte to the server's cut

    def close(c, why):
        try:
            sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()
        live.discard(c)
        bump(why)

    def answered(c, data):
        status = data[9:12].decode(errors="replace") if data.startswith(b"HTTP/1.") else "garbled"
        bump("answered_" + status)
        if b"\r\nretry-after:" in data.split(b"\r\n\r\n", 1)[0].lower():
            bump("answered_with_retry_after")
        if not c.sent:
            bump("answered_before_body_complete")
        answers_at.append(time.monotonic() - START)
        close(c, "closed_after_answer")

    next_index = 0
    next_batch = time.monotonic()
    while not stopped():
        if next_index < args.connections and time.monotonic() >= next_batch:
            for i in range(next_index, min(args.connections, next_index + 100)):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                try:
                    s.bind((sources[i % len(sources)], 0))
                    s.connect_ex(("127.0.0.1", args.port))
                except OSError:
                    s.close()
                    bump("connect_errors")
                    continue
                c = Conn()
                c.sock, c.head, c.hoff, c.boff, c.connected, c.sent, c.held_at = s, head(i), 0, 0, False, False, None
                sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
                live.add(c)
            next_index = min(args.connections, next_index + 100)
            next_batch = time.monotonic() + 0.05
        for key, mask in sel.select(timeout=0.1):
            c = key.data
            if c not in live:
                continue
            if mask & selectors.EVENT_READ:
                try:
                    data = c.sock.recv(65536)
                except BlockingIOError:
                    data = None
                except OSError:
                    data = b""
                if data == b"":
                    if c.sent:
                        idle_cuts.append(time.monotonic() - c.held_at)
                    close(c, "refused_at_connect" if not c.connected else
                          ("cut_while_holding" if c.sent else "cut_while_sending"))
                    continue
                if data:
                    answered(c, data)
                    continue
            if mask & selectors.EVENT_WRITE:
                if not c.connected:
                    if c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        close(c, "refused_at_connect")
                        continue
                    c.connected = True
                    bump("connections_opened")
                    with lock:
                        counts["max_open"] = max(counts.get("max_open", 0), sum(1 for x in live if x.connected))
                try:
                    while c.hoff < len(c.head):
                        c.hoff += c.sock.send(c.head[c.hoff:])
                    while c.boff < len(body):
                        n = c.sock.send(body[c.boff:])
                        c.boff += n
                        bump("bytes_sent", n)
                except BlockingIOError:
                    continue
                except OSError:
                    try:
                        data = c.sock.recv(65536)  # an answer sent before the cut?
                    except OSError:
                        data = b""
                    if data:
                        answered(c, data)
                    else:
                        close(c, "cut_while_sending")
                    continue
                c.sent = True
                c.held_at = time.monotonic()
                bump("bodies_held")  # all but the last byte sent
                full_at.append(time.monotonic() - START)
                sel.modify(c.sock, selectors.EVENT_READ, c)
    stop_at = time.monotonic() - START
    with lock:
        counts["held_to_end"] = sum(1 for c in live if c.sent)
        counts["still_sending_at_end"] = sum(1 for c in live if c.connected and not c.sent)
        counts["never_connected"] = sum(1 for c in live if not c.connected)
    for c in list(live):
        close(c, "closed_at_end")
    time.sleep(3.0)  # does the memory go back?
    sampling.set()
    sampler.join()
    before = [kib for t, kib in samples if t < opened_at]
    during = [kib for t, kib in samples if opened_at <= t <= stop_at]
    after = [kib for t, kib in samples if t > stop_at]
    return {"counts": counts, "connections": args.connections, "sources": sources, "body_bytes": length,
            "opened_at": round(opened_at, 2), "stop_at": round(stop_at, 2),
            "all_held_after": round(max(full_at) - opened_at, 2) if len(full_at) == args.connections else None,
            "first_answer_after": round(min(answers_at) - opened_at, 2) if answers_at else None,
            "cut_after_idle": [round(min(idle_cuts), 1), round(max(idle_cuts), 1)] if idle_cuts else None,
            "rss_before_kib": max(before, default=0), "rss_peak_kib": max(during + after, default=0),
            "rss_end_kib": after[-1] if after else 0, "samples": samples}


if args.mode == "genuine":
    result = run_genuine()
elif args.mode == "paypal-unsigned":
    result = run_posts(unsigned_paypal)
elif args.mode == "pxp-large":
    result = run_posts(large_pxp)
elif args.mode == "cert-url":
    run_cert_url()
    sys.exit(0)
elif args.mode == "cert-flood":
    result = run_cert_flood()
elif args.mode == "genuine-paypal":
    result = run_genuine_paypal()
elif args.mode == "memory":
    result = run_memory()
else:
    result = run_trickle()
with open(args.out, "w") as f:
    json.dump(result, f)
