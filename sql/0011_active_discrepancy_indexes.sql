-- Every check resolves what it no longer finds among the order's open and acknowledged discrepancies (and an unknown
-- transaction's); the indexes of 0003 cover status = 'open' only, so since acknowledgement those statements scanned
-- the table on every check (the sweep fell from 0.61 to 0.28 of its ideal in scripts/bench-reconcile).
CREATE INDEX discrepancies_order_active ON discrepancies (provider, order_id) WHERE status IN ('open', 'acknowledged');
CREATE INDEX discrepancies_unknown_active ON discrepancies (provider, transaction_ref)
    WHERE order_id IS NULL AND status IN ('open', 'acknowledged');
