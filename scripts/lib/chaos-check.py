#!/usr/bin/env python3
"""scripts/chaos: checks that every acknowledged delivery is stored. Usage: chaos-check.py RESULT.json ROWS.tsv
ROWS.tsv: "id<TAB>dedupe_key" of every PXP delivery. Prints a JSON summary; exit 1 if an acknowledged delivery is
missing or stored under another id than the one answered."""
import json
import sys

result = json.load(open(sys.argv[1]))
rows = {}
for line in open(sys.argv[2]):
    if line.strip():
        eid, key = line.rstrip("\n").split("\t", 1)
        rows[key] = int(eid)
missing = [rid for rid in result["acked"] if rid not in rows]
wrong = [rid for rid, eid in result["acked"].items() if rid in rows and rows[rid] != eid]
summary = dict(result["counts"], acked=len(result["acked"]), rows=len(rows), missing=len(missing),
               wrong_id=len(wrong), other=result["other"])
print(json.dumps(summary))
sys.exit(1 if missing or wrong else 0)
