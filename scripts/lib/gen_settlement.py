#!/usr/bin/env python3
"""A PayPal settlement (STL) file of N body rows for scripts/bench-settlement, and the movements payrecon would know
for them (a CSV for COPY into the movements table), so the import matches every line as it would in production.

    gen_settlement.py N FILE MOVEMENTS.csv [UNKNOWN_PERCENT]

Rows: a capture (T0006, CR, its fee DR) and, for every fifth, a refund of part of it (T1107, DR, its fee given back
CR), in USD; UNKNOWN_PERCENT of the captures (default 1) have no movement (unknown_settlement)."""
import random
import sys

n, path, movements_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
unknown = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
rng = random.Random(42)
day = "2026/11/30"
rows = 0
credit = debit = fee_credit = fee_debit = 0
with open(path, "w", newline="") as f, open(movements_path, "w") as m:
    w = f.write
    w('"RH",2026/12/01 02:00:00 +0000,"R","BENCHACCOUNT1",009,\r\n"FH",01\r\n')
    w(f'"SH",{day} 00:00:00 +0000,{day} 23:59:59 +0000,"BENCHACCOUNT1",""\r\n')
    w('"CH","Transaction ID","Invoice ID","PayPal Reference ID","PayPal Reference ID Type","Transaction Event Code",'
      '"Transaction Initiation Date","Transaction Completion Date","Transaction Debit or Credit","Gross Transaction Amount",'
      '"Gross Transaction Currency","Fee Debit or Credit","Fee Amount","Fee Currency","Custom Field","Consumer ID"\r\n')
    i = 0
    while rows < n:
        i += 1
        cap = f"CAP{i:013d}"
        gross = rng.randint(100, 500_000)
        fee = (gross * 349 + 5000) // 10000 + 49
        t = f"{day} {i % 24:02d}:{i % 60:02d}:{i % 59:02d} +0000"
        w(f'"SB","{cap}","INV-{i}","O{i}","ODR","T0006",{t},{t},"CR",{gross},"USD","DR",{fee},"USD","ORD-{i}",""\r\n')
        rows += 1; credit += gross; fee_debit += fee
        if rng.random() * 100 >= unknown:
            m.write(f"paypal,{cap},capture,ORD-{i},O{i},2026-11-30 00:00:00+00,USD,{gross},{fee},{gross - fee},BENCHACCOUNT1\n")
        if i % 5 == 0 and rows < n:
            ref = f"REF{i:013d}"
            back = gross // 3
            back_fee = (back * 349 + 5000) // 10000
            w(f'"SB","{ref}","INV-{i}","{cap}","TXN","T1107",{t},{t},"DR",{back},"USD","CR",{back_fee},"USD","ORD-{i}",""\r\n')
            rows += 1; debit += back; fee_credit += back_fee
            m.write(f"paypal,{ref},refund,ORD-{i},O{i},2026-11-30 00:00:00+00,USD,{back},{back_fee},{back - back_fee},BENCHACCOUNT1\n")
    w(f'"SF","USD",{credit},{debit},{fee_credit},{fee_debit}\r\n"SC",{rows}\r\n"RF",{rows}\r\n"RC",{rows}\r\n"FF",{rows}\r\n')
