-- The pools of one study as stored (docs/results.md "CR² across measured pools"): per pool its label source, its
-- models (JSON: id, name, params, role, in pool order), m_ref, evaluation run, home (relative to the base
-- warehouse), test rows, evaluable (solvable) test rows and paired resamples. Parameter: study_id.
SELECT pool, label_source, models, reference, run_id, home, n_test, n_evaluable, n_queries, n_resamples,
       cost_ratio_realised
FROM pool_runs
WHERE study_id = $study_id
ORDER BY pool
