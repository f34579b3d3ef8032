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
