-- schema 4 → 5: a cost row names the split seed its pre-execution estimate ĉ was computed from (the train split's
-- mean output length per benchmark and model; T0/E0 too under reference normalisation), so two seeds coexist in
-- one warehouse and no seed routes with another seed's estimates. Stored costs cannot say which seed they came
-- from: they are dropped (schema.sql recreates the table right after this file) and `cr2 prepare` recomputes them,
-- its cache key having changed with the code. Evaluation runs record the seed they used (NULL for older runs).
DROP TABLE IF EXISTS costs;
ALTER TABLE IF EXISTS eval_runs ADD COLUMN IF NOT EXISTS split_seed INTEGER;
