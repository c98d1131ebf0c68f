-- The discrepancies open or acknowledged for a group of checks, read under their locks before anything is written
-- (what each check's evidence keeps follows from them): each order's own, and the unknown_order ones of the
-- transactions the checks name. `excluded_kinds` are the kinds a check neither raises nor resolves (settlement's),
-- given by the code that owns that list.
--
-- A PL/pgSQL function, so each server process plans the query once and keeps the plan: payrecon's statements are
-- unnamed (PgBouncer in transaction mode keeps no prepared statement), so PostgreSQL plans each one on every call,
-- and planned per group as a correlated subquery of the orders read this cost more than reading the orders (a first
-- sweep over 100,000 orders: about 1 ms per group on a quiet machine, against 0.1 ms for the call).
--
-- A kept plan must not depend on the table's size when it was made: planned against an empty table it would scan
-- every active discrepancy on each call, long after the table grew (it is made again only when the table's
-- statistics change). So each key is a lookup of its own (a LATERAL subquery behind OFFSET 0, which the planner
-- neither flattens into a hash join nor reorders), and a sequential scan is never chosen (SET enable_seqscan = off,
-- for this function's queries only): whatever the statistics say, the plan is one index probe per key. That makes
-- the generic plan safe to keep always (plan_cache_mode): left to choose, PostgreSQL would plan small groups afresh.
-- Every column is qualified: the names of the result (provider, order_id, kind...) are variables in the body.
CREATE FUNCTION open_discrepancies(order_providers text[], order_ids text[], ref_providers text[], refs text[],
                                   excluded_kinds text[])
RETURNS TABLE (provider text, order_id text, transaction_ref text, kind text, status text, expected text, actual text,
               bare boolean)
LANGUAGE plpgsql STABLE SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    IF excluded_kinds IS NULL THEN
        RAISE EXCEPTION 'open_discrepancies: excluded_kinds is NULL (pass an empty array to exclude none)';
    END IF;
    RETURN QUERY
        SELECT d.* FROM (SELECT DISTINCT o.provider, o.order_id FROM unnest(order_providers, order_ids) AS o(provider, order_id)) k,
             LATERAL (SELECT d.provider, d.order_id, d.transaction_ref, d.kind, d.status, d.expected::text, d.actual::text,
                             d.evidence_id IS NULL
                      FROM discrepancies d
                      WHERE d.provider = k.provider AND d.order_id = k.order_id AND d.status IN ('open', 'acknowledged')
                        AND d.kind <> ALL (excluded_kinds)
                      OFFSET 0) d
        UNION ALL
        SELECT d.* FROM (SELECT DISTINCT r.provider, r.ref FROM unnest(ref_providers, refs) AS r(provider, ref)) k,
             LATERAL (SELECT d.provider, d.order_id, d.transaction_ref, d.kind, d.status, d.expected::text, d.actual::text,
                             d.evidence_id IS NULL
                      FROM discrepancies d
                      WHERE d.provider = k.provider AND d.transaction_ref = k.ref AND d.order_id IS NULL
                        AND d.status IN ('open', 'acknowledged') AND d.kind <> ALL (excluded_kinds)
                      OFFSET 0) d;
END $$;
