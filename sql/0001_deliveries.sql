-- Webhook deliveries: the durable inbox and the worker's queue.
-- A delivery is stored once per (provider, dedupe_key); redeliveries only count on the stored row.
CREATE TABLE deliveries (
    id                  bigserial PRIMARY KEY,
    provider            text        NOT NULL CHECK (provider IN ('pxp', 'paypal', 'paypercut')),
    dedupe_key          text        NOT NULL,   -- PayPal/Paypercut event id; PXP X-Request-Id, else sha256(body)
    event_type          text,                   -- informational; never required
    received_at         timestamptz NOT NULL DEFAULT now(),
    headers             jsonb       NOT NULL,   -- every request header as received: [[name, value], ...]
    body                bytea       NOT NULL,   -- the raw body bytes the signature was verified on
    status              text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'dead')),
    attempts            integer     NOT NULL DEFAULT 0,
    next_attempt_at     timestamptz NOT NULL DEFAULT now(),
    lease_owner         text,                   -- the worker holding it, while its lease has not expired
    lease_expires_at    timestamptz,
    last_error          text,
    redeliveries        integer     NOT NULL DEFAULT 0,
    last_redelivered_at timestamptz,
    processed_at        timestamptz,
    UNIQUE (provider, dedupe_key)
);
-- The worker's claim: due, pending, not leased (or lease expired).
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';

-- Deliveries answered 4xx (bad signature, malformed, too large...): kept for audit, never processed.
CREATE TABLE rejected_deliveries (
    id           bigserial PRIMARY KEY,
    provider     text        NOT NULL,
    reason       text        NOT NULL,          -- the error code answered (invalid_signature, body_too_large, ...)
    message      text        NOT NULL,
    headers      jsonb       NOT NULL,
    body_prefix  bytea       NOT NULL,          -- at most the first 64 KiB
    body_bytes   bigint      NOT NULL,          -- the declared or received size
    remote_addr  text,
    received_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rejected_deliveries_received ON rejected_deliveries (received_at);
