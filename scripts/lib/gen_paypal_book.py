#!/usr/bin/env python3
"""A PayPal book for scripts/bench-backfill: N captured orders spread over the days before today (paysim seed), the
orders CSV that holds all but UNKNOWN_PERCENT of them (those are transactions no order holds: unknown_order).

usage: gen_paypal_book.py N DAYS SEED_JSON ORDERS_CSV [UNKNOWN_PERCENT]"""
import datetime, random, sys

n, days, seed_path, orders_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
unknown = float(sys.argv[5]) if len(sys.argv) > 5 else 1.0
rng = random.Random(7)
today = datetime.datetime.now(datetime.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
with open(seed_path, "w") as seed, open(orders_path, "w") as orders:
    seed.write('{"paypal":[\n')
    orders.write("provider,order_id,merchant,site,transaction_ref,intent,amount,currency,fulfilment,refund_amount\n")
    for i in range(n):
        cents = rng.randint(100, 100000)
        amount = f"{cents // 100}.{cents % 100:02d}"
        when = today - datetime.timedelta(days=1 + i % days, seconds=rng.randint(0, 86399))
        t = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        sep = "," if i else ""
        seed.write(f'{sep}{{"id":"BPP{i:09d}","intent":"CAPTURE","status":"COMPLETED","currency":"USD","amount":"{amount}",'
                   f'"create_time":"{t}","captures":[{{"id":"BCAP{i:09d}","create_time":"{t}"}}]}}\n')
        if rng.random() * 100 >= unknown:
            orders.write(f"paypal,BPO-{i:09d},,,BPP{i:09d},purchase,{amount},USD,fulfilled,0\n")
    seed.write("]}\n")
