-- For docs/results.md, "Validity over re-splits": every bounded cell of one validity run (`cr2 guarantees`)
-- — per rule, check, λ and α the Monte-Carlo mean over re-splits with its SE and its bound — so a page can apply
-- the 3-SE rule (cr2.evaluation.metrics.bound_verdict) itself. Parameter: $run_id.
SELECT rule, check_name, metric, lam, alpha, "group", value, se, bound, n_resplits, n_calib
FROM guarantees
WHERE run_id = $run_id AND check_name <> 'price' AND bound IS NOT NULL
ORDER BY rule, check_name, alpha, lam, "group"
