-- The money each order moved, as its provider's answers state it: captures (and sales), refunds and reversals, with
-- the fee and the net where the answer states them. Derived from the stored snapshots (their `movements`) by the
-- trigger below, so it never disagrees with them; `report --view fees` sums it per provider, currency and day, and
-- `settlement import` matches settlement lines to it by the provider's id.
CREATE TABLE movements (
    provider        text        NOT NULL,
    movement_id     text        NOT NULL,
    kind            text        NOT NULL CHECK (kind IN ('capture', 'refund', 'reversal')),
    order_id        text        NOT NULL,
    transaction_ref text        NOT NULL,
    -- When the provider says it happened; NULL where its answer does not say (the day is then first_seen's).
    occurred_at     timestamptz,
    first_seen      timestamptz NOT NULL DEFAULT now(),
    currency        text        NOT NULL,
    gross_minor     bigint      NOT NULL CHECK (gross_minor >= 0),
    -- NULL where the answer states no fee (a pending PayPal capture has no breakdown), and no net.
    fee_minor       bigint,
    net_minor       bigint,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, movement_id, kind)
);
CREATE INDEX movements_day ON movements ((coalesce(occurred_at, first_seen)));
CREATE INDEX movements_order ON movements (provider, order_id);

-- Keeps movements equal to the snapshot's list: what it no longer lists goes, what it lists is written (once per
-- id and kind, should an answer repeat one). Runs only when the list changed, so a sweep that finds nothing new
-- writes nothing here.
CREATE FUNCTION snapshot_movements() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM movements m
    WHERE m.provider = NEW.provider AND m.order_id = NEW.order_id
      AND NOT EXISTS (SELECT 1 FROM jsonb_to_recordset(coalesce(NEW.snapshot -> 'movements', '[]'::jsonb)) AS x(id text, kind text)
                      WHERE x.id = m.movement_id AND x.kind = m.kind);
    INSERT INTO movements AS m (provider, movement_id, kind, order_id, transaction_ref, occurred_at, currency, gross_minor, fee_minor, net_minor)
    SELECT DISTINCT ON (x.id, x.kind) NEW.provider, x.id, x.kind, NEW.order_id, NEW.transaction_ref, to_timestamp(x."at"),
           x.currency ->> 'code', x.gross, x.fee, x.net
    FROM jsonb_to_recordset(coalesce(NEW.snapshot -> 'movements', '[]'::jsonb))
         AS x(id text, kind text, "at" bigint, currency jsonb, gross bigint, fee bigint, net bigint)
    ORDER BY x.id, x.kind
    ON CONFLICT (provider, movement_id, kind) DO UPDATE SET
        order_id = EXCLUDED.order_id, transaction_ref = EXCLUDED.transaction_ref, occurred_at = EXCLUDED.occurred_at,
        currency = EXCLUDED.currency, gross_minor = EXCLUDED.gross_minor, fee_minor = EXCLUDED.fee_minor,
        net_minor = EXCLUDED.net_minor, updated_at = now()
    WHERE (m.order_id, m.transaction_ref, m.occurred_at, m.currency, m.gross_minor, m.fee_minor, m.net_minor)
          IS DISTINCT FROM (EXCLUDED.order_id, EXCLUDED.transaction_ref, EXCLUDED.occurred_at, EXCLUDED.currency,
                            EXCLUDED.gross_minor, EXCLUDED.fee_minor, EXCLUDED.net_minor);
    RETURN NULL;
END
$$;

CREATE TRIGGER snapshots_movements_insert AFTER INSERT ON snapshots FOR EACH ROW
    WHEN (NEW.snapshot -> 'movements' IS NOT NULL AND NEW.snapshot -> 'movements' <> '[]'::jsonb)
    EXECUTE FUNCTION snapshot_movements();
CREATE TRIGGER snapshots_movements_update AFTER UPDATE OF snapshot ON snapshots FOR EACH ROW
    WHEN (OLD.snapshot -> 'movements' IS DISTINCT FROM NEW.snapshot -> 'movements')
    EXECUTE FUNCTION snapshot_movements();
