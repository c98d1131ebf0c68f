-- An action whose call may have reached the provider without payrecon knowing the outcome (the call was sent, then
-- a timeout, a 5xx, a cut connection or a crash). Set just before every call and cleared when the outcome is known.
-- While it is set, a check never supersedes the action nor plans another one on the same transaction (a refund of
-- 5.00 that timed out and a new refund of 8.00 would refund 13.00); the executor first asks the provider what came
-- of the call (for PXP: the modification looked up by its merchantTransactionId) and re-sends only when the provider
-- says it was not made, or when the provider de-duplicates the idempotency key.
ALTER TABLE actions ADD COLUMN in_doubt boolean NOT NULL DEFAULT false;

-- action_failed: an action of the order the provider refused, or whose outcome payrecon cannot learn.
ALTER TABLE discrepancies DROP CONSTRAINT discrepancies_kind_check;
ALTER TABLE discrepancies ADD CONSTRAINT discrepancies_kind_check CHECK (kind IN ('missing_at_provider', 'unknown_order',
    'merchant_mismatch', 'site_mismatch', 'currency_mismatch', 'intent_mismatch', 'amount_mismatch', 'over_captured',
    'over_refunded', 'state_mismatch', 'action_not_allowed', 'stale_pending', 'disputed', 'reversed', 'action_failed'));

-- The total a modification brings its parent to, when payrecon sent it (an increment's new authorised total): the
-- count of A then does not depend on whether PXP also shows the increment on the parent (undocumented).
ALTER TABLE transaction_links ADD COLUMN target_minor bigint;

-- A reversal record a PAYMENT.CAPTURE.REVERSED event named (a chargeback as PayPal shows it: a refund-shaped record):
-- counted in V, never in R.
ALTER TABLE transaction_links DROP CONSTRAINT IF EXISTS transaction_links_kind_check;
ALTER TABLE transaction_links ADD CONSTRAINT transaction_links_kind_check
    CHECK (kind IN ('alias', 'capture', 'void', 'refund', 'increment', 'sale', 'dispute', 'reversal'));

-- When the last call was sent (set just before it): a provider's "not found" for a call in doubt is trusted only
-- PAYRECON_IN_DOUBT_GRACE after it (a slow provider may still be applying it), and an action in doubt is not
-- superseded sooner.
ALTER TABLE actions ADD COLUMN sent_at timestamptz;
