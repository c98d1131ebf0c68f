-- Providers' settlement report files (`payrecon settlement import`) and their lines. A file is kept once, by its
-- bytes' SHA-256 (the same file twice is a no-op); a line once, by (transaction id, event code, direction), whichever
-- file brought it first (a day's STL and TRR both list a payment).
CREATE TABLE settlement_files (
    id            bigserial   PRIMARY KEY,
    provider      text        NOT NULL,
    sha256        bytea       NOT NULL,
    name          text        NOT NULL,
    kind          text,
    account       text,
    day           date,
    period_start  timestamptz,
    period_end    timestamptz,
    body_rows     integer     NOT NULL,
    lines_new     integer     NOT NULL DEFAULT 0,
    -- Where the file's own counts or totals do not add up, or it was cut short (settlement_incomplete).
    problems      text[]      NOT NULL DEFAULT '{}',
    imported_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (provider, sha256)
);
CREATE INDEX settlement_files_day ON settlement_files (provider, day);

CREATE TABLE settlement_lines (
    provider        text        NOT NULL,
    transaction_id  text        NOT NULL,
    event_code      text        NOT NULL,
    direction       text        NOT NULL CHECK (direction IN ('CR', 'DR')),
    role            text        NOT NULL CHECK (role IN ('payment', 'money_back', 'other')),
    file_id         bigint      NOT NULL REFERENCES settlement_files (id),
    line            integer     NOT NULL,
    reference_id    text,
    reference_type  text,
    invoice_id      text,
    custom_field    text,
    initiated_at    timestamptz,
    completed_at    timestamptz,
    currency        text        NOT NULL,
    gross_minor     bigint      NOT NULL CHECK (gross_minor >= 0),
    fee_minor       bigint      CHECK (fee_minor >= 0),
    fee_direction   text        CHECK (fee_direction IN ('CR', 'DR')),
    fee_currency    text,
    PRIMARY KEY (provider, transaction_id, event_code, direction)
);
CREATE INDEX settlement_lines_file ON settlement_lines (file_id);

-- The five kinds settlement raises. Adding the check reads discrepancies once under its lock (checks that record a
-- finding wait meanwhile): run it at a quiet hour on a large table.
ALTER TABLE discrepancies DROP CONSTRAINT discrepancies_kind_check;
ALTER TABLE discrepancies ADD CONSTRAINT discrepancies_kind_check CHECK (kind IN ('missing_at_provider', 'unknown_order',
    'merchant_mismatch', 'site_mismatch', 'currency_mismatch', 'intent_mismatch', 'amount_mismatch', 'over_captured',
    'over_refunded', 'state_mismatch', 'action_not_allowed', 'stale_pending', 'disputed', 'reversed', 'action_failed',
    'settlement_missing', 'unknown_settlement', 'settlement_mismatch', 'fee_mismatch', 'settlement_incomplete'));
