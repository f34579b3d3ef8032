-- guarantee_cells on a warehouse read as it is from before schema 9: its guarantees table has no stage or seed, and
-- every row is a screening row whose seed was not stored. Parameter: $run_id.
SELECT rule, check_name, metric, lam, alpha, "group", target, delta, value, se, bound, n_resplits, n_calib,
       'screening' AS stage, CAST(NULL AS BIGINT) AS seed
FROM guarantees
WHERE run_id = $run_id AND check_name <> 'price' AND bound IS NOT NULL
ORDER BY rule, check_name, alpha, target, lam, "group"
