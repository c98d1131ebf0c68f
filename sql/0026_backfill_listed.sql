-- What `payrecon backfill` listed and handled, by (transaction, event code, status as listed). Every run reads again the
-- windows of its last PAYRECON_BACKFILL_REREAD (default 3d), because providers list some transactions late (PayPal
-- within about 3 hours; an eCheck or a payment held for review when it turns balance-affecting). A row read again is
-- handled only when it is new here, or listed with another status: a re-read re-checks nothing twice and opens nothing
-- twice. Rows made two days before the re-read span are removed by the run that passes them (no run reads them again).
CREATE TABLE backfill_listed (
    provider        text        NOT NULL,
    transaction_id  text        NOT NULL,
    event_code      text        NOT NULL,
    status          text        NOT NULL,
    made_at         timestamptz,
    listed_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, transaction_id, event_code, status)
);
CREATE INDEX backfill_listed_made ON backfill_listed (provider, made_at);
