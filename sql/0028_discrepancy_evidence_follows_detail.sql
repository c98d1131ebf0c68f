-- open_discrepancies (sql/0021) also returns each discrepancy's detail and amount at risk: a check that finds the same
-- discrepancy with another detail or amount (a stale_pending's age, a dispute's notes) is a change, so its answers are
-- kept and the discrepancy's evidence is that check's. Before, the detail moved on while the evidence stayed with an
-- older check, and `payrecon explain` showed a newer detail beside an older answer.
DROP FUNCTION open_discrepancies(text[], text[], text[], text[], text[]);
CREATE FUNCTION open_discrepancies(order_providers text[], order_ids text[], ref_providers text[], refs text[],
                                   excluded_kinds text[])
RETURNS TABLE (provider text, order_id text, transaction_ref text, kind text, status text, expected text, actual text,
               bare boolean, detail text, amount bigint)
LANGUAGE plpgsql STABLE SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    IF excluded_kinds IS NULL THEN
        RAISE EXCEPTION 'open_discrepancies: excluded_kinds is NULL (pass an empty array to exclude none)';
    END IF;
    RETURN QUERY
        SELECT d.* FROM (SELECT DISTINCT o.provider, o.order_id FROM unnest(order_providers, order_ids) AS o(provider, order_id)) k,
             LATERAL (SELECT d.provider, d.order_id, d.transaction_ref, d.kind, d.status, d.expected::text, d.actual::text,
                             d.evidence_id IS NULL, d.detail, d.amount_at_risk_minor
                      FROM discrepancies d
                      WHERE d.provider = k.provider AND d.order_id = k.order_id AND d.status IN ('open', 'acknowledged')
                        AND d.kind <> ALL (excluded_kinds)
                      OFFSET 0) d
        UNION ALL
        SELECT d.* FROM (SELECT DISTINCT r.provider, r.ref FROM unnest(ref_providers, refs) AS r(provider, ref)) k,
             LATERAL (SELECT d.provider, d.order_id, d.transaction_ref, d.kind, d.status, d.expected::text, d.actual::text,
                             d.evidence_id IS NULL, d.detail, d.amount_at_risk_minor
                      FROM discrepancies d
                      WHERE d.provider = k.provider AND d.transaction_ref = k.ref AND d.order_id IS NULL
                        AND d.status IN ('open', 'acknowledged') AND d.kind <> ALL (excluded_kinds)
                      OFFSET 0) d;
END $$;
