-- Who acknowledged a discrepancy (`payrecon discrepancies ack ID --by NAME`, the OS user by default): an auditor asks.
ALTER TABLE discrepancies ADD COLUMN acknowledged_by text;
