-- schema 7 → 8: every stored bootstrap interval keeps the two-sided p-value of its own resamples
-- (cr2.evaluation.statistics.bootstrap_p_values), so a family's Holm correction reads the same distribution as the
-- interval instead of a normal approximation of its width. Rows stored before stay NULL until their run or study
-- is computed again.
ALTER TABLE IF EXISTS intervals ADD COLUMN IF NOT EXISTS p_value DOUBLE;
ALTER TABLE IF EXISTS pool_results ADD COLUMN IF NOT EXISTS p_value DOUBLE;
ALTER TABLE IF EXISTS premise_results ADD COLUMN IF NOT EXISTS p_value DOUBLE;
-- … and an evaluation run keeps the one α at which a method swept over several α (CR²) is compared with others
ALTER TABLE IF EXISTS eval_runs ADD COLUMN IF NOT EXISTS default_alpha DOUBLE;
