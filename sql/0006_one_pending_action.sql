-- An order has at most one pending action of each kind for each of its transactions. Checks are
-- serialized per order and supersede before they insert; this makes the rule hold whatever writes the table.
-- Older duplicates (from before checks were serialized) are superseded first, keeping the newest.
UPDATE actions a SET status = 'superseded', updated_at = now(),
       last_error = coalesce(a.last_error, 'superseded by a newer pending action of the same kind (migration 0006)')
WHERE a.status = 'pending' AND EXISTS (
    SELECT 1 FROM actions b
    WHERE b.status = 'pending' AND b.provider = a.provider AND b.order_id = a.order_id AND b.action = a.action
      AND coalesce(b.provider_target, '') = coalesce(a.provider_target, '') AND b.id > a.id);

CREATE UNIQUE INDEX actions_one_pending ON actions (provider, order_id, action, (coalesce(provider_target, '')))
    WHERE status = 'pending';
