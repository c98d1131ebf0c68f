-- The merchant's orders: what payrecon checks each provider transaction against.
-- Written by `payrecon orders import FILE`, or directly by the merchant's systems:
--   * amounts are integer minor units of `currency` (USD 25.00 -> 2500, JPY 1000 -> 1000, KWD 1.250 -> 1250);
--   * (provider, order_id) is the key: upsert with ON CONFLICT (provider, order_id) DO UPDATE;
--   * set updated_at = now() on change (the trigger below does it) so the nightly sweep's window sees the change;
--   * PXP orders need merchant and site (they are part of PXP's API path); elsewhere empty means "not checked".
CREATE TABLE orders (
    provider             text        NOT NULL CHECK (provider IN ('pxp', 'paypal', 'paypercut')),
    order_id             text        NOT NULL CHECK (order_id <> ''),
    merchant             text        NOT NULL DEFAULT '',
    site                 text        NOT NULL DEFAULT '',
    transaction_ref      text        NOT NULL CHECK (transaction_ref <> ''),
    intent               text        NOT NULL CHECK (intent IN ('authorisation', 'estimated_authorisation', 'purchase', 'payout')),
    amount_minor         bigint      NOT NULL CHECK (amount_minor >= 0),
    currency             text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    fulfilment           text        NOT NULL CHECK (fulfilment IN ('open', 'fulfilled', 'cancelled')),
    refund_amount_minor  bigint      NOT NULL DEFAULT 0 CHECK (refund_amount_minor >= 0 AND refund_amount_minor <= amount_minor),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, order_id),
    CHECK (provider <> 'pxp' OR (merchant <> '' AND site <> ''))
);
CREATE INDEX orders_transaction_ref ON orders (provider, transaction_ref);
CREATE INDEX orders_updated_at ON orders (updated_at);

CREATE FUNCTION orders_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF ROW(NEW.*) IS DISTINCT FROM ROW(OLD.*) AND NEW.updated_at = OLD.updated_at THEN
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER orders_touch BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION orders_touch();
