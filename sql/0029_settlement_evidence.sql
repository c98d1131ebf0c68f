-- The evidence of a finding a settlement file opened or changed (`payrecon explain`): an `evidence` row of source
-- 'settlement' (when the file was imported), the file and the line it came from with the row as read, and for a line
-- compared with the API (settlement_mismatch, fee_mismatch; settlement_missing's capture) a copy of the answer that
-- stated the money, kept in evidence_answers like a check's. Before, explain said "no evidence: recorded before payrecon
-- kept it" for a finding recorded seconds earlier.
ALTER TABLE evidence DROP CONSTRAINT evidence_source_check;
-- NOT VALID: every row before this holds one of the older sources; reading them all to prove it would hold the lock
-- every check's write waits for.
ALTER TABLE evidence ADD CONSTRAINT evidence_source_check CHECK (source IN ('webhook', 'sweep', 'executor', 'command', 'settlement')) NOT VALID;

CREATE TABLE settlement_evidence (
    evidence_id  bigint  PRIMARY KEY REFERENCES evidence (id) ON DELETE CASCADE,
    file_id      bigint  REFERENCES settlement_files (id),   -- NULL: no file (a capture no file lists)
    line         integer,                                     -- NULL: the file as a whole
    row_text     text                                         -- the row's fields as read
);
