-- schema 8 → 9: every side of a fixed-accuracy comparison is charged the lower of its frontier cost and the cheapest
-- Always-model reaching the target, and a grid target no Always-model reaches on the test set is left out of the
-- mean saving (cr2.evaluation.fixed_accuracy.FallbackCost); the equal-risk rows keep which targets and why. Rows
-- stored before stay NULL until their run is computed again.
ALTER TABLE IF EXISTS equal_risk ADD COLUMN IF NOT EXISTS dropped_targets VARCHAR;
