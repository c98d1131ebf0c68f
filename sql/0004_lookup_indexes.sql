-- A PXP event that names only a systemTransactionId finds its order through the stored snapshot (the parent's id)
-- or a modification payrecon made; without this index that lookup reads every snapshot.
CREATE INDEX snapshots_pxp_system_transaction_id ON snapshots ((snapshot -> 'actionTargets' ->> 'systemTransactionID'))
    WHERE provider = 'pxp';
