-- The money at risk when each `payrecon reconcile` run finished, per currency (minor units as text, each order counted
-- once, as `payrecon report` counts it): the console's 30-day chart reads it. Runs before this migration have none.
ALTER TABLE runs ADD COLUMN at_risk jsonb;
