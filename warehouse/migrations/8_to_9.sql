-- schema 8 → 9: every stored test keeps its family (cr2.evaluation.families: decided once by the test's question), the
-- family's size, its Holm-adjusted p over that family and the one word that p allows, so every surface prints the
-- stored word instead of correcting the test again over another set. Rows stored before stay NULL (no word) until
-- their run or study is computed again.
ALTER TABLE IF EXISTS intervals ADD COLUMN IF NOT EXISTS family VARCHAR;
ALTER TABLE IF EXISTS intervals ADD COLUMN IF NOT EXISTS family_size INTEGER;
ALTER TABLE IF EXISTS intervals ADD COLUMN IF NOT EXISTS p_holm DOUBLE;
ALTER TABLE IF EXISTS intervals ADD COLUMN IF NOT EXISTS verdict VARCHAR;
ALTER TABLE IF EXISTS equal_risk ADD COLUMN IF NOT EXISTS family VARCHAR;
ALTER TABLE IF EXISTS equal_risk ADD COLUMN IF NOT EXISTS family_size INTEGER;
ALTER TABLE IF EXISTS pool_results ADD COLUMN IF NOT EXISTS family VARCHAR;
ALTER TABLE IF EXISTS pool_results ADD COLUMN IF NOT EXISTS family_size INTEGER;
ALTER TABLE IF EXISTS pool_results ADD COLUMN IF NOT EXISTS p_holm DOUBLE;
ALTER TABLE IF EXISTS pool_results ADD COLUMN IF NOT EXISTS verdict VARCHAR;
-- … and:
-- schema 8 → 9: a validity run (`cr2 guarantees`) keeps the seed of its re-split stream, so any run can be reproduced
-- with `--seed`, and the stage of each row: 'screening' (the run's re-splits) or 'confirmatory' (a family whose
-- screening verdict was "violation detected", re-checked on an independent stream with more re-splits). Rows stored
-- before stay NULL: a screening run whose seed was the config's (`cr2 guarantees` drew from config.seed then).
ALTER TABLE IF EXISTS guarantees ADD COLUMN IF NOT EXISTS seed BIGINT;
ALTER TABLE IF EXISTS guarantees ADD COLUMN IF NOT EXISTS stage VARCHAR;
-- … and:
-- schema 8 → 9: every side of a fixed-accuracy comparison is charged the lower of its frontier cost and the cheapest
-- Always-model reaching the target, and a grid target no Always-model reaches on the test set is left out of the
-- mean saving (cr2.evaluation.fixed_accuracy.FallbackCost); the equal-risk rows keep which targets and why. Rows
-- stored before stay NULL until their run is computed again.
ALTER TABLE IF EXISTS equal_risk ADD COLUMN IF NOT EXISTS dropped_targets VARCHAR;
