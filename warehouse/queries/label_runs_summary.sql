-- The label_runs rows of a list of runs.
SELECT run_id, source, model_id, backend, status, done, total, lm_eval_version, task_config_hash, started_at, finished_at FROM label_runs WHERE run_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY run_id
