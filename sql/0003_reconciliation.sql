-- What reconciling found and decided.

-- The latest normalized provider snapshot of each order, for reports and debugging.
CREATE TABLE snapshots (
    provider        text        NOT NULL,
    order_id        text        NOT NULL,
    transaction_ref text        NOT NULL,
    snapshot        jsonb       NOT NULL,
    fetched_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, order_id)
);

-- PXP modification transactions payrecon made or learned of, linked to their parent.
CREATE TABLE pxp_modifications (
    system_transaction_id        text        PRIMARY KEY,
    parent_system_transaction_id text        NOT NULL,
    order_id                     text,
    operation                    text        NOT NULL CHECK (operation IN ('capture', 'void', 'refund', 'increment')),
    amount_minor                 bigint      NOT NULL,
    currency                     text        NOT NULL,
    state                        text        NOT NULL,
    action_id                    bigint,
    created_at                   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pxp_modifications_parent ON pxp_modifications (parent_system_transaction_id);

-- Discrepancies: open while they hold, counted, resolved when a later check no longer finds them.
CREATE TABLE discrepancies (
    id                   bigserial PRIMARY KEY,
    provider             text        NOT NULL,
    order_id             text,                  -- NULL for unknown_order
    transaction_ref      text        NOT NULL,
    kind                 text        NOT NULL CHECK (kind IN ('missing_at_provider', 'unknown_order', 'merchant_mismatch',
                             'site_mismatch', 'currency_mismatch', 'intent_mismatch', 'amount_mismatch', 'over_captured',
                             'over_refunded', 'state_mismatch', 'action_not_allowed', 'stale_pending')),
    status               text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
    expected             jsonb       NOT NULL DEFAULT '{}',
    actual               jsonb       NOT NULL DEFAULT '{}',
    detail               text        NOT NULL DEFAULT '',
    amount_at_risk_minor bigint      NOT NULL DEFAULT 0,
    currency             text,
    first_seen           timestamptz NOT NULL DEFAULT now(),
    last_seen            timestamptz NOT NULL DEFAULT now(),
    occurrences          integer     NOT NULL DEFAULT 1,
    resolved_at          timestamptz
);
-- At most one open discrepancy of a kind per order (or per unknown transaction).
CREATE UNIQUE INDEX discrepancies_open ON discrepancies (provider, coalesce(order_id, ''), transaction_ref, kind) WHERE status = 'open';
CREATE INDEX discrepancies_order ON discrepancies (provider, order_id) WHERE status = 'open';
CREATE INDEX discrepancies_last_seen ON discrepancies (last_seen);

-- The action outbox: planned once (unique idempotency key), executed at most once.
CREATE TABLE actions (
    id               bigserial PRIMARY KEY,
    provider         text        NOT NULL,
    order_id         text        NOT NULL,
    action           text        NOT NULL CHECK (action IN ('capture', 'void', 'refund', 'increment')),
    amount_minor     bigint      NOT NULL CHECK (amount_minor >= 0),
    currency         text        NOT NULL,
    target_minor     bigint      NOT NULL,
    provider_target  text,                      -- PXP systemTransactionId, PayPal authorization or capture id
    idempotency_key  text        NOT NULL UNIQUE,
    status           text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed', 'superseded')),
    attempts         integer     NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    last_error       text,
    provider_ref     text,                      -- what the provider answered (new systemTransactionId, capture id, ...)
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX actions_order ON actions (provider, order_id);
CREATE INDEX actions_pending ON actions (created_at) WHERE status = 'pending';

-- One row per `payrecon reconcile` run.
CREATE TABLE runs (
    id              bigserial PRIMARY KEY,
    started_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    options         jsonb       NOT NULL DEFAULT '{}',
    checked         bigint      NOT NULL DEFAULT 0,
    matched         bigint      NOT NULL DEFAULT 0,
    opened          bigint      NOT NULL DEFAULT 0,
    resolved        bigint      NOT NULL DEFAULT 0,
    actions_emitted bigint      NOT NULL DEFAULT 0,
    errors          bigint      NOT NULL DEFAULT 0,
    error_list      jsonb       NOT NULL DEFAULT '[]',
    exit_code       integer
);
