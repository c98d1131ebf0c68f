#!/usr/bin/env python3
"""Figures of scripts/chaos scenario 5.

  chaos_flood_report.py phase PHASE SECONDS "BEFORE" "AFTER" GENUINE.json FLOOD.json PXP_KEYS.txt
      one JSON line for a phase. BEFORE/AFTER are snapshots: database bytes, rejection-table bytes, rejected rows,
      rejected bytes, certificate fetches paysim served, connections cut by PAYRECON_REQUEST_TIMEOUT.
  chaos_flood_report.py cold-start SECONDS "BEFORE" "AFTER" GENUINE_PAYPAL.json CERT_FLOOD.json PAYPAL_KEYS.txt [NAME]
      one JSON line for the cold start under the cert-URL flood (chaos-flood.py genuine-paypal and cert-flood).
  chaos_flood_report.py memory SECONDS BUDGET_BYTES SLACK_MIB MEMORY.json GENUINE.json PXP_KEYS.txt PAYPAL_STORED
      one JSON line for the memory phase (chaos-flood.py memory and genuine); PAYPAL_STORED: PayPal rows the phase
      added.
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


def cold_start(seconds, before, after, genuine_path, flood_path, keys_path, name="cold-start"):
    b = [int(x) for x in before.split()]
    a = [int(x) for x in after.split()]
    g = json.load(open(genuine_path))
    f = json.load(open(flood_path))["counts"]
    stored = set(open(keys_path).read().split())
    answered = sum(v for k, v in f.items() if k.startswith("status_"))
    kinds = {}
    for k, v in f.items():
        if k.startswith(("random_", "alias_")):
            kinds[k] = v
    flood = (f"{f.get('sent_random', 0) + f.get('sent_alias', 0)} unsigned PayPal deliveries from 127.0.1.3 at 2/s "
             f"({f.get('sent_random', 0)} random cert URLs, {f.get('sent_alias', 0)} dot-segment aliases of the genuine one; "
             f"{f.get('connection_errors', 0)} before the receiver was up, {answered} answered, "
             f"{f.get('status_401', 0)} with 401)")
    if name == "cold-start-groups":
        flood = (f"{f.get('sent_random', 0)} unsigned PayPal deliveries at 30/s from three /24s and three /48s "
                 f"(X-Forwarded-For), random cert URLs sent 3 times each ({f.get('connection_errors', 0)} before the "
                 f"receiver was up, {answered} answered, {f.get('status_401', 0)} with 401)")
    if name == "trusted-address":
        flood = (f"{f.get('sent_random', 0)} unsigned PayPal deliveries at 30/s from one address inside PayPal's trusted "
                 f"/24 (X-Forwarded-For 127.0.0.66), random cert URLs sent 3 times each; PayPal's certificate not cached "
                 f"({f.get('connection_errors', 0)} before the receiver was up, {answered} answered, "
                 f"{f.get('status_401', 0)} with 401)")
    retried = {k: v for k, v in g["answers"].items() if k != "200"}
    return {
        "phase": name, "flood": flood, "flood_answers": kinds,
        "deliveries": g["deliveries"], "acked": g["acked"], "given_up": g["given_up"],
        "untrusted_once": g["untrusted_once"], "attempts": g["attempts"], "answers": retried,
        "missing": sum(1 for i in g["acked_ids"] if i not in stored), "max_ms": round(g["max"] * 1000),
        "p50_ms": round(g["p50"] * 1000), "first_acked_at": g["first_acked_at"],
        "capture_errors": g["counts"].get("capture_errors", 0), "cert_fetches": a[4] - b[4], "seconds": int(seconds),
    }


def memory(seconds, budget, slack_mib, memory_path, genuine_path, keys_path, paypal_stored):
    m = json.load(open(memory_path))
    c = m["counts"]
    g = json.load(open(genuine_path))
    stored = set(open(keys_path).read().split())
    mib = lambda kib: round(kib / 1024)  # noqa: E731
    early = {k[len("answered_"):]: v for k, v in c.items() if k.startswith("answered_") and k[9:].isdigit()}
    refused = {k: v for k, v in g["counts"].items() if "_status_" in k and not k.endswith("_503")}
    return {
        "phase": "memory", "seconds": int(seconds), "connections": m["connections"],
        "opened": c.get("connections_opened", 0), "refused_at_connect": c.get("refused_at_connect", 0) + c.get("connect_errors", 0),
        "bodies_held": c.get("bodies_held", 0), "sent_mib": c.get("bytes_sent", 0) // 1048576,
        "all_held_after": m["all_held_after"], "early_answers": early, "early": sum(early.values()),
        "early_with_retry_after": c.get("answered_with_retry_after", 0),
        "first_answer_after": m["first_answer_after"],
        "cut_while_sending": c.get("cut_while_sending", 0), "cut_while_holding": c.get("cut_while_holding", 0),
        "cut_after_idle": m.get("cut_after_idle"),
        "held_to_end": c.get("held_to_end", 0),
        "rss_before_mib": mib(m["rss_before_kib"]), "rss_peak_mib": mib(m["rss_peak_kib"]), "rss_end_mib": mib(m["rss_end_kib"]),
        "budget_mib": int(budget) // 1048576, "slack_mib": int(slack_mib),
        "limit_mib": int(budget) // 1048576 + int(slack_mib),
        "genuine": len(g["pxp_acked"]) + g["paypal_acked"], "pxp": len(g["pxp_acked"]), "paypal": g["paypal_acked"],
        "missing": sum(1 for r in g["pxp_acked"] if r not in stored) + max(0, g["paypal_acked"] - int(paypal_stored)),
        "s503": sum(v for k, v in g["counts"].items() if k.endswith("_503")), "refused": refused,
        "connection_errors": g["counts"].get("pxp_connection_errors", 0) + g["counts"].get("paypal_send_errors", 0),
        "p99_ms": round(g["p99"] * 1000), "max_ms": round(g["max"] * 1000), "over_2s": g["over_2s"],
        "slow": g["slow"][:10],
    }


def describe(r):
    """(the line on stderr, the part of the summary) of one phase."""
    if r["phase"].startswith("cold-start") or r["phase"] == "trusted-address":
        answers = ", ".join(f"{v}× {k}" for k, v in sorted(r["answers"].items())) or "none"
        return (f"  {r['phase']:>15}: a fresh receiver under {r['flood']}; genuine PayPal: {r['deliveries']} deliveries "
                f"({r['attempts']} attempts), {r['acked']} acknowledged 200, {r['given_up']} given up, "
                f"{r['untrusted_once']} answered 401 untrusted_certificate at least once, {r['missing']} acknowledged but missing, "
                f"first acknowledged {r['first_acked_at']} s in, p50 {r['p50_ms']} ms, max {r['max_ms']} ms; "
                f"answers but 200: {answers}; {r['cert_fetches']} certificate fetches",
                f"{r['phase']}: {r['acked']} of {r['deliveries']} genuine PayPal acknowledged, {r['given_up']} given up, "
                f"{r['untrusted_once']} saw 401 untrusted_certificate, {r['missing']} lost, max {r['max_ms']} ms, "
                f"{r['cert_fetches']} cert fetches")
    if r["phase"] == "memory":
        early = ", ".join(f"{v}× {k}" for k, v in sorted(r["early_answers"].items())) or "none"
        refused = ", ".join(f"{v}× {k}" for k, v in sorted(r["refused"].items())) or "none"
        return (f"  {r['phase']:>15}: {r['connections']} connections from 127.0.0.4-7 holding {r['connections']} × 1 MiB - 1 byte "
                f"({r['opened']} opened, {r['refused_at_connect']} refused at connect, {r['bodies_held']} bodies all but "
                f"sent{'' if r['all_held_after'] is None else ' within %s s' % r['all_held_after']}, {r['sent_mib']} MiB sent; "
                f"{r['early']} answered early ({early}; {r['early_with_retry_after']} with Retry-After, first after "
                f"{r['first_answer_after']} s), {r['cut_while_sending']} cut while sending, {r['cut_while_holding']} cut while "
                f"holding{'' if not r.get('cut_after_idle') else ' (%s-%s s after their last byte)' % tuple(r['cut_after_idle'])}, {r['held_to_end']} held to the end of the {r['seconds']} s); receiver RSS {r['rss_before_mib']} MiB "
                f"before, peak {r['rss_peak_mib']} MiB (limit {r['limit_mib']} = budget {r['budget_mib']} + {r['slack_mib']}), "
                f"{r['rss_end_mib']} MiB 3 s after; genuine {r['genuine']} acknowledged ({r['pxp']} PXP, {r['paypal']} PayPal), "
                f"{r['missing']} missing, p99 {r['p99_ms']} ms, max {r['max_ms']} ms, {r['over_2s']} over 2 s, "
                f"{r['s503']} answered 503, {r['connection_errors']} connection errors, refused: {refused}",
                f"memory: RSS {r['rss_before_mib']} → peak {r['rss_peak_mib']} MiB (limit {r['limit_mib']}), "
                f"{r['early']} early answers ({r['early_with_retry_after']} with Retry-After), genuine {r['genuine']}, "
                f"{r['missing']} lost, {r['over_2s']} over 2 s, max {r['max_ms']} ms")
    return (f"  {r['phase']:>15}: {r['flood']}; genuine {r['genuine']} acknowledged ({r['pxp']} PXP, {r['paypal']} PayPal), "
            f"{r['missing']} missing, p99 {r['p99_ms']} ms, max {r['max_ms']} ms, {r['s503']} answered 503; "
            f"{r['cert_fetches']} certificate fetches; {r['rejected_rows']} rejected rows ({r['rejected_bytes'] // 1024} KiB) stored; "
            f"rejection tables {r['rejection_tables_kib']:+} KiB in the phase, database {r['db_kib_per_min']:+} KiB/min (the genuine deliveries)",
            f"{r['phase']}: {r['genuine']} genuine, {r['missing']} lost, p99 {r['p99_ms']} ms, {r['s503']} 503, "
            f"{r['cert_fetches']} cert fetches, {r['rejected_rows']} rows stored, rejection tables {r['rejection_tables_kib']:+} KiB")


def show(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    for r in rows:
        print(describe(r)[0], file=sys.stderr)
    print("; ".join(describe(r)[1] for r in rows))


if sys.argv[1] == "phase":
    print(json.dumps(phase(*sys.argv[2:9])))
elif sys.argv[1] == "cold-start":
    print(json.dumps(cold_start(*sys.argv[2:9])))
elif sys.argv[1] == "memory":
    print(json.dumps(memory(*sys.argv[2:9])))
else:
    show(sys.argv[2])
