#!/usr/bin/env python3
"""Generates a synthetic book for the benchmarks: paysim seed (PXP transactions) + matching orders CSV.

usage: gen_book.py N SEED_JSON ORDERS_CSV
Mix: 70% captured purchases that match, 20% fulfilled authorisations needing a capture, 10% purchases captured
short (amount_mismatch). Amounts are decimal strings (exact)."""
import random, sys

n, seed_path, orders_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = random.Random(42)
with open(seed_path, "w") as seed, open(orders_path, "w") as orders:
    seed.write('{"pxp":[\n')
    orders.write("provider,order_id,merchant,site,transaction_ref,intent,amount,currency,fulfilment,refund_amount\n")
    for i in range(n):
        cents = rng.randint(100, 100000)
        amount = f"{cents // 100}.{cents % 100:02d}"
        kind = rng.random()
        tx = f"BT-{i:08d}"
        if kind < 0.7:
            intent, state, value, order_intent = "Purchase", "Captured", amount, "purchase"
        elif kind < 0.9:
            intent, state, value, order_intent = "Authorisation", "Authorised", amount, "authorisation"
        else:
            short = max(1, cents - rng.randint(1, 99))
            intent, state, value, order_intent = "Purchase", "Captured", f"{short // 100}.{short % 100:02d}", "purchase"
        sep = "," if i else ""
        seed.write(f'{sep}{{"merchant":"BM","site":"BS","merchantTransactionId":"{tx}","intent":"{intent}",'
                   f'"currency":"EUR","value":"{value}","state":"{state}"}}\n')
        orders.write(f"pxp,BO-{i:08d},BM,BS,{tx},{order_intent},{amount},EUR,fulfilled,0\n")
    seed.write("]}\n")
