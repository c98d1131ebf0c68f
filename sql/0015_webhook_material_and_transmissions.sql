-- What verifying webhooks taught the receiver and keeps across restarts: PayPal's signing certificates, saved the
-- first time one verifies a delivery and kept until the chain's notAfter (never on a timer, never evicted by a
-- stranger's certificate URLs). `serve` validates each again at start, so a restart starts warm.
CREATE TABLE webhook_material (
    provider   text        NOT NULL,
    key        text        NOT NULL,          -- PayPal: the certificate URL
    value      bytea       NOT NULL,          -- PayPal: the PEM served there
    keep_until timestamptz NOT NULL,
    saved_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, key)
);

-- One body per signed transmission. PayPal signs transmission_id|time|webhook_id|crc32(body): another body with the
-- same CRC32 passes the signature. The primary key is the guard, so two bodies under one transmission id are never
-- both stored, in one group commit or on two receivers: the second insert finds the first row (waiting for its
-- transaction if need be), and a delivery whose body hash differs from the stored one is refused (401).
CREATE TABLE transmissions (
    provider        text        NOT NULL,
    transmission_id text        NOT NULL,
    body_sha256     bytea       NOT NULL,
    received_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, transmission_id)
);
INSERT INTO transmissions (provider, transmission_id, body_sha256, received_at)
SELECT DISTINCT ON (provider, transmission_id) provider, transmission_id, sha256(body), received_at
FROM deliveries WHERE transmission_id IS NOT NULL
ORDER BY provider, transmission_id, id;
CREATE INDEX transmissions_received ON transmissions (received_at);

-- Samples keep the first 8 KiB of a rejected body now (they were 64 KiB): what an operator needs to see what was
-- sent, without letting a flood of large bodies grow the table by megabytes an hour.
COMMENT ON COLUMN rejected_deliveries.body_prefix IS 'at most the first 8 KiB of the body';
