-- The evidence behind every finding and every action (`payrecon explain`), kept as checks run and bounded:
--   * every recorded check of an order (or of a transaction no order holds) is one `evidence` row with the SHA-256
--     of each raw provider answer it used, 32 bytes each, in the order they were fetched: a clean check stores
--     nothing more;
--   * a check that opened, changed or resolved a discrepancy or planned an action (`decided`) also keeps each raw
--     answer (`evidence_answers`) and the decision-table rows that fired with the A, C, R, V, D they saw (`decision`);
--   * every call made for an action is an `action_calls` row: when, the idempotency key as sent, the provider's status
--     and raw answer, and the outcome recorded for it;
--   * `payrecon prune` removes evidence older than PAYRECON_RETAIN's `evidence=` except what an open or acknowledged
--     discrepancy or a pending action points at.
CREATE TABLE evidence (
    id              bigserial   PRIMARY KEY,
    provider        text        NOT NULL,
    order_id        text,                       -- NULL: a transaction no order holds (unknown_order)
    transaction_ref text        NOT NULL,
    checked_at      timestamptz NOT NULL,       -- when its answers were fetched
    source          text        NOT NULL CHECK (source IN ('webhook', 'sweep', 'executor', 'command')),
    delivery_id     bigint,                     -- the delivery a webhook check ran for
    answer_hashes   bytea       NOT NULL,       -- SHA-256 of each raw answer, concatenated
    decided         text,                       -- NULL, or what it decided: opened, changed, resolved, planned, call
    decision        jsonb                       -- when decided: the rows that fired and the figures they saw
);
CREATE INDEX evidence_order ON evidence (provider, order_id, id);
CREATE INDEX evidence_unknown ON evidence (provider, transaction_ref, id) WHERE order_id IS NULL;
-- Prune walks by time; a BRIN index is a few pages for millions of rows written in time order.
CREATE INDEX evidence_checked_at ON evidence USING brin (checked_at);

CREATE TABLE evidence_answers (
    evidence_id bigint      NOT NULL REFERENCES evidence (id) ON DELETE CASCADE,
    position    integer     NOT NULL,
    fetched_at  timestamptz NOT NULL,
    method      text        NOT NULL,
    url         text        NOT NULL,
    status      integer,                        -- NULL: no answer (timeout, refused)
    sha256      bytea       NOT NULL,           -- of the whole answer
    length      integer     NOT NULL,           -- the whole answer's size
    body        bytea       NOT NULL,           -- empty when not kept (past a check's bounds: 64 answers, 1 MiB)
    body_kept   boolean     NOT NULL,
    PRIMARY KEY (evidence_id, position)
);

CREATE TABLE action_calls (
    id              bigserial   PRIMARY KEY,
    action_id       bigint      NOT NULL REFERENCES actions (id),
    attempt         integer     NOT NULL,
    evidence_id     bigint,                     -- the executor's re-fetch that decided the call
    sent_at         timestamptz NOT NULL,
    method          text        NOT NULL,
    url             text        NOT NULL,
    idempotency_key text,                       -- as sent (a long key goes as its SHA-256)
    request_body    bytea       NOT NULL,       -- what was asked (never the headers: they carry credentials)
    status          integer,                    -- NULL: no answer
    sha256          bytea       NOT NULL,
    length          integer     NOT NULL,
    body            bytea       NOT NULL,
    body_kept       boolean     NOT NULL,
    outcome         text                        -- what the executor recorded after it: succeeded, failed, pending (in doubt)…
);
CREATE INDEX action_calls_action ON action_calls (action_id, id);

-- The check that opened a discrepancy or last changed its values; the check that planned an action.
ALTER TABLE discrepancies ADD COLUMN evidence_id bigint;
ALTER TABLE actions ADD COLUMN evidence_id bigint;

-- What prune keeps: evidence an open or acknowledged discrepancy, a pending action (or a failed one whose outcome is
-- unknown) or a call points at. Every evidence_id is NULL here, so building these scans each table once (a few seconds
-- per million rows, holding the lock the ALTERs above took) and inserts nothing.
CREATE INDEX discrepancies_evidence ON discrepancies (evidence_id)
    WHERE evidence_id IS NOT NULL AND status IN ('open', 'acknowledged');
CREATE INDEX actions_evidence ON actions (evidence_id)
    WHERE evidence_id IS NOT NULL AND (status = 'pending' OR (status = 'failed' AND in_doubt));
CREATE INDEX action_calls_evidence ON action_calls (evidence_id);

-- Which orders each delivery named (`explain` lists them with how the delivery ended). No foreign key: the worker
-- writes these on its hot path, where a key check would lock the delivery's row; `payrecon prune` removes a delivery's
-- pairs with it.
CREATE TABLE delivery_orders (
    delivery_id bigint NOT NULL,
    provider    text   NOT NULL,
    order_id    text   NOT NULL,
    PRIMARY KEY (delivery_id, provider, order_id)
);
CREATE INDEX delivery_orders_order ON delivery_orders (provider, order_id);

-- Where each version of an order came from: `payrecon orders import` names its file (SET LOCAL
-- payrecon.order_source); anything else that writes the table is `table`. A changed order keeps its previous
-- values in order_versions (only changes are kept: an import of a million new orders adds no row there).
ALTER TABLE orders ADD COLUMN source text NOT NULL DEFAULT coalesce(nullif(current_setting('payrecon.order_source', true), ''), 'table');

CREATE TABLE order_versions (
    provider    text        NOT NULL,
    order_id    text        NOT NULL,
    valid_from  timestamptz NOT NULL,           -- the replaced version's updated_at
    replaced_at timestamptz NOT NULL DEFAULT now(),
    source      text        NOT NULL,
    value       jsonb       NOT NULL            -- the replaced version's fields
);
CREATE INDEX order_versions_order ON order_versions (provider, order_id, replaced_at);

CREATE OR REPLACE FUNCTION orders_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF ROW(NEW.*) IS DISTINCT FROM ROW(OLD.*) AND NEW.updated_at = OLD.updated_at THEN
        NEW.updated_at := now();
    END IF;
    IF ROW(NEW.*) IS DISTINCT FROM ROW(OLD.*) THEN
        NEW.source := coalesce(nullif(current_setting('payrecon.order_source', true), ''), 'table');
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION orders_keep_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO order_versions (provider, order_id, valid_from, source, value)
    SELECT o.provider, o.order_id, o.updated_at, o.source,
           jsonb_build_object('merchant', o.merchant, 'site', o.site, 'transaction_ref', o.transaction_ref, 'intent', o.intent,
                              'amount_minor', o.amount_minor, 'currency', o.currency, 'fulfilment', o.fulfilment,
                              'refund_amount_minor', o.refund_amount_minor)
    FROM old_rows o JOIN new_rows n USING (provider, order_id)
    WHERE ROW(o.merchant, o.site, o.transaction_ref, o.intent, o.amount_minor, o.currency, o.fulfilment, o.refund_amount_minor)
          IS DISTINCT FROM ROW(n.merchant, n.site, n.transaction_ref, n.intent, n.amount_minor, n.currency, n.fulfilment, n.refund_amount_minor);
    RETURN NULL;
END $$;
CREATE TRIGGER orders_keep_version AFTER UPDATE ON orders REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION orders_keep_version();
