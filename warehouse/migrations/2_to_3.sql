-- schema 2 → 3: costs gain the pre-execution estimate ĉ (cost_est_norm; old rows are NULL
-- until `cr2 prepare` recomputes them — its cache key changed with the code, so the next run does),
-- evaluation runs record the cost routers decided with (old runs decided with the realised cost), and the
-- `methods` table (the router catalogue per run) is created by schema.sql right after this file.
ALTER TABLE IF EXISTS costs ADD COLUMN IF NOT EXISTS cost_est_norm DOUBLE;
ALTER TABLE IF EXISTS eval_runs ADD COLUMN IF NOT EXISTS decision_cost VARCHAR DEFAULT 'realised';
