-- Every rejected delivery is counted, per (provider, reason, source address, hour); only the first 20 of each
-- (provider, reason, hour) are kept as samples in rejected_deliveries. An unauthenticated sender can
-- add to a count, not to the disk. `payrecon prune` removes counts with the samples (PAYRECON_RETAIN rejected=).
CREATE TABLE rejection_counts (
    provider text        NOT NULL,
    reason   text        NOT NULL,
    source   text        NOT NULL,   -- the sender's address ('' when unknown)
    hour     timestamptz NOT NULL,   -- date_trunc('hour', received)
    count    bigint      NOT NULL CHECK (count > 0),
    PRIMARY KEY (provider, reason, source, hour)
);
CREATE INDEX rejection_counts_hour ON rejection_counts (hour);
CREATE INDEX rejected_deliveries_sampled ON rejected_deliveries (provider, reason, received_at);
