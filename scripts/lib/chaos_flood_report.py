#!/usr/bin/env python3
"""Figures of scripts/chaos scenario 5.

  chaos_flood_report.py phase PHASE SECONDS "BEFORE" "AFTER" GENUINE.json FLOOD.json PXP_KEYS.txt
      one JSON line for a phase. BEFORE/AFTER are snapshots: database bytes, rejection-table bytes, rejected rows,
      rejected bytes, certificate fetches paysim served, connections cut by PAYRECON_REQUEST_TIMEOUT.
  chaos_flood_report.py print PHASES.jsonl
      a line per phase on stderr, the one-line summary on stdout."""
import json
import os
import sys


def phase(name, seconds, before, after, genuine_path, flood_path, keys_path):
    b = [int(x) for x in before.split()]
    a = [int(x) for x in after.split()]
    g = json.load(open(genuine_path))
    f = json.load(open(flood_path))["counts"] if name != "none" and os.path.exists(flood_path) else {}
    stored = set(open(keys_path).read().split())
    missing = [r for r in g["pxp_acked"] if r not in stored]
    answered = sum(v for k, v in f.items() if k.startswith("status_"))
    minutes = int(seconds) / 60
    flood = {
        "none": "no flood",
        "paypal-unsigned": f"{answered} unsigned PayPal deliveries with random cert URLs "
                           f"({f.get('status_401', 0)} answered 401)",
        "pxp-large": f"{answered} bad-signature 60 KiB bodies ({f.get('bytes_sent', 0) // 1048576} MiB, "
                     f"{f.get('status_401', 0)} answered 401)",
        "trickle": f"300 trickling connections from 127.0.0.2 ({f.get('connections_opened', 0)} opened, "
                   f"{a[5] - b[5]} cut by PAYRECON_REQUEST_TIMEOUT, {f.get('cut_by_server', 0)} closed by the server in all)",
    }[name]
    return {
        "phase": name, "flood": flood,
        "genuine": len(g["pxp_acked"]) + g["paypal_acked"], "pxp": len(g["pxp_acked"]), "paypal": g["paypal_acked"],
        "missing": len(missing), "s503": sum(v for k, v in g["counts"].items() if k.endswith("_503")),
        "p99_ms": round(g["p99"] * 1000), "max_ms": round(g["max"] * 1000), "over_2s": g["over_2s"],
        "cert_fetches": a[4] - b[4], "rejected_rows": a[2] - b[2], "rejected_bytes": a[3] - b[3],
        "rejection_tables_kib": round((a[1] - b[1]) / 1024),
        "db_kib_per_min": round((a[0] - b[0]) / 1024 / minutes),
    }


def show(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    for r in rows:
        print(f"  {r['phase']:>15}: {r['flood']}; genuine {r['genuine']} acknowledged ({r['pxp']} PXP, {r['paypal']} PayPal), "
              f"{r['missing']} missing, p99 {r['p99_ms']} ms, max {r['max_ms']} ms, {r['s503']} answered 503; "
              f"{r['cert_fetches']} certificate fetches; {r['rejected_rows']} rejected rows ({r['rejected_bytes'] // 1024} KiB) stored; "
              f"rejection tables {r['rejection_tables_kib']:+} KiB in the phase, database {r['db_kib_per_min']:+} KiB/min (the genuine deliveries)",
              file=sys.stderr)
    print("; ".join(f"{r['phase']}: {r['genuine']} genuine, {r['missing']} lost, p99 {r['p99_ms']} ms, {r['s503']} 503, "
                    f"{r['cert_fetches']} cert fetches, {r['rejected_rows']} rows stored, rejection tables {r['rejection_tables_kib']:+} KiB"
                    for r in rows))


if sys.argv[1] == "phase":
    print(json.dumps(phase(*sys.argv[2:9])))
else:
    show(sys.argv[2])
