-- The money at risk when each `payrecon reconcile` run finished, per currency (minor units as text, each order counted
-- once, as `payrecon report` counts it): the console's 30-day chart reads it. Runs before this migration have none.
ALTER TABLE runs ADD COLUMN at_risk jsonb;

-- The console's deliveries per hour read the last day by received_at: a BRIN index (a few pages for millions of rows,
-- next to nothing to keep up on the receiver's inserts, which arrive in received_at order) lets it read the newest
-- block ranges instead of the whole table. Building it reads the table once while the receiver's inserts wait (about a
-- second per GB): on a large `deliveries`, create it beforehand without blocking them, and this keeps it:
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_received_brin ON deliveries USING brin (received_at);
-- Rows `payrecon prune` frees are reused by later inserts, which widens old ranges; the read stays correct (a range is
-- a superset), only less narrow.
CREATE INDEX IF NOT EXISTS deliveries_received_brin ON deliveries USING brin (received_at);
