-- guarantee_runs on a warehouse read as it is from before schema 9: no stage or seed stored, so every row is a
-- screening row, its seed unknown, and nothing was re-checked.
SELECT run_id, any_value(source) AS source, any_value(label_source) AS label_source, max(n_resplits) AS n_resplits,
       max(n_calib) AS n_calib, max(created_at) AS created_at, CAST(NULL AS BIGINT) AS seed,
       CAST(NULL AS BIGINT) AS confirm_seed, CAST(NULL AS INTEGER) AS confirm_n_resplits
FROM guarantees
GROUP BY run_id
ORDER BY max(created_at) DESC, run_id
