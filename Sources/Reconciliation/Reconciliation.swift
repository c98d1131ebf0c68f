// Reconciliation
