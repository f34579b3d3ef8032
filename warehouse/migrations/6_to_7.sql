-- schema 6 → 7: a pool_results row (`cr2 study pools`, `cr2 study diagnostics`) keeps how many bootstrap resamples
-- its interval was computed from. A mean saving over targets uses only the resamples on which every averaged target
-- is reached, so that number can be well below the resamples drawn (pool_runs.n_resamples); `n` keeps what it held
-- (targets of a mean, resamples of a per-target saving, rows of a diagnostic). Rows stored before stay NULL (not
-- known) until their study is run again.
ALTER TABLE IF EXISTS pool_results ADD COLUMN IF NOT EXISTS n_resamples INTEGER;
