-- Every event accounted for.

-- A delivery ends done (with the orders it re-checked), ignored (it names no payment: the reason is kept) or dead.
-- `outcome` says what processing came to: "re-checked pxp orders ORD-1, ORD-2", "ignored: VAULT.PAYMENT-TOKEN.CREATED
-- names no payment", or the reason it died (also in last_error).
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check CHECK (status IN ('pending', 'done', 'ignored', 'dead'));
ALTER TABLE deliveries ADD COLUMN outcome text;

-- Money under dispute and money taken back are discrepancies of their own; an operator may acknowledge one: it leaves
-- the open set and the money at risk, and the same finding (kind, expected, actual) seen again keeps it acknowledged.
ALTER TABLE discrepancies DROP CONSTRAINT discrepancies_kind_check;
ALTER TABLE discrepancies ADD CONSTRAINT discrepancies_kind_check CHECK (kind IN ('missing_at_provider', 'unknown_order',
    'merchant_mismatch', 'site_mismatch', 'currency_mismatch', 'intent_mismatch', 'amount_mismatch', 'over_captured',
    'over_refunded', 'state_mismatch', 'action_not_allowed', 'stale_pending', 'disputed', 'reversed'));
ALTER TABLE discrepancies DROP CONSTRAINT discrepancies_status_check;
ALTER TABLE discrepancies ADD CONSTRAINT discrepancies_status_check CHECK (status IN ('open', 'acknowledged', 'resolved'));
ALTER TABLE discrepancies ADD COLUMN acknowledged_at timestamptz;
ALTER TABLE discrepancies ADD COLUMN ack_note text;
CREATE INDEX discrepancies_acknowledged ON discrepancies (provider, coalesce(order_id, ''), transaction_ref, kind)
    WHERE status = 'acknowledged';

-- Links payrecon learns from events: a PayPal v1 sale (kind 'sale': every later check of the order fetches its
-- sales) and a PayPal dispute naming one of the order's captures (kind 'dispute', parent = the capture id: every
-- later check fetches the dispute). PXP modifications made elsewhere (the portal) are learned as their action kind.
ALTER TABLE transaction_links DROP CONSTRAINT transaction_links_kind_check;
ALTER TABLE transaction_links ADD CONSTRAINT transaction_links_kind_check
    CHECK (kind IN ('alias', 'capture', 'void', 'refund', 'increment', 'sale', 'dispute'));
