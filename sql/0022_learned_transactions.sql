-- A learned transaction is evidence, never authority. payrecon adds a transaction to an order when a provider's answer
-- for a transaction no order lists names the order in a reference field (PayPal purchase_units[].reference_id or
-- custom_id, Paypercut metadata.order_id). Those fields are free text set by whoever created the payment, so such a
-- transaction counts in the order's findings but no action ever targets it. learned_from keeps the field that named
-- it (what the finding quotes); orders.learned_transactions keeps, for each order that has any, a JSON object of those
-- transactions (transaction_ref -> field), so reading an order needs no subquery (as orders.transaction_refs,
-- 0012). A merchant who lists the transaction (a re-import naming it) turns its row to source 'merchant': authority.
ALTER TABLE order_transactions ADD COLUMN learned_from text;
ALTER TABLE orders ADD COLUMN learned_transactions jsonb;

CREATE OR REPLACE FUNCTION order_transactions_sync() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE p text; o text;
BEGIN
    IF TG_OP = 'DELETE' THEN p := OLD.provider; o := OLD.order_id; ELSE p := NEW.provider; o := NEW.order_id; END IF;
    UPDATE orders SET
        transaction_refs = (
            SELECT array_agg(t.transaction_ref ORDER BY t.position, t.created_at) FROM order_transactions t
            WHERE t.provider = p AND t.order_id = o),
        learned_transactions = (
            SELECT jsonb_object_agg(t.transaction_ref, coalesce(t.learned_from, 'a reference field of the provider''s answer'))
            FROM order_transactions t WHERE t.provider = p AND t.order_id = o AND t.source = 'learned')
    WHERE provider = p AND order_id = o;
    RETURN NULL;
END $$;

UPDATE orders o SET learned_transactions = (
    SELECT jsonb_object_agg(t.transaction_ref, 'a reference field of the provider''s answer') FROM order_transactions t
    WHERE t.provider = o.provider AND t.order_id = o.order_id AND t.source = 'learned')
WHERE EXISTS (SELECT 1 FROM order_transactions t WHERE t.provider = o.provider AND t.order_id = o.order_id AND t.source = 'learned');
