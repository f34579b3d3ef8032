-- schema 8 → 9: a validity run (`cr2 guarantees`) keeps the seed of its re-split stream, so any run can be reproduced
-- with `--seed`, and the stage of each row: 'screening' (the run's re-splits) or 'confirmatory' (a family whose
-- screening verdict was "violation detected", re-checked on an independent stream with more re-splits). Rows stored
-- before stay NULL: a screening run whose seed was the config's (`cr2 guarantees` drew from config.seed then).
ALTER TABLE IF EXISTS guarantees ADD COLUMN IF NOT EXISTS seed BIGINT;
ALTER TABLE IF EXISTS guarantees ADD COLUMN IF NOT EXISTS stage VARCHAR;
