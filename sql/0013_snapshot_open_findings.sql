-- Whether the last check recorded for an order left discrepancies open (findings), kept on its snapshot row. Every
-- discrepancy of an order is opened by a check of that order, under the order's lock, so a check that reads false
-- here (for the same transaction list) has nothing to resolve and sends no resolving UPDATE: planning those two
-- statements cost more than executing all of a check's statements together (pg_stat_statements, scripts/bench-reconcile).
-- true (the default, and for rows written before this column) means "not known": the check resolves as before.
ALTER TABLE snapshots ADD COLUMN open_findings boolean NOT NULL DEFAULT true;
