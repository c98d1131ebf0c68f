#!/usr/bin/env python3
"""scripts/chaos 4 helpers, against paysim's PayPal API and its PXP book over HTTP.

  chaos_actions.py book N SEED_JSON ORDERS_CSV     PayPal orders authorised for 20.00 USD; N/10 PayPal orders paid on a
                                                   retry after a declined attempt, N/10 split over two PayPal orders
                                                   (refund 10.00 wanted; a third of them eCheck-funded, so PayPal keeps
                                                   their refunds PENDING, and a third with 4.00 refunded PENDING in the
                                                   dashboard already); N/2 PXP orders: authorised (to capture) and
                                                   captured purchases (refund 5.00 wanted); N/10 payments of a second
                                                   storefront whose reference_id is the number of an order that will be
                                                   cancelled (ST-*: never refunded by payrecon)
  chaos_actions.py elsewhere SIM N                 captures 3.00 "elsewhere" (the merchant's portal) on every 5th order
  chaos_actions.py verify SIM DB_JSON              prints counts; exit 1 when an action was applied twice or an
                                                   order's captured/refunded money is not what it calls for
"""
import base64, collections, decimal, json, sys, urllib.error, urllib.request


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
    m, p = max(1, n // 10), max(2, n // 2)
    paypal = [{"id": f"CP-{i:05d}", "intent": "AUTHORIZE", "currency": "USD", "amount": "20.00",
               "authorizations": [{"id": f"CA-{i:05d}"}]} for i in range(n)]
    # A retry after a decline: the first attempt's authorization was denied, the second holds the money.
    for i in range(m):
        paypal.append({"id": f"PR-{i:05d}-1", "intent": "AUTHORIZE", "currency": "USD", "amount": "20.00",
                       "authorizations": [{"id": f"RA-{i:05d}-1", "status": "DENIED"}]})
        paypal.append({"id": f"PR-{i:05d}-2", "intent": "AUTHORIZE", "currency": "USD", "amount": "20.00",
                       "authorizations": [{"id": f"RA-{i:05d}-2"}]})
    # A split payment: two PayPal orders of 12.00 and 8.00 for one merchant order of 20.00. Money accepted but not final:
    # a third are eCheck-funded (their refunds stay PENDING), a third hold a 4.00 refund made in the dashboard, PENDING.
    for i in range(m):
        capture_a = {"id": f"SC-{i:05d}-A"}
        refunds_a = []
        if i % 3 == 0:
            capture_a["refunds_pending_reason"] = "ECHECK"
        elif i % 3 == 1:
            capture_a["status"] = "PARTIALLY_REFUNDED"
            refunds_a = [{"id": f"SD-{i:05d}", "capture_id": f"SC-{i:05d}-A", "status": "PENDING", "amount": "4.00", "status_details_reason": "ECHECK"}]
        paypal.append({"id": f"PS-{i:05d}-A", "intent": "CAPTURE", "currency": "USD", "amount": "12.00", "captures": [capture_a], "refunds": refunds_a})
        paypal.append({"id": f"PS-{i:05d}-B", "intent": "CAPTURE", "currency": "USD", "amount": "8.00", "captures": [{"id": f"SC-{i:05d}-B"}]})
    # A second storefront's payments whose reference_id collides with an order payrecon holds (CO-…3, cancelled later).
    for i in range(0, n - 3, 10):
        paypal.append({"id": f"ST-{i:05d}", "intent": "CAPTURE", "currency": "USD", "amount": "20.00", "reference_id": f"CO-{i + 3:05d}",
                       "captures": [{"id": f"STC-{i:05d}"}]})
    pxp = []
    for i in range(p):
        intent, state = ("Authorisation", "Authorised") if i % 2 == 0 else ("Purchase", "Captured")
        pxp.append({"merchant": "M1", "site": "S1", "merchantTransactionId": f"XT-{i:05d}", "intent": intent, "currency": "GBP",
                    "value": "20.00", "state": state})
    with open(seed_path, "w") as seed, open(orders_path, "w") as orders:
        seed.write(json.dumps({"paypal": paypal, "pxp": pxp}))
        orders.write("provider,order_id,merchant,site,transaction_ref,intent,amount,currency,fulfilment,refund_amount\n")
        for i in range(n):
            orders.write(f"paypal,CO-{i:05d},,,CP-{i:05d},authorisation,20.00,USD,fulfilled,0\n")
        for i in range(m):
            orders.write(f"paypal,CR-{i:05d},,,PR-{i:05d}-1 PR-{i:05d}-2,authorisation,20.00,USD,fulfilled,0\n")
            orders.write(f"paypal,CS-{i:05d},,,PS-{i:05d}-A PS-{i:05d}-B,purchase,20.00,USD,fulfilled,10.00\n")
        for i in range(p):
            if i % 2 == 0:
                orders.write(f"pxp,XO-{i:05d},M1,S1,XT-{i:05d},authorisation,20.00,GBP,fulfilled,0\n")
            else:
                orders.write(f"pxp,XO-{i:05d},M1,S1,XT-{i:05d},purchase,20.00,GBP,fulfilled,5.00\n")


def elsewhere(sim, n):
    tok = token(sim)
    done = 0
    for i in range(0, n, 5):
        call(sim, tok, "POST", f"/v2/payments/authorizations/CA-{i:05d}/capture",
             {"amount": {"currency_code": "USD", "value": "3.00"}, "final_capture": False}, f"portal-{i}")
        done += 1
    print(done)


def pxp_money(sim):
    """(parent merchantTransactionId → (captured, refunded)) in minor units, from every modification paysim applied."""
    book = json.load(urllib.request.urlopen(sim + "/admin/pxp/transactions", timeout=30))["transactions"]
    by_id = {t["transaction"]["systemTransactionId"]: t["transaction"] for t in book}
    money = collections.defaultdict(lambda: [0, 0])
    for t in book:
        op, parent = t.get("operation"), t.get("parent")
        if not parent:
            continue
        mtid = by_id[parent]["merchantTransactionId"]
        cents = int(decimal.Decimal(str(t["transaction"]["amounts"]["transactionValue"])) * 100)
        if op in ("Capture", "FinalCapture"): money[mtid][0] += cents
        elif op == "Refund": money[mtid][1] += cents
    return money, by_id


def verify(sim, db_path):
    tok = token(sim)
    orders = json.load(open(db_path))      # [{"order_id", "provider", "transaction_refs", "intent", "amount_minor", "fulfilment", "refund_minor"}]
    log = json.load(urllib.request.urlopen(sim + "/admin/log", timeout=30))["entries"]
    # PayPal: one application per PayPal-Request-Id; PXP: one per merchantTransactionId (a PXP that does not
    # de-duplicate applies a re-send again, so twice would show here).
    applied = collections.Counter(e.get("idempotency_key") for e in log if e.get("result") == "applied")
    twice = sorted(k for k, c in applied.items() if c > 1)
    dropped = sum(1 for e in log if e.get("result") == "answer_dropped")
    pxp, pxp_parents = pxp_money(sim)
    cents = lambda p: int(decimal.Decimal(p["amount"]["value"]) * 100)   # exact: USD has 2 decimals
    wrong = []
    for o in orders:
        c = r = 0
        for ref in o["transaction_refs"]:
            if ref in o.get("learned", []):
                continue   # learned from a reference field: not this order's money (checked below: never refunded)
            if o["provider"] == "pxp":
                parent = next(t for t in pxp_parents.values() if t["merchantTransactionId"] == ref)
                own = int(decimal.Decimal(str(parent["amounts"]["transactionValue"])) * 100) if parent["state"] in ("Captured",) and o["intent"] == "purchase" else 0
                c += own + pxp[ref][0]
                r += pxp[ref][1]
                continue
            units = call(sim, tok, "GET", "/v2/checkout/orders/" + ref)["purchase_units"][0].get("payments", {})
            c += sum(cents(p) for p in units.get("captures", []) if p["status"] in ("COMPLETED", "PARTIALLY_REFUNDED", "REFUNDED"))
            # Money accepted but not final counts as moved: a PENDING refund is money returned.
            r += sum(cents(p) for p in units.get("refunds", []) if p["status"] in ("COMPLETED", "PENDING"))
        if o["fulfilment"] == "cancelled":
            ok = c == r
        else:
            ok = c == o["amount_minor"] and r == o["refund_minor"]
        if not ok:
            wrong.append(f'{o["order_id"]} ({o["fulfilment"]} {o["amount_minor"]}, refund {o["refund_minor"]}): captured {c}, refunded {r}')
    # The second storefront's payments: payrecon must never have refunded any of them.
    strangers = [t for o in orders for t in o.get("learned", [])]
    stranger_refunds = []
    order_ids = {o["order_id"] for o in orders}
    seeded = {f"ST-{int(oid[3:]) - 3:05d}" for oid in order_ids if oid.startswith("CO-") and int(oid[3:]) % 10 == 3}
    for ref in sorted(set(strangers) | seeded):
        try:
            units = call(sim, tok, "GET", "/v2/checkout/orders/" + ref)["purchase_units"][0].get("payments", {})
        except urllib.error.HTTPError:
            continue
        if units.get("refunds"):
            stranger_refunds.append(f"{ref}: refunded {sum(cents(p) for p in units['refunds'])}")
    wrong += stranger_refunds
    several = sum(1 for o in orders if len(o["transaction_refs"]) > 1)
    print(json.dumps({"applied": sum(applied.values()), "keys": len(applied), "twice": len(twice), "dropped_after_apply": dropped,
                      "orders": len(orders), "several": several, "pxp_orders": sum(1 for o in orders if o["provider"] == "pxp"),
                      "learned": len(strangers), "stranger_refunds": len(stranger_refunds),
                      "wrong": len(wrong), "examples": wrong[:5] + twice[:5]}))
    return 1 if twice or wrong else 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "book": book(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif cmd == "elsewhere": elsewhere(sys.argv[2], int(sys.argv[3]))
    elif cmd == "verify": sys.exit(verify(sys.argv[2], sys.argv[3]))
