-- An order paid in several attempts or transactions: a retry after a decline (PXP asks for a new
-- merchantTransactionId per attempt), a split payment, a buyer who pays with a new PayPal order.
--
-- order_transactions lists every transaction of an order, in order (position 0 first). orders.transaction_ref stays
-- the first one, so a single-transaction order needs no row here: an order without rows has exactly its
-- transaction_ref. The merchant's systems may write rows directly (keep position 0 equal to orders.transaction_ref);
-- `payrecon orders import` writes them for every order with several references. payrecon itself adds a row when a
-- provider's answer for a transaction no order lists names a known order (PayPal purchase_units[].reference_id or
-- custom_id, Paypercut metadata.order_id).
CREATE TABLE order_transactions (
    provider        text        NOT NULL,
    order_id        text        NOT NULL,
    transaction_ref text        NOT NULL CHECK (transaction_ref <> ''),
    position        integer     NOT NULL CHECK (position >= 0),
    source          text        NOT NULL DEFAULT 'merchant' CHECK (source IN ('merchant', 'learned')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, order_id, transaction_ref),
    FOREIGN KEY (provider, order_id) REFERENCES orders (provider, order_id) ON DELETE CASCADE
);
CREATE INDEX order_transactions_ref ON order_transactions (provider, transaction_ref);

-- With several transactions an action names the one it acts on (its key ends with it).
ALTER TABLE actions ADD COLUMN transaction_ref text;
