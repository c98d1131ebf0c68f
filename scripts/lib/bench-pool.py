#!/usr/bin/env python3
"""Writes N signed PXP deliveries for wrk (bench-ingest.lua): line 1 the body before the request id, line 2 the body
after it, then one line per delivery: "<X-Request-Id> <X-Signature>", all signed with one X-Signature-Timestamp
(the tolerance is 10 minutes; a run lasts seconds). Usage: bench-pool.py KEY TIMESTAMP N RUN OUT"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pxp_body import BODY_PREFIX, BODY_SUFFIX, body, signature  # noqa: E402

key, timestamp, n, run, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
with open(out, "w") as f:
    f.write(BODY_PREFIX + "\n" + BODY_SUFFIX + "\n")
    for i in range(n):
        rid = f"bench-{run}-{i:07d}"
        f.write(f"{rid} {signature(key, rid, timestamp, body(rid))}\n")
