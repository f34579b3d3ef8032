-- CR²'s operating points of one evaluation run at one α (pooled over benchmarks), one row per λ: the
-- headline table a Prefect artifact shows. Parameters: $run_id, $alpha.
SELECT lam, alpha, risk, local_rate, accuracy, cost, n, n_risk
FROM operating_points
WHERE run_id = $run_id AND method = 'cr2' AND benchmark = 'all' AND abs(alpha - $alpha) < 1e-12
ORDER BY lam
