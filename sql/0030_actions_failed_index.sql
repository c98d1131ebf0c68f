-- The worker counts failed actions every 15 s (payrecon_actions_failed, which PayreconActionFailed reads): an index of
-- them alone keeps that a lookup of the few, never a scan of every action ever executed.
CREATE INDEX actions_failed ON actions (created_at) WHERE status = 'failed';
