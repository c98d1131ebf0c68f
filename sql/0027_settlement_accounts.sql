-- Settlement judged per account: a PayPal merchant with two accounts who imports one account's files must not see every
-- capture of the other as settlement_missing. A movement's account is the payee its provider's answer names (the
-- snapshot's merchant), else the merchant the order names; a file's is its header's account id, else the payee its
-- captures share. A capture or refund is judged only from the first file of its own account on, and only that
-- account's files list it.
ALTER TABLE movements ADD COLUMN account text;
-- What PayPal credits after a currency conversion: a capture's `receivable_amount` (a refund's
-- `net_amount_in_receivable_currency`), in the currency of the account the payee receives in. Such a movement's net
-- never reached the balance in its own currency: the fees view counts what was received, in the currency received.
ALTER TABLE movements ADD COLUMN received_minor bigint, ADD COLUMN received_currency text;

UPDATE movements m SET account = coalesce(nullif(s.snapshot ->> 'merchant', ''), nullif(o.merchant, ''))
FROM snapshots s LEFT JOIN orders o ON o.provider = s.provider AND o.order_id = s.order_id
WHERE s.provider = m.provider AND s.order_id = m.order_id;

CREATE OR REPLACE FUNCTION snapshot_movements() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    owner text := coalesce(nullif(NEW.snapshot ->> 'merchant', ''),
                           (SELECT nullif(o.merchant, '') FROM orders o WHERE o.provider = NEW.provider AND o.order_id = NEW.order_id));
BEGIN
    DELETE FROM movements m
    WHERE m.provider = NEW.provider AND m.order_id = NEW.order_id
      AND NOT EXISTS (SELECT 1 FROM jsonb_to_recordset(coalesce(NEW.snapshot -> 'movements', '[]'::jsonb)) AS x(id text, kind text)
                      WHERE x.id = m.movement_id AND x.kind = m.kind);
    INSERT INTO movements AS m (provider, movement_id, kind, order_id, transaction_ref, occurred_at, currency, gross_minor, fee_minor, net_minor,
                                account, received_minor, received_currency)
    SELECT DISTINCT ON (x.id, x.kind) NEW.provider, x.id, x.kind, NEW.order_id, NEW.transaction_ref, to_timestamp(x."at"),
           x.currency ->> 'code', x.gross, x.fee, x.net, owner, x.received, x."receivedCurrency" ->> 'code'
    FROM jsonb_to_recordset(coalesce(NEW.snapshot -> 'movements', '[]'::jsonb))
         AS x(id text, kind text, "at" bigint, currency jsonb, gross bigint, fee bigint, net bigint, received bigint, "receivedCurrency" jsonb)
    ORDER BY x.id, x.kind
    ON CONFLICT (provider, movement_id, kind) DO UPDATE SET
        order_id = EXCLUDED.order_id, transaction_ref = EXCLUDED.transaction_ref, occurred_at = EXCLUDED.occurred_at,
        currency = EXCLUDED.currency, gross_minor = EXCLUDED.gross_minor, fee_minor = EXCLUDED.fee_minor,
        net_minor = EXCLUDED.net_minor, account = EXCLUDED.account, received_minor = EXCLUDED.received_minor,
        received_currency = EXCLUDED.received_currency, updated_at = now()
    WHERE (m.order_id, m.transaction_ref, m.occurred_at, m.currency, m.gross_minor, m.fee_minor, m.net_minor, m.account, m.received_minor,
           m.received_currency)
          IS DISTINCT FROM (EXCLUDED.order_id, EXCLUDED.transaction_ref, EXCLUDED.occurred_at, EXCLUDED.currency,
                            EXCLUDED.gross_minor, EXCLUDED.fee_minor, EXCLUDED.net_minor, EXCLUDED.account, EXCLUDED.received_minor,
                            EXCLUDED.received_currency);
    RETURN NULL;
END
$$;

-- A file's time zone, as its rows' offsets state it (seconds east of UTC): its day is that zone's, and the fees view
-- groups an account's movements by the same day.
ALTER TABLE settlement_files ADD COLUMN utc_offset integer;
CREATE INDEX settlement_files_account ON settlement_files (provider, (coalesce(account, '')), (coalesce(kind, '')), day);
