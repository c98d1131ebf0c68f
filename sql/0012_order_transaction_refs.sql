-- An order's several transactions, kept on the order itself too (orders.transaction_refs, NULL for one), so reading
-- an order needs no subquery: a correlated subquery in every order read cost about 1 ms of planning per statement
-- (statements are sent unnamed, planned each time), which scripts/bench-reconcile measured as a third of the worker's
-- throughput. order_transactions stays the table to write (and to look a transaction up by); a trigger keeps the
-- column in step, whoever writes the table.
ALTER TABLE orders ADD COLUMN transaction_refs text[];

CREATE FUNCTION order_transactions_sync() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE p text; o text;
BEGIN
    IF TG_OP = 'DELETE' THEN p := OLD.provider; o := OLD.order_id; ELSE p := NEW.provider; o := NEW.order_id; END IF;
    UPDATE orders SET transaction_refs = (
        SELECT array_agg(t.transaction_ref ORDER BY t.position, t.created_at) FROM order_transactions t
        WHERE t.provider = p AND t.order_id = o)
    WHERE provider = p AND order_id = o;
    RETURN NULL;
END $$;
CREATE TRIGGER order_transactions_sync AFTER INSERT OR UPDATE OR DELETE ON order_transactions
    FOR EACH ROW EXECUTE FUNCTION order_transactions_sync();

UPDATE orders o SET transaction_refs = (
    SELECT array_agg(t.transaction_ref ORDER BY t.position, t.created_at) FROM order_transactions t
    WHERE t.provider = o.provider AND t.order_id = o.order_id)
WHERE EXISTS (SELECT 1 FROM order_transactions t WHERE t.provider = o.provider AND t.order_id = o.order_id);
