-- Record a new labeling run (running). done/total describe the current selection (--limit): total = its
-- queries, done = those the run has labelled.
INSERT INTO label_runs (run_id, source, model_id, revision, backend, backend_args, lm_eval_version, task_config_hash, started_at, finished_at, status, done, total) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, 'running', ?, ?)
