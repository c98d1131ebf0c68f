-- Provider transactions linked to merchant orders, for every provider alike (replaces pxp_modifications and the
-- lookup through stored snapshots' JSON):
--   * a modification payrecon made (source 'payrecon': a PXP capture, refund, void or increment is a transaction
--     of its own, with its own id, linked to its parent by parent_external_id), or one it learned of;
--   * an alias (kind 'alias', source 'learned'): another id the order's own transaction is known by (PXP's
--     systemTransactionId), recorded on every check, so an event naming only that id finds its order.
-- The merchant's systems may also write rows (source 'learned'); kind is 'alias' or an action kind, amounts are
-- minor units of currency.
CREATE TABLE transaction_links (
    id                 bigserial   PRIMARY KEY,
    provider           text        NOT NULL,
    external_id        text        NOT NULL CHECK (external_id <> ''),
    parent_external_id text,
    order_id           text,
    kind               text        NOT NULL CHECK (kind IN ('alias', 'capture', 'void', 'refund', 'increment')),
    amount_minor       bigint,
    currency           text,
    state              text,
    source             text        NOT NULL CHECK (source IN ('payrecon', 'learned')),
    action_id          bigint,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX transaction_links_key ON transaction_links (provider, external_id, (coalesce(order_id, '')));
CREATE INDEX transaction_links_order ON transaction_links (provider, order_id);

INSERT INTO transaction_links (provider, external_id, parent_external_id, order_id, kind, amount_minor, currency, state,
                               source, action_id, created_at)
SELECT 'pxp', system_transaction_id, parent_system_transaction_id, order_id, operation, amount_minor, currency, state,
       'payrecon', action_id, created_at
FROM pxp_modifications
ON CONFLICT DO NOTHING;

INSERT INTO transaction_links (provider, external_id, order_id, kind, source)
SELECT provider, snapshot -> 'actionTargets' ->> 'systemTransactionID', order_id, 'alias', 'learned'
FROM snapshots
WHERE coalesce(snapshot -> 'actionTargets' ->> 'systemTransactionID', '') <> ''
ON CONFLICT DO NOTHING;

DROP INDEX IF EXISTS snapshots_pxp_system_transaction_id;
DROP TABLE pxp_modifications;

-- Which providers exist is the registry's business (Sources/Providers/Common/ProviderRegistry.swift), not the
-- schema's: a new provider needs no migration. A row naming a provider this payrecon does not know is an error that
-- names it when it is read.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_provider_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_provider_name CHECK (provider ~ '^[a-z][a-z0-9_]*$');
ALTER TABLE orders DROP CONSTRAINT orders_provider_check;
ALTER TABLE orders ADD CONSTRAINT orders_provider_name CHECK (provider ~ '^[a-z][a-z0-9_]*$');
