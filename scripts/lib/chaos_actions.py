#!/usr/bin/env python3
"""scripts/chaos 4 helpers, against paysim's PayPal API over HTTP.

  chaos_actions.py book N SEED_JSON ORDERS_CSV     PayPal orders authorised for 20.00 USD, and the merchant's orders
  chaos_actions.py elsewhere SIM N                 captures 3.00 "elsewhere" (the merchant's portal) on every 5th order
  chaos_actions.py verify SIM DB_JSON              prints counts; exit 1 when an action was applied twice or an
                                                   order's captured/refunded money is not what it calls for
"""
import base64, collections, decimal, json, sys, urllib.request


def token(sim):
    req = urllib.request.Request(sim + "/v1/oauth2/token", data=b"grant_type=client_credentials", method="POST")
    req.add_header("Authorization", "Basic " + base64.b64encode(b"paysim-paypal-client:paysim-paypal-secret").decode())
    return json.load(urllib.request.urlopen(req, timeout=30))["access_token"]


def call(sim, tok, method, path, body=None, request_id=None):
    req = urllib.request.Request(sim + path, data=json.dumps(body).encode() if body is not None else None, method=method)
    req.add_header("Authorization", "Bearer " + tok)
    req.add_header("Content-Type", "application/json")
    if request_id:
        req.add_header("PayPal-Request-Id", request_id)
    return json.load(urllib.request.urlopen(req, timeout=30))


def book(n, seed_path, orders_path):
    with open(seed_path, "w") as seed, open(orders_path, "w") as orders:
        seed.write(json.dumps({"paypal": [
            {"id": f"CP-{i:05d}", "intent": "AUTHORIZE", "currency": "USD", "amount": "20.00",
             "authorizations": [{"id": f"CA-{i:05d}"}]} for i in range(n)]}))
        orders.write("provider,order_id,merchant,site,transaction_ref,intent,amount,currency,fulfilment,refund_amount\n")
        for i in range(n):
            orders.write(f"paypal,CO-{i:05d},,,CP-{i:05d},authorisation,20.00,USD,fulfilled,0\n")


def elsewhere(sim, n):
    tok = token(sim)
    done = 0
    for i in range(0, n, 5):
        call(sim, tok, "POST", f"/v2/payments/authorizations/CA-{i:05d}/capture",
             {"amount": {"currency_code": "USD", "value": "3.00"}, "final_capture": False}, f"portal-{i}")
        done += 1
    print(done)


def verify(sim, db_path):
    tok = token(sim)
    orders = json.load(open(db_path))      # [{"order_id", "transaction_ref", "amount_minor", "fulfilment"}]
    log = json.load(urllib.request.urlopen(sim + "/admin/log?provider=paypal", timeout=30))["entries"]
    applied = collections.Counter(e.get("idempotency_key") for e in log if e.get("result") == "applied")
    twice = sorted(k for k, c in applied.items() if c > 1)
    dropped = sum(1 for e in log if e.get("result") == "answer_dropped")
    wrong = []
    for o in orders:
        units = call(sim, tok, "GET", "/v2/checkout/orders/" + o["transaction_ref"])["purchase_units"][0].get("payments", {})
        cents = lambda p: int(decimal.Decimal(p["amount"]["value"]) * 100)   # exact: USD has 2 decimals
        c = sum(cents(p) for p in units.get("captures", []) if p["status"] in ("COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED"))
        r = sum(cents(p) for p in units.get("refunds", []) if p["status"] == "COMPLETED")
        ok = (c == o["amount_minor"] and r == 0) if o["fulfilment"] == "fulfilled" else (c == r)
        if not ok:
            wrong.append(f'{o["order_id"]} ({o["fulfilment"]} {o["amount_minor"]}): captured {c}, refunded {r}')
    print(json.dumps({"applied": sum(applied.values()), "keys": len(applied), "twice": len(twice), "dropped_after_apply": dropped,
                      "orders": len(orders), "wrong": len(wrong), "examples": wrong[:5] + twice[:5]}))
    return 1 if twice or wrong else 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "book": book(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif cmd == "elsewhere": elsewhere(sys.argv[2], int(sys.argv[3]))
    elif cmd == "verify": sys.exit(verify(sys.argv[2], sys.argv[3]))
