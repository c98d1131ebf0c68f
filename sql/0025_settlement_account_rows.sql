-- A settlement file's body rows with no Transaction ID: the account's own (a balance transfer, a withdrawal, a fee of
-- the account), kept with the file and the line that brought them, never matched to a transaction (PayPal's public
-- STL samples carry such rows; they were a reason to refuse the whole file before).
CREATE TABLE settlement_account_rows (
    file_id        bigint      NOT NULL REFERENCES settlement_files (id),
    line           integer     NOT NULL,
    event_code     text        NOT NULL,
    direction      text        NOT NULL CHECK (direction IN ('CR', 'DR')),
    initiated_at   timestamptz,
    completed_at   timestamptz,
    currency       text        NOT NULL,
    gross_minor    bigint      NOT NULL CHECK (gross_minor >= 0),
    fee_minor      bigint      CHECK (fee_minor >= 0),
    fee_direction  text        CHECK (fee_direction IN ('CR', 'DR')),
    fee_currency   text,
    PRIMARY KEY (file_id, line)
);
-- What a file held besides its lines: account rows, and transaction detail rows not kept (pending, or denied).
ALTER TABLE settlement_files ADD COLUMN account_rows integer NOT NULL DEFAULT 0,
    ADD COLUMN pending_rows integer NOT NULL DEFAULT 0, ADD COLUMN denied_rows integer NOT NULL DEFAULT 0;
