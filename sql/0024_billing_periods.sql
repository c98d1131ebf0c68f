-- Subscriptions: each renewal reconciled as its own order. An order whose transaction_ref is a subscription or billing
-- agreement (PayPal I-…) may name the billing period it charges; of the agreement's payments, it holds those created
-- within [period_start, period_end). Orders of one agreement have periods that do not overlap, or none of them has one
-- (`payrecon orders import` refuses anything else, naming the lines).
ALTER TABLE orders ADD COLUMN period_start timestamptz, ADD COLUMN period_end timestamptz;
-- Given as dates without a time (read as 00:00 UTC): a payment made within 14 hours of such a boundary may be another
-- cycle's for a merchant away from UTC, and no refund is taken from it.
ALTER TABLE orders ADD COLUMN period_dates boolean NOT NULL DEFAULT false;
-- Every row before this has neither: NOT VALID skips reading the table; the check holds for every write from now on.
ALTER TABLE orders ADD CONSTRAINT orders_period CHECK ((period_start IS NULL) = (period_end IS NULL) AND period_end > period_start) NOT VALID;
CREATE INDEX orders_agreement_periods ON orders (provider, transaction_ref, period_start) WHERE period_start IS NOT NULL;

-- When the payment a link names was created, as the provider's answer says (PayPal's sale create_time): which period
-- holds it. A sale of an agreement no order's period holds is kept with no order (order_id NULL, parent_external_id the
-- agreement), and taken by the order of that period when the merchant records it.
ALTER TABLE transaction_links ADD COLUMN occurred_at timestamptz;
-- By parent: an order's check reads the refunds, reversals and disputes of its sales wherever they were recorded, and
-- the sales kept with no order under its agreement (TransactionLinkStore.links), on every check.
CREATE INDEX transaction_links_parent ON transaction_links (provider, parent_external_id);

-- A replaced version of an order keeps its period too (payrecon explain).
CREATE OR REPLACE FUNCTION orders_keep_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO order_versions (provider, order_id, valid_from, source, value)
    SELECT o.provider, o.order_id, o.updated_at, o.source,
           jsonb_strip_nulls(jsonb_build_object('merchant', o.merchant, 'site', o.site, 'transaction_ref', o.transaction_ref,
                              'intent', o.intent, 'amount_minor', o.amount_minor, 'currency', o.currency, 'fulfilment', o.fulfilment,
                              'refund_amount_minor', o.refund_amount_minor, 'period_start', o.period_start, 'period_end', o.period_end))
    FROM old_rows o JOIN new_rows n USING (provider, order_id)
    WHERE ROW(o.merchant, o.site, o.transaction_ref, o.intent, o.amount_minor, o.currency, o.fulfilment, o.refund_amount_minor,
              o.period_start, o.period_end)
          IS DISTINCT FROM ROW(n.merchant, n.site, n.transaction_ref, n.intent, n.amount_minor, n.currency, n.fulfilment,
              n.refund_amount_minor, n.period_start, n.period_end);
    RETURN NULL;
END $$;
